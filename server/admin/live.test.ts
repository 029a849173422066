/**
 * LiveUpdates' view limits with real socket.io (server and clients in this process, on an
 * ephemeral port of 127.0.0.1) and small limits, so the server-wide one is reached with three
 * sockets: refusals, re-views, leaves and disconnects, and the count going back down exactly.
 * The real limits against a real server process are in test/admin-socket.test.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server as IoServer } from 'socket.io';
import { io, type Socket } from 'socket.io-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AdminConfigDto } from '../../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import { systemClock } from '../engine/clock.js';
import { Engine } from '../engine/engine.js';
import { immediateDurability } from '../engine/journal.js';
import { MemoryOperations } from '../operations/memory-operations.js';
import { TEST_SERVER_INFO as INFO } from '../testing.js';
import { LiveUpdates, MAX_VIEWS_PER_SERVER, MAX_VIEWS_PER_SOCKET, type AdminIo } from './live.js';
import { StatsHistory } from './stats-history.js';

type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
type AckResult = { ok: true } | { ok: false; error: string };

const CONFIG: AdminConfigDto = { version: 'test', readOnly: false, tokenRequired: false, maxJobSize: 65535, binlog: false, clusterNode: null };

let httpServer: http.Server;
let ioServer: AdminIo;
let live: LiveUpdates;
let url: string;
const clients: ClientSocket[] = [];

beforeEach(async () => {
  httpServer = http.createServer();
  ioServer = new IoServer<ClientToServerEvents, ServerToClientEvents>(httpServer, { serveClient: false });
  const ops = new MemoryOperations({ engine: new Engine({ clock: systemClock }), durability: immediateDurability, onActivity: () => undefined });
  live = new LiveUpdates(ioServer, ops, INFO, CONFIG, new StatsHistory(ops, INFO), { perSocket: 3, perServer: 5 });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  live.close();
  await new Promise<void>((resolve) => void ioServer.close(() => resolve()));
});

async function connect(): Promise<ClientSocket> {
  const socket: ClientSocket = io(url, { transports: ['websocket'], reconnection: false });
  clients.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('snapshot', () => resolve());
    socket.once('connect_error', reject);
  });
  return socket;
}

const viewTube = (s: ClientSocket, name: string): Promise<AckResult> => s.timeout(2000).emitWithAck('tube:view', name);
const viewJob = (s: ClientSocket, id: number): Promise<AckResult> => s.timeout(2000).emitWithAck('job:view', id);

/** Resolves once the server has handled everything `s` sent before (events are handled in order). */
async function settled(s: ClientSocket): Promise<void> {
  await viewTube(s, '\u0000bad name that is far too long'.repeat(10));
}

async function waitForCount(n: number): Promise<void> {
  for (let i = 0; i < 200 && live.viewCount !== n; i++) await new Promise((r) => setTimeout(r, 5));
  expect(live.viewCount).toBe(n);
}

describe('LiveUpdates view limits', () => {
  it('the real limits: 1,000 views per socket and 100,000 per server', () => {
    expect(MAX_VIEWS_PER_SOCKET).toBe(1_000);
    expect(MAX_VIEWS_PER_SERVER).toBe(100_000);
  });

  it('a socket holds at most perSocket views, tubes and jobs together; viewing one again costs nothing', async () => {
    const a = await connect();
    expect(await viewTube(a, 't1')).toEqual({ ok: true });
    expect(await viewJob(a, 1)).toEqual({ ok: true });
    expect(await viewTube(a, 't2')).toEqual({ ok: true });
    expect(await viewTube(a, 't1')).toEqual({ ok: true });
    expect(await viewJob(a, 1)).toEqual({ ok: true });
    expect(live.viewCount).toBe(3);
    expect(await viewTube(a, 't3')).toEqual({ ok: false, error: expect.stringMatching(/too many views on this connection \(at most 3/) });
    expect(await viewJob(a, 2)).toEqual({ ok: false, error: expect.stringMatching(/this connection/) });
    expect(live.viewCount).toBe(3);
    // Leaving makes room; leaving what it does not view changes nothing.
    a.emit('tube:leave', 't2');
    a.emit('tube:leave', 'never-viewed');
    a.emit('job:leave', 99);
    expect(await viewJob(a, 2)).toEqual({ ok: true });
    expect(live.viewCount).toBe(3);
  });

  it('all sockets together hold at most perServer views; leaves and disconnects give them back exactly', async () => {
    const [a, b, c] = [await connect(), await connect(), await connect()];
    for (const name of ['a1', 'a2', 'a3']) expect(await viewTube(a, name)).toEqual({ ok: true });
    expect(await viewTube(b, 'a1')).toEqual({ ok: true });
    expect(await viewJob(b, 7)).toEqual({ ok: true });
    expect(live.viewCount).toBe(5);
    const full = { ok: false, error: expect.stringMatching(/too many views on this server \(at most 5\)/) };
    expect(await viewTube(c, 'c1')).toEqual(full);
    expect(await viewJob(c, 7)).toEqual(full);
    expect(await viewTube(b, 'b2')).toEqual(full);

    b.emit('job:leave', 7);
    await settled(b);
    expect(live.viewCount).toBe(4);
    expect(await viewJob(c, 7)).toEqual({ ok: true });
    expect(await viewTube(c, 'c1')).toEqual(full);

    a.disconnect();
    await waitForCount(2);
    expect(await viewTube(c, 'c1')).toEqual({ ok: true });
    expect(await viewTube(c, 'c2')).toEqual({ ok: true });
    expect(await viewTube(b, 'b2')).toEqual({ ok: true });
    expect(live.viewCount).toBe(5);

    b.disconnect();
    c.disconnect();
    await waitForCount(0);
    const d = await connect();
    for (const name of ['d1', 'd2', 'd3']) expect(await viewTube(d, name)).toEqual({ ok: true });
    expect(live.viewCount).toBe(3);
  });

  it('a client that sends something other than a function as the acknowledgement is not acknowledged, and nothing breaks', async () => {
    const a = await connect();
    const untyped = a as unknown as Socket;
    untyped.emit('tube:view', 'x', 5);
    untyped.emit('job:view', 'not an id', 'not a function');
    untyped.emit('tube:view', 12);
    untyped.emit('tube:leave', { name: 'x' });
    untyped.emit('job:leave', [1]);
    await settled(a);
    expect(a.connected).toBe(true);
    expect(live.viewCount).toBe(1);
    expect(await viewJob(a, 3)).toEqual({ ok: true });
  });
});
