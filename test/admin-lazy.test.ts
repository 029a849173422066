/**
 * A fresh server with the dashboard on serves its first beanstalkd commands and timers as a
 * server without it does: the dashboard's port listens from the start, but its modules (Express,
 * socket.io, the API; about 200 ms of the event loop) load only on the first HTTP request, so
 * they cannot hold up a client that connects right away (a suite that starts a fresh server for
 * every test and times `put` with delay 1). The first requests, whatever their kind and however
 * many at once, wait for the modules and are all answered.
 */
import { once } from 'node:events';
import net from 'node:net';
import { io } from 'socket.io-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { StatsTickDto } from '../shared/dto.js';
import { api, apiWithHost, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { RawClient } from './support/raw-client.js';

const LOADED = 'dashboard loaded (first request)';

const servers: AdminServerProcess[] = [];
const clients: RawClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function start(): Promise<AdminServerProcess> {
  const server = await startAdminServer();
  servers.push(server);
  return server;
}

function loadCount(server: AdminServerProcess): number {
  return server.stderr().split(LOADED).length - 1;
}

/** A socket.io client as a dashboard opens it; resolves with the history in its snapshot. */
function snapshotHistory(url: string, transports: ('polling' | 'websocket')[]): Promise<StatsTickDto[]> {
  return new Promise((resolve, reject) => {
    const socket = io(url, { transports, reconnection: false, timeout: 10_000 });
    socket.on('snapshot', (snap: { history: StatsTickDto[] }) => {
      socket.close();
      resolve(snap.history);
    });
    socket.on('connect_error', (err) => {
      socket.close();
      reject(err);
    });
  });
}

describe('the dashboard loads on its first request', () => {
  it('a client that connects at once gets its delayed job and its timeout without the dashboard loading', async () => {
    const server = await start();
    const c = await RawClient.connect(server.port);
    clients.push(c);
    expect(await c.call('put 0 1 10 5\r\nfirst\r\n')).toBe('INSERTED 1\r\n');
    expect(await c.call('reserve-with-timeout 5\r\n')).toBe('RESERVED 1 5\r\nfirst\r\n');
    expect(await c.call('reserve-with-timeout 1\r\n')).toBe('TIMED_OUT\r\n');
    // Nothing asked for the dashboard, so nothing of it ran beside those timers: it loads only
    // now, for its first request.
    expect(server.stderr()).toContain('dashboard on http://127.0.0.1:');
    expect(loadCount(server)).toBe(0);
    expect((await api(server.url, '/api/config')).status).toBe(200);
    expect(loadCount(server)).toBe(1);
  });

  it('answers every kind of first request at once, loading the modules once, with the stats history sampled from the start', async () => {
    const server = await start();
    // The history is sampled once a second from the start: let a sample or two be taken.
    const c = await RawClient.connect(server.port);
    clients.push(c);
    expect(await c.call('reserve-with-timeout 2\r\n')).toBe('TIMED_OUT\r\n');
    expect(loadCount(server)).toBe(0);

    const requests = Array.from({ length: 20 }, () => api(server.url, '/api/stats'));
    const [histories, config, page, ...stats] = await Promise.all([
      Promise.all([snapshotHistory(server.url, ['websocket']), snapshotHistory(server.url, ['polling', 'websocket'])]),
      api(server.url, '/api/config'),
      api(server.url, '/'),
      ...requests,
    ]);
    expect(config.status).toBe(200);
    expect(page.status).toBe(200);
    for (const r of stats) expect(r.status).toBe(200);
    for (const history of histories) expect(history.length).toBeGreaterThanOrEqual(1);
    expect(loadCount(server)).toBe(1);

    // Later requests go straight to the loaded dashboard.
    expect((await api(server.url, '/api/tubes')).status).toBe(200);
    expect(loadCount(server)).toBe(1);
  });

  it('survives a first request that is a WebSocket upgrade reset while the dashboard loads', async () => {
    const server = await start();
    const { port } = new URL(server.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      'GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n' +
        'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    // Give the server the upgrade (it starts loading the dashboard, ~200 ms), then reset.
    await new Promise((r) => setTimeout(r, 20));
    socket.resetAndDestroy();
    // The server is still there: the dashboard answers, and so does the job port.
    expect((await api(server.url, '/api/config')).status).toBe(200);
    const c = await RawClient.connect(server.port);
    clients.push(c);
    expect(await c.call('list-tube-used\r\n')).toBe('USING default\r\n');
    expect(server.process.exitCode).toBeNull();
  });

  it('checks the Host name of the first request like any other', async () => {
    const server = await start();
    const r = await apiWithHost(server.url, '/api/stats', 'rebind.attacker.example');
    expect(r.status).toBe(403);
    expect(loadCount(server)).toBe(1);
  });
});
