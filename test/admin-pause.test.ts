/**
 * Pausing a tube until it is resumed, through the admin API of a real server: the protocol sees
 * the longest pause it allows (pause-tube's u32 seconds), no worker gets a job, an unpause ends
 * it; in memory, with -b (where a restart ends every pause, as in beanstalkd) and in cluster mode
 * (where the pause lives in the database and outlasts a node's restart).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { API } from '../shared/api.js';
import type { TubeDto } from '../shared/dto.js';
import { MAX_PAUSE_SECONDS } from '../shared/limits.js';
import { api, startAdminServer, yamlMap, type AdminServerProcess } from './support/admin-server.js';
import { freshDatabase } from './support/cluster-db.js';
import { expectLine, expectOk } from './support/expectations.js';
import { RawClient, tcpPut } from './support/raw-client.js';

const pgUrl = inject('pgUrl');
const servers: AdminServerProcess[] = [];
const clients: RawClient[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function start(args: string[]): Promise<AdminServerProcess> {
  const s = await startAdminServer(args);
  servers.push(s);
  return s;
}

async function tcp(s: AdminServerProcess): Promise<RawClient> {
  const c = await RawClient.connect(s.port);
  clients.push(c);
  return c;
}

async function tube(s: AdminServerProcess, name: string): Promise<TubeDto> {
  return expectOk<TubeDto>(await api(s.url, API.tube(name)));
}

/** Puts a job into `name`, pauses it until resumed, and checks what both doors say. */
async function pauseUntilResumed(s: AdminServerProcess, name: string): Promise<RawClient> {
  const c = await tcp(s);
  await expectLine(c, `use ${name}`, `USING ${name}`);
  await tcpPut(c, 'held');
  const paused = expectOk<TubeDto>(await api(s.url, API.tubePause(name), { json: { untilResumed: true } }));
  expect(paused).toMatchObject({ name, pausedUntilResumed: true, pauseSeconds: MAX_PAUSE_SECONDS });
  expect(paused.pauseTimeLeftSeconds).toBeGreaterThan(MAX_PAUSE_SECONDS - 60);
  expect(yamlMap(await c.call(`stats-tube ${name}\r\n`)).get('pause')).toBe(String(MAX_PAUSE_SECONDS));
  await expectLine(c, `watch ${name}`, 'WATCHING 2');
  await expectLine(c, 'ignore default', 'WATCHING 1');
  expect(await c.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');
  return c;
}

async function resume(s: AdminServerProcess, c: RawClient, name: string): Promise<void> {
  const resumed = expectOk<TubeDto>(await api(s.url, API.tubePause(name), { json: { seconds: 0 } }));
  expect(resumed).toMatchObject({ pausedUntilResumed: false, pauseTimeLeftSeconds: 0 });
  expect(await c.call('reserve-with-timeout 0\r\n')).toMatch(/^RESERVED \d+ 4\r\nheld\r\n$/);
}

describe('pause until resumed', () => {
  it('holds a tube with the protocol’s longest pause until an unpause, and a duration pause still works', async () => {
    const s = await start([]);
    const c = await pauseUntilResumed(s, 'forever');
    await resume(s, c, 'forever');
    const timed = expectOk<TubeDto>(await api(s.url, API.tubePause('forever'), { json: { seconds: 30 } }));
    expect(timed).toMatchObject({ pauseSeconds: 30, pausedUntilResumed: false });
    expect((await api(s.url, API.tubePause('forever'), { json: { untilResumed: false } })).status).toBe(400);
    expect((await api(s.url, API.tubePause('forever'), { json: { seconds: 30, untilResumed: true } })).status).toBe(400);
  });

  it('with -b, ends at a restart as a duration pause does (pauses are not journaled, as in beanstalkd)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-pause-'));
    dirs.push(dir);
    const first = await start(['-b', dir]);
    await pauseUntilResumed(first, 'kept');
    await first.stop();
    servers.splice(servers.indexOf(first), 1);
    const second = await start(['-b', dir]);
    expect(await tube(second, 'kept')).toMatchObject({ ready: 1, pausedUntilResumed: false, pauseSeconds: 0 });
  });

  it.skipIf(pgUrl === null)('in cluster mode, is seen by every node and outlasts a node’s restart', async () => {
    const db = await freshDatabase(pgUrl!, 'pause_until_resumed');
    const a = await start(['--cluster', db]);
    const c = await pauseUntilResumed(a, 'cluster-held');
    const b = await start(['--cluster', db]);
    expect(await tube(b, 'cluster-held')).toMatchObject({ pausedUntilResumed: true, pauseSeconds: MAX_PAUSE_SECONDS });
    await b.stop();
    servers.splice(servers.indexOf(b), 1);
    const b2 = await start(['--cluster', db]);
    expect(await tube(b2, 'cluster-held')).toMatchObject({ pausedUntilResumed: true });
    await resume(b2, c, 'cluster-held');
  });
});
