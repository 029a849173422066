/**
 * Other beanstalkd servers in the dashboard (--admin-attach, and the "add server" API), against
 * Debian's stock beanstalkd 1.12: stats, tubes, peek per state, put, kick, delete, pause; and
 * servers that refuse connections or never answer, which must fail fast, never hang.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { ExternalJobDto, ExternalServerDto } from '../shared/dto.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { expectOk } from './support/expectations.js';
import { RawClient, tcpPut } from './support/raw-client.js';
import { freePort, hasBeanstalkd, startProcessServer, type ServerProcess } from './support/servers.js';

const withBeanstalkd = hasBeanstalkd() ? describe : describe.skip;

let beanstalkd: ServerProcess;
let beanstalkdPort: number;
let beanpole: AdminServerProcess;
/** Accepts connections and never answers: a hung server. */
let silent: net.Server;
let silentPort: number;
const silentSockets = new Set<net.Socket>();
let closedPort: number;

beforeAll(async () => {
  if (!hasBeanstalkd()) return;
  beanstalkd = await startProcessServer('beanstalkd', { tcp: true }, []);
  beanstalkdPort = (beanstalkd.address as { port: number }).port;
  silent = net.createServer((socket) => {
    silentSockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as net.AddressInfo).port;
  closedPort = await freePort();
  beanpole = await startAdminServer(['--admin-attach', `127.0.0.1:${beanstalkdPort}`]);
});

afterAll(async () => {
  await beanpole?.stop();
  await beanstalkd?.stop();
  for (const socket of silentSockets) socket.destroy();
  await new Promise<void>((resolve) => (silent === undefined ? resolve() : silent.close(() => resolve())));
});

withBeanstalkd('an attached stock beanstalkd', () => {
  it('lists it as up, with its version, and shows its stats and tubes', async () => {
    const list = expectOk<ExternalServerDto[]>(await api(beanpole.url, API.external));
    expect(list).toEqual([{ id: 1, address: `127.0.0.1:${beanstalkdPort}`, source: 'flag', status: 'up', error: null, version: expect.stringMatching(/^1\./) }]);
    const c = await RawClient.connect(beanstalkdPort);
    try {
      await c.call('use ext-orders\r\n');
      await tcpPut(c, 'from a producer');
    } finally {
      c.destroy();
    }
    const stats = expectOk<Record<string, number | string>>(await api(beanpole.url, API.externalStats(1)));
    expect(stats['current-jobs-ready']).toBeGreaterThanOrEqual(1);
    const tubes = expectOk<Record<string, number | string>[]>(await api(beanpole.url, API.externalTubes(1)));
    expect(tubes.find((t) => t.name === 'ext-orders')).toMatchObject({ 'current-jobs-ready': 1 });
  });

  it('puts, peeks each state, kicks, pauses and deletes through the protocol', async () => {
    const put = expectOk<{ id: number }>(await api(beanpole.url, API.externalPut(1, 'ext-work'), { json: { body: '{"x":1}', priority: 5, delay: 300 } }), 201);
    const delayed = expectOk<ExternalJobDto>(await api(beanpole.url, `${API.externalPeek(1, 'ext-work')}?state=delayed`));
    expect(delayed).toMatchObject({ id: put.id, body: { encoding: 'utf8', text: '{"x":1}' }, stats: { state: 'delayed', pri: 5, tube: 'ext-work' } });
    expect(expectOk<ExternalJobDto | null>(await api(beanpole.url, `${API.externalPeek(1, 'ext-work')}?state=ready`))).toBeNull();
    expect(expectOk<{ count: number }>(await api(beanpole.url, API.externalKick(1, 'ext-work'), { json: { bound: 10 } }))).toEqual({ count: 1 });
    expect(expectOk<ExternalJobDto>(await api(beanpole.url, `${API.externalPeek(1, 'ext-work')}?state=ready`)).id).toBe(put.id);
    expect((await api(beanpole.url, API.externalPause(1, 'ext-work'), { json: { seconds: 5 } })).status).toBe(204);
    const tube = expectOk<Record<string, number | string>[]>(await api(beanpole.url, API.externalTubes(1))).find((t) => t.name === 'ext-work');
    expect(tube?.pause).toBe(5);
    expect(expectOk<ExternalJobDto>(await api(beanpole.url, API.externalJob(1, put.id))).stats.state).toBe('ready');
    expect((await api(beanpole.url, API.externalJob(1, put.id), { method: 'DELETE' })).status).toBe(204);
    expect((await api(beanpole.url, API.externalJob(1, put.id))).status).toBe(404);
    expect((await api(beanpole.url, API.externalJob(1, put.id), { method: 'DELETE' })).status).toBe(404);
  });

  it('adds and removes servers from the dashboard; bad, duplicate, refused and silent ones fail fast', async () => {
    for (const address of ['nope', '127.0.0.1:0', '127.0.0.1:70000', ':11300']) {
      expect((await api(beanpole.url, API.external, { json: { address } })).status, address).toBe(400);
    }
    expect((await api(beanpole.url, API.external, { json: { address: `127.0.0.1:${beanstalkdPort}` } })).status).toBe(409);
    const refused = expectOk<ExternalServerDto>(await api(beanpole.url, API.external, { json: { address: `127.0.0.1:${closedPort}` } }), 201);
    const hung = expectOk<ExternalServerDto>(await api(beanpole.url, API.external, { json: { address: `127.0.0.1:${silentPort}` } }), 201);
    expect(refused.source).toBe('dashboard');

    expect((await api(beanpole.url, API.externalStats(refused.id))).status).toBe(502);
    const started = Date.now();
    const res = await api(beanpole.url, API.externalStats(hung.id));
    expect(res.status).toBe(504);
    // Bounded by the command deadline (3 s), whatever the other side does.
    expect(Date.now() - started).toBeLessThan(10_000);

    const list = expectOk<ExternalServerDto[]>(await api(beanpole.url, API.external));
    expect(list.map((s) => [s.address, s.status])).toEqual([
      [`127.0.0.1:${beanstalkdPort}`, 'up'],
      [`127.0.0.1:${closedPort}`, 'down'],
      [`127.0.0.1:${silentPort}`, 'down'],
    ]);
    expect(list[2]!.error).toMatch(/did not answer/);
    // This server still serves its own clients and the dashboard as before.
    expect((await api(beanpole.url, API.stats)).status).toBe(200);

    for (const s of [refused, hung]) expect((await api(beanpole.url, API.externalServer(s.id), { method: 'DELETE' })).status).toBe(204);
    expect(expectOk<ExternalServerDto[]>(await api(beanpole.url, API.external))).toHaveLength(1);
    expect((await api(beanpole.url, API.externalStats(99))).status).toBe(404);
  });

  it('refuses to add a server in read-only mode, but shows attached ones', async () => {
    const ro = await startAdminServer(['--admin-read-only', '--admin-attach', `127.0.0.1:${beanstalkdPort}`]);
    try {
      expect((await api(ro.url, API.external, { json: { address: `127.0.0.1:${silentPort}` } })).status).toBe(403);
      expect((await api(ro.url, API.externalKick(1, 'x'), { json: { bound: 1 } })).status).toBe(403);
      expect(expectOk<ExternalServerDto[]>(await api(ro.url, API.external))[0]?.status).toBe('up');
    } finally {
      await ro.stop();
    }
  });
});
