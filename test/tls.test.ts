/**
 * TLS on the beanstalkd and Gearman ports and HTTPS on the dashboard, against the real server
 * process, with certificates this test makes (test/support/tls-certs.ts) and real TLS clients:
 * Node's tls, Python's ssl module and `openssl s_client`.
 */
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminServer } from './support/admin-server.js';
import { gearmanPortFromLog } from './support/gearman-server.js';
import { RawClient, tcpPut, tcpReserve } from './support/raw-client.js';
import { startProcessServer, type ServerProcess } from './support/servers.js';
import { TestPki, type CertFiles } from './support/tls-certs.js';

const run = promisify(execFile);
/** Perl's Gearman::Client (Debian's libgearman-client-perl), whose job servers take use_ssl. */
const HAS_PERL_GEARMAN = await run('perl', ['-MGearman::Client', '-MIO::Socket::SSL', '-e', '1']).then(
  () => true,
  () => false,
);
const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const pki = new TestPki();
let ca: CertFiles;
let otherCa: CertFiles;
let server: CertFiles;
let client: CertFiles;
let strangerClient: CertFiles;

const servers: ServerProcess[] = [];
const sockets: net.Socket[] = [];

beforeAll(() => {
  ca = pki.makeCa('Beanpole Test CA');
  otherCa = pki.makeCa('Another CA');
  server = pki.makeServer(ca, 'beanpole-a');
  client = pki.makeClient(ca, 'worker-7');
  strangerClient = pki.makeClient(otherCa, 'stranger');
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) await s.stop();
  pki.remove();
});

/** A Beanpole with Gearman on a port of its own (read from the log); `args` add the TLS flags. */
async function start(args: string[], admin = false): Promise<{ proc: ServerProcess; port: number; gearman: number; url: string | null }> {
  const base = ['--gearman-listen', '127.0.0.1', '--gearman-port', '0', ...args];
  if (admin) {
    const proc = await startAdminServer(base);
    servers.push(proc);
    return { proc, port: proc.port, gearman: await gearmanPortFromLog(() => proc.stderr()), url: proc.url };
  }
  const proc = await startProcessServer('beanpole', { tcp: true }, base);
  servers.push(proc);
  return { proc, port: (proc.address as { port: number }).port, gearman: await gearmanPortFromLog(() => proc.stderr()), url: null };
}

function tlsArgs(files: CertFiles = server): string[] {
  return ['--tls-cert', files.cert, '--tls-key', files.key];
}

/** Trusts the test CA; presents `cert` when given. */
function clientOptions(cert?: CertFiles): tls.ConnectionOptions {
  return { ca: pki.read(ca.cert), ...(cert === undefined ? {} : { cert: pki.read(cert.cert), key: pki.read(cert.key) }) };
}

async function tlsClient(port: number, cert?: CertFiles): Promise<RawClient> {
  const c = await RawClient.connectTls(port, clientOptions(cert));
  sockets.push(c.socket);
  return c;
}

async function plainClient(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  sockets.push(c.socket);
  return c;
}

/** The first line a Gearman port answers to a text admin command. */
async function gearmanLine(c: RawClient, command: string): Promise<string> {
  c.send(`${command}\n`);
  const b = await c.bytes(1);
  let line = b.toString('latin1');
  while (!line.endsWith('\n')) line += (await c.bytes(1)).toString('latin1');
  return line;
}

/**
 * True when the server refuses this client: the handshake fails, or (TLS 1.3 lets a client
 * finish before the server has checked its certificate) the connection closes with no answer.
 */
async function refused(port: number, cert?: CertFiles): Promise<boolean> {
  let c: RawClient;
  try {
    c = await tlsClient(port, cert);
  } catch {
    return true;
  }
  c.send('list-tubes\r\n');
  return (await c.waitClosed()) === '';
}

/** JSON log lines of `proc` whose message includes `text`. */
function logLines(proc: ServerProcess, text: string): string[] {
  return proc
    .stderr()
    .split('\n')
    .filter((l) => l.includes(text));
}

async function waitForLog(proc: ServerProcess, text: string, count = 1): Promise<void> {
  for (let i = 0; i < 500 && logLines(proc, text).length < count; i++) await delay(20);
  expect(logLines(proc, text).length, `log lines with ${JSON.stringify(text)}:\n${proc.stderr()}`).toBeGreaterThanOrEqual(count);
}

/** GET `path` of the dashboard at `base` over HTTPS, trusting the test CA: status and body. */
function httpsGet(base: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(new URL(path, base), { ca: pki.read(ca.cert) }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/** The subject CN of the certificate the server presents to a new TLS client. */
function servedCn(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ port, host: '127.0.0.1', ...clientOptions() }, () => {
      const cn = s.getPeerCertificate().subject.CN;
      s.destroy();
      resolve(String(cn));
    });
    s.once('error', reject);
  });
}

describe('TLS only (--tls-cert, --tls-key)', () => {
  let srv: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    srv = await start(tlsArgs());
  });

  it('serves beanstalkd clients over TLS (Node)', async () => {
    const c = await tlsClient(srv.port);
    const id = await tcpPut(c, 'over tls');
    expect(await tcpReserve(c)).toEqual({ id, body: Buffer.from('over tls') });
    expect(await c.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
  });

  it('serves a Python client (ssl-wrapped socket)', async () => {
    const script = `
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as raw:
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(b"put 0 0 60 6\\r\\npython\\r\\n")
        print(s.recv(100).decode().strip())
        s.sendall(b"stats-tube default\\r\\n")
        print(s.recv(4096).decode().split("\\r\\n")[0])
`;
    const { stdout } = await run('python3', ['-c', script, String(srv.port), ca.cert]);
    expect(stdout).toMatch(/^INSERTED \d+\nOK \d+\n$/);
  });

  it('serves openssl s_client on both ports', async () => {
    const sClient = (port: number, input: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const child = spawn('openssl', ['s_client', '-quiet', '-ign_eof', '-verify_return_error', '-CAfile', ca.cert, '-connect', `127.0.0.1:${port}`], { stdio: ['pipe', 'pipe', 'ignore'] });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString('latin1')));
        child.once('error', reject);
        child.once('exit', () => resolve(out));
        child.stdin.end(input);
        // Gearman keeps the connection open: the answer is enough.
        const timer = setInterval(() => {
          if (out.includes('\n')) child.kill();
        }, 20);
        child.once('exit', () => clearInterval(timer));
      });
    expect(await sClient(srv.port, 'list-tubes\r\nquit\r\n')).toBe('OK 14\r\n---\n- default\n\r\n');
    expect(await sClient(srv.gearman, 'version\n')).toMatch(/^OK \S+\n/);
  });

  it('serves Gearman clients over TLS', async () => {
    const c = await tlsClient(srv.gearman);
    expect(await gearmanLine(c, 'version')).toMatch(/^OK \S+\n$/);
  });

  it('closes plaintext clients on both ports without an answer, and logs each peer once', async () => {
    for (const port of [srv.port, srv.gearman, srv.port]) {
      const c = await plainClient(port);
      c.send(port === srv.port ? 'list-tubes\r\n' : 'version\n');
      expect(await c.waitClosed()).toBe('');
    }
    await waitForLog(srv.proc, 'plaintext client refused');
    // Each port has its own doorway: one line per port, however many times a peer tries.
    expect(logLines(srv.proc, 'plaintext client refused')).toHaveLength(2);
  });

  it('survives garbage that looks like the start of a TLS record', async () => {
    // Its own server, with a short handshake limit: junk that reads as a partial record waits for the rest until then.
    const target = await start([...tlsArgs(), '--tls-handshake-timeout-ms', '1500']);
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    const clients = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const c = await plainClient(i % 2 === 0 ? target.port : target.gearman);
        const junk = Buffer.from(Array.from({ length: 1 + ((i * 337) % 20_000) }, random));
        junk[0] = 0x16;
        // Some look like a handshake record of a TLS version, with a length that may or may not come.
        if (i % 4 === 1) junk.set([0x03, 0x01], 1);
        c.send(junk);
        if (i % 3 === 0) c.end();
        return c;
      }),
    );
    for (const c of clients) await c.waitClosed(10_000);
    const c = await tlsClient(target.port);
    expect(await c.call('list-tubes\r\n')).toMatch(/^OK /);
    expect(await gearmanLine(await tlsClient(target.gearman), 'version')).toMatch(/^OK /);
    expect(target.proc.process.exitCode).toBeNull();
  });
});

describe('--tls-allow-plain', () => {
  it('serves TLS and plaintext clients on the same beanstalkd and Gearman ports', async () => {
    const srv = await start([...tlsArgs(), '--tls-allow-plain'], true);
    const plain = await plainClient(srv.port);
    const secure = await tlsClient(srv.port);
    const id = await tcpPut(plain, 'from a plaintext producer');
    expect(await tcpReserve(secure)).toEqual({ id, body: Buffer.from('from a plaintext producer') });
    expect(await gearmanLine(await plainClient(srv.gearman), 'version')).toMatch(/^OK /);
    expect(await gearmanLine(await tlsClient(srv.gearman), 'version')).toMatch(/^OK /);
    expect(logLines(srv.proc, 'refused')).toEqual([]);
    // Without --tls-ca no certificate is asked for: no connection has an identity.
    const rows = JSON.parse((await httpsGet(srv.url!, 'api/connections')).body) as { identity: string | null }[];
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows.every((r) => r.identity === null)).toBe(true);
  });

  it('still refuses a TLS client that fails its handshake, and keeps serving plaintext', async () => {
    const srv = await start([...tlsArgs(), '--tls-allow-plain']);
    // A client that trusts another CA gives up on the server's certificate.
    await expect(RawClient.connectTls(srv.port, { ca: pki.read(otherCa.cert) })).rejects.toThrow();
    expect(await (await plainClient(srv.port)).call('list-tubes\r\n')).toMatch(/^OK /);
  });
});

describe('mutual TLS (--tls-ca)', () => {
  let srv: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    srv = await start([...tlsArgs(), '--tls-ca', ca.cert], true);
  });

  it('serves a client whose certificate the CA signed, on both ports', async () => {
    const c = await tlsClient(srv.port, client);
    expect(await c.call('list-tubes\r\n')).toBe('OK 14\r\n---\n- default\n\r\n');
    expect(await gearmanLine(await tlsClient(srv.gearman, client), 'version')).toMatch(/^OK /);
  });

  it("shows each connection's certificate CN in the dashboard's connection list", async () => {
    const c = await tlsClient(srv.port, client);
    expect(await c.call('use identified\r\n')).toBe('USING identified\r\n');
    const { status, body } = await httpsGet(srv.url!, 'api/connections');
    expect(status).toBe(200);
    const rows = JSON.parse(body) as { identity: string | null; using: string; address: string }[];
    const row = rows.find((r) => r.using === 'identified');
    expect(row?.identity).toBe('worker-7');
    // The peer's address reads through the TLS socket as through a plain one.
    expect(row?.address).toBe(`127.0.0.1:${c.socket.localPort}`);
  });

  it('serves a Python client presenting its certificate', async () => {
    const script = `
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as raw:
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(b"list-tubes\\r\\n")
        print(s.recv(100).decode().split("\\r\\n")[0])
`;
    const { stdout } = await run('python3', ['-c', script, String(srv.port), ca.cert, client.cert, client.key]);
    expect(stdout).toMatch(/^OK \d+\n$/);
  });

  it.skipIf(!HAS_PERL_GEARMAN)("serves Perl's Gearman::Client over TLS with its certificate, and refuses it without one", async () => {
    const script = `
use strict; use warnings; use Gearman::Client;
my ($port, $ca, $cert, $key) = @ARGV;
my $client = Gearman::Client->new(job_servers => [{ host => '127.0.0.1', port => $port, use_ssl => 1,
  ca_file => $ca, ($cert ? (cert_file => $cert, key_file => $key) : ()) }]);
my $handle = $client->dispatch_background('tls_fn', 'over tls');
print defined $handle ? "handle\\n" : "no handle\\n";
`;
    const withCert = await run('perl', ['-e', script, String(srv.gearman), ca.cert, client.cert, client.key]);
    expect(withCert.stdout).toBe('handle\n');
    const status = await tlsClient(srv.gearman, client);
    expect(await gearmanLine(status, 'status')).toMatch(/^tls_fn\t1\t0\t0\n$/);
    // Without a certificate the handshake fails: no handle (Gearman::Client may also die of the closed socket).
    const without = await run('perl', ['-e', script, String(srv.gearman), ca.cert]).then(
      (r) => r.stdout,
      (err: { stdout: string }) => err.stdout,
    );
    expect(without).not.toBe('handle\n');
  });

  it('refuses a client without a certificate, and one whose certificate another CA signed', async () => {
    expect(await refused(srv.port)).toBe(true);
    expect(await refused(srv.gearman)).toBe(true);
    expect(await refused(srv.port, strangerClient)).toBe(true);
    expect(await refused(srv.gearman, strangerClient)).toBe(true);
    await waitForLog(srv.proc, 'TLS: handshake failed');
  });
});

describe('the dashboard over HTTPS', () => {
  it('serves the API with the same certificate, and no plain HTTP', async () => {
    const srv = await start(tlsArgs(), true);
    expect(srv.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/$/);
    const { status, body } = await httpsGet(srv.url!, 'healthz');
    expect(status).toBe(200);
    expect(JSON.parse(body)).toMatchObject({ ok: true });
    const plain = await fetch(new URL('healthz', srv.url!.replace('https:', 'http:'))).then(
      (r) => r.status,
      () => 'refused',
    );
    expect(plain).not.toBe(200);
  });
});

describe('SIGHUP', () => {
  it('serves a new certificate to new connections; established ones keep working; a bad file keeps the old one', async () => {
    const live: CertFiles = { cert: `${pki.dir}/live.pem`, key: `${pki.dir}/live.key` };
    copyFileSync(server.cert, live.cert);
    copyFileSync(server.key, live.key);
    const srv = await start(tlsArgs(live), true);
    const dashboardPort = Number(new URL(srv.url!).port);
    expect(await servedCn(srv.port)).toBe('beanpole-a');
    const established = await tlsClient(srv.port);
    expect(await established.call('use rotating\r\n')).toBe('USING rotating\r\n');

    const next = pki.makeServer(ca, 'beanpole-b');
    copyFileSync(next.cert, live.cert);
    copyFileSync(next.key, live.key);
    srv.proc.process.kill('SIGHUP');
    await waitForLog(srv.proc, 'TLS certificate, key and CA reloaded');
    expect(await servedCn(srv.port)).toBe('beanpole-b');
    expect(await servedCn(srv.gearman)).toBe('beanpole-b');
    expect(await servedCn(dashboardPort)).toBe('beanpole-b');
    expect(await established.call('list-tube-used\r\n')).toBe('USING rotating\r\n');

    writeFileSync(live.key, 'not a key\n');
    srv.proc.process.kill('SIGHUP');
    await waitForLog(srv.proc, 'TLS reload failed');
    expect(await servedCn(srv.port)).toBe('beanpole-b');
    expect(await established.call('list-tube-used\r\n')).toBe('USING rotating\r\n');
    expect(srv.proc.process.exitCode).toBeNull();
  });
});

describe('handshake bounds', () => {
  it('idle half-open handshakes beyond the cap are closed oldest first, never block other clients, and time out', async () => {
    const limit = 8;
    const srv = await start([...tlsArgs(), '--tls-allow-plain', '--tls-max-handshakes', String(limit), '--tls-handshake-timeout-ms', '6000']);
    // A slowloris: each sends the first bytes of a TLS record and then nothing.
    const stalled: RawClient[] = [];
    for (let i = 0; i < 3 * limit; i++) {
      const c = await plainClient(srv.port);
      c.send(Buffer.from([0x16, 0x03, 0x01]));
      stalled.push(c);
    }
    // The oldest are closed to make room at once (well before the time limit), and the newest still wait.
    await stalled[0]!.waitClosed(2000);
    await stalled[2 * limit - 1]!.waitClosed(2000);
    expect(stalled[3 * limit - 1]!.closed).toBe(false);
    // Meanwhile both kinds of clients are served at once.
    expect(await (await tlsClient(srv.port)).call('list-tubes\r\n')).toMatch(/^OK /);
    expect(await (await plainClient(srv.port)).call('list-tubes\r\n')).toMatch(/^OK /);
    // And the rest are closed once their time is up.
    for (const c of stalled) await c.waitClosed(10_000);
    await waitForLog(srv.proc, 'too many handshakes');
    await waitForLog(srv.proc, 'handshake not done in time');
  });

  it('without --tls-allow-plain, a connection that says nothing is closed after the time limit too', async () => {
    const srv = await start([...tlsArgs(), '--tls-handshake-timeout-ms', '1000']);
    const silent = await plainClient(srv.gearman);
    const served = await tlsClient(srv.gearman);
    expect(await gearmanLine(served, 'version')).toMatch(/^OK /);
    expect(await silent.waitClosed(10_000)).toBe('');
    // Established connections have no such limit.
    await delay(1200);
    expect(await gearmanLine(served, 'version')).toMatch(/^OK /);
  });
});
