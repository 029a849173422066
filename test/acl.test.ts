/**
 * --acl against the real server process, in memory and as a cluster node: clients with
 * certificates of different CNs (made by the test, test/support/tls-certs.ts) and plaintext
 * clients beside them (--tls-allow-plain), on both job ports. Every rule: commands, tubes named,
 * the used tube, jobs by id, reserve, list-tubes, Gearman submits, CAN_DO and admin commands,
 * the denial counters in /metrics, and SIGHUP reloading the file.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { freshDatabase } from './support/cluster-db.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { gearmanPortFromLog } from './support/gearman-server.js';
import { RawClient } from './support/raw-client.js';
import { BEANPOLE_BIN } from './support/servers.js';
import { TestPki, type CertFiles } from './support/tls-certs.js';

const pgUrl = inject('pgUrl');
const pki = new TestPki();
let ca: CertFiles;
let server: CertFiles;
const certs: Record<'billing' | 'worker' | 'ops', CertFiles> = {} as Record<'billing' | 'worker' | 'ops', CertFiles>;
const open: { destroy(): void }[] = [];

/**
 * billing-api: its own tubes and functions, a few commands; worker-*: billing tubes and mail,
 * the resize functions, every command; ops-admin: everything (Gearman's admin too); everyone
 * else, plaintext clients included: the public tube and functions, a few commands, no admin.
 */
const RULES = {
  identities: {
    'billing-api': { tubes: ['billing-*'], functions: ['billing_*'], commands: ['use', 'put', 'watch', 'reserve-with-timeout', 'delete', 'list-tubes'] },
    'worker-*': { tubes: ['billing-*', 'mail'], functions: ['resize_*'] },
    'ops-admin': {},
    '*': { tubes: ['public'], functions: ['public_*'], commands: ['use', 'put', 'watch', 'ignore', 'reserve-with-timeout', 'list-tubes', 'list-tubes-watched', 'list-tube-used', 'peek', 'stats'] },
  },
};

beforeAll(() => {
  ca = pki.makeCa('Beanpole ACL CA');
  server = pki.makeServer(ca, 'beanpole-acl');
  certs.billing = pki.makeClient(ca, 'billing-api');
  certs.worker = pki.makeClient(ca, 'worker-7');
  certs.ops = pki.makeClient(ca, 'ops-admin');
});

afterAll(() => {
  for (const c of open) c.destroy();
  pki.remove();
});

function tlsOptions(cert: CertFiles): tls.ConnectionOptions {
  return { ca: pki.read(ca.cert), cert: pki.read(cert.cert), key: pki.read(cert.key) };
}

function writeRules(file: string, rules: unknown): void {
  writeFileSync(file, JSON.stringify(rules));
}

/** GET `path` of the dashboard over HTTPS (it serves the job ports' certificate). */
function httpsGet(base: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    https
      .get(new URL(path, base), { ca: pki.read(ca.cert) }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

describe('a rule file that cannot be used stops the start with a usage error', () => {
  it.each([
    ['{"identities": {"*": {"commands": ["reserve", "nuke"]}}}', /--acl .*: identities\["\*"\]\.commands: "nuke" is not a beanstalkd command nor "admin"/],
    ['not json', /--acl .*: not JSON/],
  ])('%s', (text, message) => {
    const file = path.join(pki.dir, 'bad-acl.json');
    writeFileSync(file, text);
    const run = spawnSync(process.execPath, [BEANPOLE_BIN, '-p', '0', '--no-admin', '--no-gearman', '--acl', file], { encoding: 'utf8', timeout: 10_000 });
    expect(run.status).toBe(5); // as every other bad flag (USAGE_EXIT_CODE)
    expect(run.stderr).toMatch(message);
  });

  it('a file that does not exist', () => {
    const run = spawnSync(process.execPath, [BEANPOLE_BIN, '-p', '0', '--no-admin', '--no-gearman', '--acl', '/nonexistent/acl.json'], { encoding: 'utf8', timeout: 10_000 });
    expect(run.status).toBe(5);
    expect(run.stderr).toMatch(/--acl \/nonexistent\/acl\.json: cannot read it \(ENOENT\)/);
  });
});

const MODES: [string, boolean][] = [
  ['in memory', true],
  ['as a cluster node', pgUrl !== null],
];

describe.each(MODES)('--acl %s', (mode, available) => {
  let proc: AdminServerProcess;
  let gearmanPort: number;
  let rulesFile: string;

  beforeAll(async () => {
    if (!available) return;
    rulesFile = path.join(pki.dir, `acl-${mode.replace(/\W/g, '-')}.json`);
    writeRules(rulesFile, RULES);
    const cluster = mode === 'in memory' ? [] : ['--cluster', await freshDatabase(pgUrl!, 'acl')];
    proc = await startAdminServer([
      ...cluster,
      ...['--tls-cert', server.cert, '--tls-key', server.key, '--tls-ca', ca.cert, '--tls-allow-plain'],
      ...['--acl', rulesFile, '--gearman-listen', '127.0.0.1', '--gearman-port', '0'],
    ]);
    gearmanPort = await gearmanPortFromLog(() => proc.stderr());
  }, 60_000);

  afterAll(async () => {
    await proc?.stop();
  });

  async function beanstalk(who: keyof typeof certs | 'plain'): Promise<RawClient> {
    const c = who === 'plain' ? await RawClient.connect(proc.port) : await RawClient.connectTls(proc.port, tlsOptions(certs[who]));
    open.push(c);
    return c;
  }

  async function gearman(who: keyof typeof certs | 'plain'): Promise<GearmanTestClient> {
    const c = who === 'plain' ? await GearmanTestClient.connect(gearmanPort) : await GearmanTestClient.connectTls(gearmanPort, tlsOptions(certs[who]));
    open.push(c);
    return c;
  }

  /** Puts `body` into `tube` as ops-admin (who may do anything); returns the job id. */
  async function putAsOps(tube: string, body: string): Promise<number> {
    const ops = await beanstalk('ops');
    expect(await ops.call(`use ${tube}\r\n`)).toBe(`USING ${tube}\r\n`);
    const reply = await ops.call(`put 0 0 60 ${body.length}\r\n${body}\r\n`);
    expect(reply).toMatch(/^INSERTED \d+\r\n$/);
    ops.destroy();
    return Number(reply.split(' ')[1]);
  }

  async function stateAsOps(id: number): Promise<string> {
    const ops = await beanstalk('ops');
    const reply = await ops.call(`stats-job ${id}\r\n`);
    ops.destroy();
    return /\nstate: (\w+)\n/.exec(reply)?.[1] ?? reply;
  }

  it.skipIf(!available)('beanstalkd: a command the identity may not run answers FORBIDDEN; quit is always allowed', async () => {
    const plain = await beanstalk('plain');
    expect(await plain.call('stats-job 1\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('kick 5\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('pause-tube public 0\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('release 1 0 0\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('stats\r\n')).toMatch(/^OK \d+\r\n---/); // allowed, and server-wide as ever
    const billing = await beanstalk('billing');
    expect(await billing.call('peek 1\r\n')).toBe('FORBIDDEN\r\n');
    expect(await billing.call('stats-tube billing-eu\r\n')).toBe('FORBIDDEN\r\n');
    billing.send('quit\r\n');
    expect(await billing.waitClosed()).toBe('');
  });

  it.skipIf(!available)('beanstalkd: use, watch, stats-tube and pause-tube of a tube the identity may not touch answer FORBIDDEN', async () => {
    const worker = await beanstalk('worker');
    expect(await worker.call('use secret\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('list-tube-used\r\n')).toBe('USING default\r\n'); // unchanged
    expect(await worker.call('watch secret\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('stats-tube secret\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('pause-tube secret 10\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('use billing-eu\r\n')).toBe('USING billing-eu\r\n');
    expect(await worker.call('watch mail\r\n')).toBe('WATCHING 1\r\n'); // `default` is not watched: worker-* may not touch it
    expect(await worker.call('list-tubes-watched\r\n')).toBe('OK 11\r\n---\n- mail\n\r\n');
    expect(await worker.call('pause-tube mail 0\r\n')).toBe('PAUSED\r\n');
    expect(await worker.call('stats-tube mail\r\n')).toMatch(/^OK \d+\r\n---\nname: "?mail"?\n/);
  });

  it.skipIf(!available)('beanstalkd: put, peek-* and kick on a used tube the identity may not touch answer FORBIDDEN; the put body is skipped', async () => {
    const plain = await beanstalk('plain'); // uses `default`, which `*` may not touch
    expect(await plain.call('put 0 0 60 5\r\nhello\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('list-tube-used\r\n')).toBe('USING default\r\n'); // the next command reads fine
    const worker = await beanstalk('worker');
    expect(await worker.call('peek-ready\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('peek-delayed\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('peek-buried\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('kick 10\r\n')).toBe('FORBIDDEN\r\n');
    expect(await plain.call('use public\r\n')).toBe('USING public\r\n');
    expect(await plain.call('put 0 0 60 5\r\nhello\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    const billing = await beanstalk('billing');
    expect(await billing.call('use billing-eu\r\n')).toBe('USING billing-eu\r\n');
    expect(await billing.call('put 0 0 60 2\r\nhi\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    expect(await billing.call('use public\r\n')).toBe('FORBIDDEN\r\n');
  });

  it.skipIf(!available)('beanstalkd: a command on a job in a forbidden tube answers FORBIDDEN and changes nothing; a missing job is NOT_FOUND', async () => {
    const id = await putAsOps('secret', 'top');
    const worker = await beanstalk('worker');
    for (const command of [`peek ${id}`, `stats-job ${id}`, `kick-job ${id}`, `reserve-job ${id}`, `delete ${id}`, `touch ${id}`, `release ${id} 0 0`, `bury ${id} 0`]) {
      expect(await worker.call(`${command}\r\n`), command).toBe('FORBIDDEN\r\n');
    }
    expect(await worker.call('delete 987654\r\n')).toBe('NOT_FOUND\r\n');
    expect(await worker.call('peek 987654\r\n')).toBe('NOT_FOUND\r\n');
    expect(await stateAsOps(id)).toBe('ready');
    // A job in a tube it may touch: served as ever.
    const mailJob = await putAsOps('mail', 'post');
    expect(await worker.call(`peek ${mailJob}\r\n`)).toBe(`FOUND ${mailJob} 4\r\npost\r\n`);
    expect(await worker.call(`delete ${mailJob}\r\n`)).toBe('DELETED\r\n');
  });

  it.skipIf(!available)('beanstalkd: pipelined commands are answered in order, refusals among them', async () => {
    const secret = await putAsOps('secret', 'kept');
    const worker = await beanstalk('worker');
    worker.send(
      `use billing-pipe\r\nput 0 0 60 1\r\na\r\ndelete ${secret}\r\nput 0 0 60 1\r\nb\r\ndelete 987654\r\nuse secret\r\npeek ${secret}\r\nlist-tube-used\r\n`,
    );
    const replies: string[] = [];
    for (let i = 0; i < 8; i++) replies.push(await worker.reply());
    expect(replies.map((r) => r.replace(/^INSERTED \d+/, 'INSERTED'))).toEqual([
      'USING billing-pipe\r\n',
      'INSERTED\r\n',
      'FORBIDDEN\r\n',
      'INSERTED\r\n',
      'NOT_FOUND\r\n',
      'FORBIDDEN\r\n',
      'FORBIDDEN\r\n',
      'USING billing-pipe\r\n',
    ]);
    expect(await stateAsOps(secret)).toBe('ready');
  });

  it.skipIf(!available)('beanstalkd: reserve never hands out a job from a forbidden tube', async () => {
    const secret = await putAsOps('secret', 'no');
    const worker = await beanstalk('worker');
    // It watches nothing (it may not touch `default`), and cannot watch `secret`.
    expect(await worker.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');
    expect(await worker.call('watch secret\r\n')).toBe('FORBIDDEN\r\n');
    expect(await worker.call('watch billing-x\r\n')).toBe('WATCHING 1\r\n');
    const allowed = await putAsOps('billing-x', 'yes');
    expect(await worker.call('reserve-with-timeout 0\r\n')).toBe(`RESERVED ${allowed} 3\r\nyes\r\n`);
    expect(await worker.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');
    expect(await stateAsOps(secret)).toBe('ready');
    expect(await worker.call(`delete ${allowed}\r\n`)).toBe('DELETED\r\n');
  });

  it.skipIf(!available)('beanstalkd: list-tubes lists only the tubes the identity may touch; its own listings are as ever', async () => {
    await putAsOps('secret', 'x');
    await putAsOps('mail', 'x');
    await putAsOps('public', 'x');
    const tubesOf = (yaml: string): string[] => yaml.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2)).sort();
    const worker = await beanstalk('worker');
    const workerTubes = tubesOf(await worker.call('list-tubes\r\n'));
    expect(workerTubes).toContain('mail');
    expect(workerTubes.every((t) => t === 'mail' || t.startsWith('billing-'))).toBe(true);
    const plain = await beanstalk('plain');
    expect(tubesOf(await plain.call('list-tubes\r\n'))).toEqual(['public']);
    expect(await plain.call('list-tubes-watched\r\n')).toBe('OK 4\r\n---\n\r\n'); // watches nothing: `default` is not its
    const ops = await beanstalk('ops');
    expect(tubesOf(await ops.call('list-tubes\r\n'))).toEqual(expect.arrayContaining(['default', 'mail', 'public', 'secret']));
  });

  it.skipIf(!available)('Gearman: a submit or CAN_DO of a forbidden function gets ERROR PERMISSION_DENIED', async () => {
    const billing = await gearman('billing');
    billing.request(PACKET.SUBMIT_JOB_BG, 'resize_small', '', 'img');
    expect(await billing.args(2)).toEqual([PACKET.ERROR, 'PERMISSION_DENIED', 'Not allowed for this client identity']);
    billing.request(PACKET.SUBMIT_JOB, 'resize_small', 'u1', 'img');
    expect(await billing.args(2)).toEqual([PACKET.ERROR, 'PERMISSION_DENIED', 'Not allowed for this client identity']);
    billing.request(PACKET.SUBMIT_JOB_EPOCH, 'resize_small', '', '2000000000', 'img');
    expect((await billing.args(2))[1]).toBe('PERMISSION_DENIED');
    billing.request(PACKET.SUBMIT_JOB_BG, 'billing_invoice', '', 'inv-1');
    expect((await billing.args(1))[0]).toBe(PACKET.JOB_CREATED);
    const worker = await gearman('worker');
    worker.request(PACKET.CAN_DO, 'billing_invoice');
    expect(await worker.args(2)).toEqual([PACKET.ERROR, 'PERMISSION_DENIED', 'Not allowed for this client identity']);
    worker.request(PACKET.CAN_DO_TIMEOUT, 'billing_invoice', '10');
    expect((await worker.args(2))[1]).toBe('PERMISSION_DENIED');
    worker.request(PACKET.CAN_DO, 'resize_small');
    // Not registered for billing_invoice: the job waiting there is not its to take.
    worker.request(PACKET.GRAB_JOB);
    expect((await worker.args(1))[0]).toBe(PACKET.NO_JOB);
    const plain = await gearman('plain');
    plain.request(PACKET.SUBMIT_JOB_BG, 'billing_invoice', '', 'x');
    expect((await plain.args(2))[1]).toBe('PERMISSION_DENIED');
    plain.request(PACKET.SUBMIT_JOB_BG, 'public_echo', '', 'x');
    expect((await plain.args(1))[0]).toBe(PACKET.JOB_CREATED);
  });

  it.skipIf(!available)("Gearman: admin commands that change the server need an identity whose commands allow admin; reads need none", async () => {
    const plain = await gearman('plain'); // loopback, but `*` has no admin
    for (const command of ['maxqueue public_echo 5', 'create function public_x', 'drop function public_echo', 'cancel job H:x:1', 'shutdown']) {
      plain.send(`${command}\n`);
      expect(await plain.adminReply(true), command).toBe('ERR PERMISSION_DENIED Not+allowed+for+this+client+identity\r\n');
    }
    // status and prioritystatus list only the functions the identity may use, as list-tubes does.
    plain.send('status\n');
    const status = await plain.adminReply(false);
    expect(status).toMatch(/^public_echo\t/m);
    expect(status).not.toMatch(/billing_invoice/);
    plain.send('prioritystatus\n');
    expect(await plain.adminReply(false)).not.toMatch(/billing_invoice/);
    const billing = await gearman('billing'); // its commands omit admin
    billing.send('maxqueue billing_invoice 5\n');
    expect(await billing.adminReply(true)).toMatch(/^ERR PERMISSION_DENIED/);
    const ops = await gearman('ops'); // commands omitted: everything, admin too
    ops.send('status\n');
    expect(await ops.adminReply(false)).toMatch(/^billing_invoice\t/m);
    ops.send('maxqueue billing_invoice 5\n');
    expect(await ops.adminReply(true)).toBe('OK\r\n');
    ops.send('create function ops_made\n');
    expect(await ops.adminReply(true)).toBe('OK\r\n');
  });

  it.skipIf(!available)('/metrics counts denials per identity rule and protocol', async () => {
    const text = await httpsGet(proc.url, 'metrics');
    expect(text).toContain('# TYPE beanpole_acl_denials_total counter');
    const count = (identity: string, protocol: string): number =>
      Number(new RegExp(`^beanpole_acl_denials_total\\{identity="${identity.replace(/[*]/g, '\\*')}",protocol="${protocol}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    expect(count('worker-*', 'beanstalkd')).toBeGreaterThanOrEqual(20);
    expect(count('*', 'beanstalkd')).toBeGreaterThanOrEqual(5);
    expect(count('billing-api', 'beanstalkd')).toBeGreaterThanOrEqual(3);
    expect(count('billing-api', 'gearman')).toBeGreaterThanOrEqual(4);
    expect(count('worker-*', 'gearman')).toBeGreaterThanOrEqual(2);
    expect(count('*', 'gearman')).toBeGreaterThanOrEqual(6);
  });

  it.skipIf(!available)('SIGHUP reloads the file: a connection served from a tube it may no longer touch is closed, a blocked reserve too', async () => {
    const blocked = await beanstalk('worker');
    expect(await blocked.call('watch mail\r\n')).toBe('WATCHING 1\r\n');
    // Jobs left in `mail` by earlier cases go first, so the reserve below blocks.
    for (let r = await blocked.call('reserve-with-timeout 0\r\n'); r.startsWith('RESERVED'); r = await blocked.call('reserve-with-timeout 0\r\n')) {
      expect(await blocked.call(`delete ${r.split(' ')[1]}\r\n`)).toBe('DELETED\r\n');
    }
    blocked.send('reserve\r\n');
    const elsewhere = await beanstalk('worker');
    expect(await elsewhere.call('watch billing-quiet\r\n')).toBe('WATCHING 1\r\n');
    const gearmanWorker = await gearman('worker');
    gearmanWorker.request(PACKET.CAN_DO, 'resize_small');
    gearmanWorker.request(PACKET.ECHO_REQ, 'registered');
    expect((await gearmanWorker.args(1))[0]).toBe(PACKET.ECHO_RES);
    // worker-* loses `mail` and the resize functions.
    writeRules(rulesFile, { identities: { ...RULES.identities, 'worker-*': { tubes: ['billing-*'], functions: [] } } });
    const reloads = proc.stderr().split('access rules reloaded').length;
    proc.signal('SIGHUP');
    expect(await blocked.waitClosed()).toBe('');
    await gearmanWorker.waitClosed();
    // The blocked reserve is gone: a job put into `mail` now stays ready.
    const id = await putAsOps('mail', 'late');
    expect(await stateAsOps(id)).toBe('ready');
    // Open connections follow the new rules; one still served from what it may touch stays.
    await waitFor(() => proc.stderr().split('access rules reloaded').length === reloads + 1);
    expect(await elsewhere.call('watch mail\r\n')).toBe('FORBIDDEN\r\n');
    expect(await elsewhere.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');
    const fresh = await gearman('worker');
    fresh.request(PACKET.CAN_DO, 'resize_small');
    expect((await fresh.args(2))[1]).toBe('PERMISSION_DENIED');

    // A file that has become unusable keeps the rules in force, and says why.
    writeFileSync(rulesFile, '{"identities": ');
    proc.signal('SIGHUP');
    await waitFor(() => proc.stderr().includes('access rules not reloaded'));
    expect(await elsewhere.call('watch mail\r\n')).toBe('FORBIDDEN\r\n');
    expect(await elsewhere.call('watch billing-us\r\n')).toBe('WATCHING 2\r\n');
  });
});

/** Polls a condition of the server's log (a SIGHUP's outcome is only logged). */
async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 250 && !condition(); i++) await new Promise((r) => setTimeout(r, 20));
  expect(condition()).toBe(true);
}
