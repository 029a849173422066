/**
 * --keepalive against the real server: the sockets each door accepts (beanstalkd, Gearman, the
 * dashboard) carry the keepalive timer of --keepalive-idle, as the kernel reports it for the
 * server's side of each connection (`ss -tino`). TCP_KEEPINTVL and TCP_KEEPCNT are read back
 * with getsockopt in server/keepalive.test.ts.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { gearmanPortFromLog } from './support/gearman-server.js';

const run = promisify(execFile);
const HAS_SS = await run('ss', ['-V']).then(
  () => true,
  () => false,
);

const servers: AdminServerProcess[] = [];
const sockets: net.Socket[] = [];
afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) await s.stop();
});

/** A request each door answers, so that the server has surely accepted (and tuned) the socket. */
const HELLO: Record<string, Buffer> = {
  beanstalkd: Buffer.from('list-tubes\r\n'),
  gearman: Buffer.from('version\n'),
  dashboard: Buffer.from('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'),
};

/** A connection to `door` that has had its first answer (and stays open). */
function connect(door: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(HELLO[door]!));
    s.once('data', () => resolve(s));
    s.once('error', reject);
    sockets.push(s);
  });
}

/** The keepalive timer (seconds left) of the server's side of the connection from `client`; null: none. */
async function serverKeepAliveSec(port: number, client: net.Socket): Promise<number | null> {
  const { stdout } = await run('ss', ['-tinoH', 'state', 'established', `( sport = :${port} and dport = :${client.localPort} )`]);
  expect(stdout, `no server socket on port ${port}`).toMatch(/\S/);
  const m = /timer:\(keepalive,(\d+(?:\.\d+)?)(ms|sec|min)/.exec(stdout);
  if (m === null) return null;
  const scale = { ms: 0.001, sec: 1, min: 60 }[m[2] as 'ms' | 'sec' | 'min'];
  return Number(m[1]) * scale;
}

async function doorPorts(args: string[]): Promise<Record<string, number>> {
  const server = await startAdminServer(['--gearman-listen', '127.0.0.1', '--gearman-port', '0', ...args]);
  servers.push(server);
  return { beanstalkd: server.port, gearman: await gearmanPortFromLog(() => server.stderr()), dashboard: Number(new URL(server.url).port) };
}

describe.skipIf(!HAS_SS)('--keepalive', () => {
  it('gives every door’s accepted sockets the idle time asked for', async () => {
    const ports = await doorPorts(['--keepalive', '--keepalive-idle', '7', '--keepalive-interval', '3', '--keepalive-count', '4']);
    for (const [door, port] of Object.entries(ports)) {
      const client = await connect(door, port);
      const left = await serverKeepAliveSec(port, client);
      expect(left, door).not.toBeNull();
      expect(left!, door).toBeLessThanOrEqual(7);
    }
  });

  it('without it, the dashboard’s sockets have no keepalive and the doors the OS’s idle time', async () => {
    const ports = await doorPorts([]);
    expect(await serverKeepAliveSec(ports.dashboard!, await connect('dashboard', ports.dashboard!))).toBeNull();
    expect(await serverKeepAliveSec(ports.gearman!, await connect('gearman', ports.gearman!))).toBeGreaterThan(7);
  });
});
