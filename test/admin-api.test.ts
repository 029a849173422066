/**
 * The admin REST API against a real server process, next to the beanstalkd protocol on the
 * same process: every endpoint's success path and JSON shape (checked against what the
 * protocol's stats / stats-job / stats-tube / list-tubes say), one road through both front
 * doors, bad input (clear 4xx JSON, never a crash), the security guards (token, read-only,
 * same-origin, headers, an exposed address without a token) and durability with -b.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { io, type Socket } from 'socket.io-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { API, BODY_PREVIEW_BYTES } from '../shared/api.js';
import { MAX_PAUSE_SECONDS } from '../shared/limits.js';
import type {
  TubeHealthDto,
  AdminConfigDto,
  ApiErrorDto,
  ConnectionDto,
  JobDto,
  JobPageDto,
  JobStatsDto,
  ServerStatsDto,
  SnapshotDto,
  TubeDto,
} from '../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/events.js';
import { api, apiBytes, apiWithHost, startAdminServer, yamlList, yamlMap, type AdminServerProcess, type ApiResponse } from './support/admin-server.js';
import { expectLine, expectOk } from './support/expectations.js';
import { RawClient, tcpPut, tcpReserve } from './support/raw-client.js';
import { BEANPOLE_BIN, freePort } from './support/servers.js';

const CRLF = Buffer.from('\r\n', 'latin1');

const TUBE_KEYS = [
  'name',
  'urgent',
  'ready',
  'reserved',
  'delayed',
  'buried',
  'totalJobs',
  'using',
  'watching',
  'waiting',
  'cmdDelete',
  'cmdPauseTube',
  'pauseSeconds',
  'pauseTimeLeftSeconds',
  'pausedUntilResumed',
  'nextReadyAgeSeconds',
  'deadLetterAfter',
  'ownDeadLetterAfter',
  'policy',
] as const satisfies readonly (keyof TubeDto)[];

const JOB_STATS_KEYS = [
  'id',
  'tube',
  'state',
  'priority',
  'ageSeconds',
  'delaySeconds',
  'ttrSeconds',
  'timeLeftSeconds',
  'file',
  'reserves',
  'timeouts',
  'releases',
  'buries',
  'kicks',
  'reservedBy',
  'reservedByNode',
  'strikes',
  'buryCause',
  'bodyBytes',
] as const satisfies readonly (keyof JobStatsDto)[];

/** Stats that are text whatever they look like. */
const TEXT_STATS = new Set(['id', 'hostname', 'version', 'os', 'platform']);

/** Stats whose values move with time or CPU, so two reads a moment apart may differ. */
const TIME_STATS = new Set(['rusage-utime', 'rusage-stime', 'uptime']);

const clients: RawClient[] = [];
const sockets: Socket[] = [];
const extraServers: AdminServerProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of sockets.splice(0)) s.disconnect();
  await Promise.all(extraServers.splice(0).map((s) => s.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function tcp(server: AdminServerProcess): Promise<RawClient> {
  const c = await RawClient.connect(server.port);
  clients.push(c);
  return c;
}

async function startExtra(args: readonly string[]): Promise<AdminServerProcess> {
  const s = await startAdminServer(args);
  extraServers.push(s);
  return s;
}

async function tcpStats(c: RawClient): Promise<Map<string, string>> {
  return yamlMap(await c.call('stats\r\n'));
}

async function tcpStatsJob(c: RawClient, id: number): Promise<Map<string, string>> {
  return yamlMap(await c.call(`stats-job ${id}\r\n`));
}

async function tcpStatsTube(c: RawClient, name: string): Promise<Map<string, string>> {
  return yamlMap(await c.call(`stats-tube ${name}\r\n`));
}

/** The body of peek <id>, or null for NOT_FOUND. */
async function tcpPeek(c: RawClient, id: number): Promise<Buffer | null> {
  const reply = Buffer.from(await c.call(`peek ${id}\r\n`), 'latin1');
  if (reply.toString('latin1') === 'NOT_FOUND\r\n') return null;
  const eol = reply.indexOf('\r\n');
  const m = /^FOUND (\d+) (\d+)$/.exec(reply.toString('latin1', 0, eol));
  if (m === null) throw new Error(`peek: ${JSON.stringify(reply.toString('latin1'))}`);
  return reply.subarray(eol + 2, eol + 2 + Number(m[2]));
}

function expectError(res: ApiResponse, status: number, error?: string): ApiErrorDto {
  expect(res.status, `${res.status} ${res.text.slice(0, 300)}`).toBe(status);
  expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
  const body = res.json as ApiErrorDto;
  expect(Object.keys(body).sort()).toEqual(['error', 'message']);
  expect(typeof body.error).toBe('string');
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(0);
  if (error !== undefined) expect(body.error).toBe(error);
  return body;
}

/** Every job of a tube in one state, following `next` cursors `limit` at a time. */
async function allPages(base: string, tube: string, state: string, limit: number): Promise<{ ids: number[]; pages: JobPageDto[] }> {
  const ids: number[] = [];
  const pages: JobPageDto[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const q = new URLSearchParams({ state, limit: String(limit) });
    if (cursor !== null) q.set('cursor', cursor);
    const page = expectOk<JobPageDto>(await api(base, `${API.tubeJobs(tube)}?${q}`));
    pages.push(page);
    ids.push(...page.jobs.map((j) => j.id));
    cursor = page.next;
    if (cursor === null) return { ids, pages };
  }
  throw new Error('paging did not end');
}

/** A job's stats from the API side by side with stats-job over the protocol. */
function expectSameJobStats(dto: JobStatsDto, yaml: Map<string, string>): void {
  expect({
    id: dto.id,
    tube: dto.tube,
    state: dto.state,
    priority: dto.priority,
    delaySeconds: dto.delaySeconds,
    ttrSeconds: dto.ttrSeconds,
    file: dto.file,
    reserves: dto.reserves,
    timeouts: dto.timeouts,
    releases: dto.releases,
    buries: dto.buries,
    kicks: dto.kicks,
  }).toEqual({
    id: Number(yaml.get('id')),
    tube: yaml.get('tube'),
    state: yaml.get('state'),
    priority: Number(yaml.get('pri')),
    delaySeconds: Number(yaml.get('delay')),
    ttrSeconds: Number(yaml.get('ttr')),
    file: Number(yaml.get('file')),
    reserves: Number(yaml.get('reserves')),
    timeouts: Number(yaml.get('timeouts')),
    releases: Number(yaml.get('releases')),
    buries: Number(yaml.get('buries')),
    kicks: Number(yaml.get('kicks')),
  });
  expect(Math.abs(dto.ageSeconds - Number(yaml.get('age')))).toBeLessThanOrEqual(1);
  expect(Math.abs(dto.timeLeftSeconds - Number(yaml.get('time-left')))).toBeLessThanOrEqual(1);
}

function cmdCounters(stats: ServerStatsDto | Map<string, string>): Record<string, number> {
  const entries = stats instanceof Map ? [...stats.entries()] : Object.entries(stats);
  const out: Record<string, number> = {};
  for (const [k, v] of entries) if (k.startsWith('cmd-') || k.startsWith('current-jobs-') || k === 'total-jobs') out[k] = Number(v);
  return out;
}

describe('admin REST API on a real server', () => {
  let srv: AdminServerProcess;
  let base: string;

  beforeAll(async () => {
    srv = await startAdminServer(['-z', '200000']);
    base = srv.url;
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('GET /api/config and /healthz', async () => {
    const config = expectOk<AdminConfigDto>(await api(base, API.config));
    expect(config).toEqual({ version: expect.any(String), readOnly: false, tokenRequired: false, maxJobSize: 200000, binlog: false, clusterNode: null });
    expect(Object.keys(config).sort()).toEqual(['binlog', 'clusterNode', 'maxJobSize', 'readOnly', 'tokenRequired', 'version']);
    const health = expectOk<{ ok: boolean; draining: boolean }>(await api(base, '/healthz'));
    expect(health).toEqual({ ok: true, draining: false });
  });

  it('GET /api/stats: beanstalkd keys in order, numbers as numbers, the same values as the protocol', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use stats-t', 'USING stats-t');
    await tcpPut(c, 'a');
    await tcpPut(c, 'b', 2000, 100);
    await expectLine(c, 'watch stats-t', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const r = await tcpReserve(c);
    await expectLine(c, `bury ${r.id} 5`, 'BURIED');
    expect(await c.call('peek 999999\r\n')).toBe('NOT_FOUND\r\n');

    const tcpS = await tcpStats(c);
    const apiS = expectOk<ServerStatsDto>(await api(base, API.stats));
    expect(Object.keys(apiS)).toEqual([...tcpS.keys()]);
    for (const [key, text] of tcpS) {
      const value = apiS[key];
      // The instance id is 16 random hex digits, now and then all of them decimal: still a string.
      if (TEXT_STATS.has(key)) {
        expect(value, key).toBe(text);
      } else if (/^-?\d+(\.\d+)?$/.test(text)) {
        expect(typeof value, key).toBe('number');
        if (TIME_STATS.has(key)) expect(Math.abs((value as number) - Number(text)), key).toBeLessThanOrEqual(1);
        else expect(value, key).toBe(Number(text));
      } else if (text === 'true' || text === 'false') {
        expect(value, key).toBe(text === 'true');
      } else {
        expect(value, key).toBe(text);
      }
    }
    expect(apiS['cmd-put']).toBeGreaterThanOrEqual(2);
    expect(apiS['cmd-bury']).toBeGreaterThanOrEqual(1);
    expect(apiS['cmd-peek']).toBeGreaterThanOrEqual(1);
    expect(apiS['current-connections']).toBe(Number(tcpS.get('current-connections')));
    expect(typeof apiS['draining']).toBe('boolean');
    expect(typeof apiS['version']).toBe('string');
  });

  it('GET /api/tubes and /api/tubes/:name agree with list-tubes and stats-tube', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use tubes-t', 'USING tubes-t');
    await tcpPut(c, 'urgent', 1);
    await tcpPut(c, 'not urgent', 5000);
    await tcpPut(c, 'later', 10, 300);
    await tcpPut(c, 'to bury', 0);
    await expectLine(c, 'watch tubes-t', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const r = await tcpReserve(c);
    await expectLine(c, `bury ${r.id} 0`, 'BURIED');
    await tcpPut(c, 'held', 0);
    await tcpReserve(c);

    const list = expectOk<TubeDto[]>(await api(base, API.tubes));
    expect(list.map((t) => t.name)).toEqual(yamlList(await c.call('list-tubes\r\n')));
    for (const t of list) expect(Object.keys(t)).toEqual([...TUBE_KEYS]);

    const one = expectOk<TubeDto>(await api(base, API.tube('tubes-t')));
    expect(list.find((t) => t.name === 'tubes-t')).toEqual(one);
    const y = await tcpStatsTube(c, 'tubes-t');
    expect(one).toEqual({
      name: y.get('name'),
      urgent: Number(y.get('current-jobs-urgent')),
      ready: Number(y.get('current-jobs-ready')),
      reserved: Number(y.get('current-jobs-reserved')),
      delayed: Number(y.get('current-jobs-delayed')),
      buried: Number(y.get('current-jobs-buried')),
      totalJobs: Number(y.get('total-jobs')),
      using: Number(y.get('current-using')),
      watching: Number(y.get('current-watching')),
      waiting: Number(y.get('current-waiting')),
      cmdDelete: Number(y.get('cmd-delete')),
      cmdPauseTube: Number(y.get('cmd-pause-tube')),
      pauseSeconds: Number(y.get('pause')),
      pauseTimeLeftSeconds: Number(y.get('pause-time-left')),
      pausedUntilResumed: y.get('pause') === String(MAX_PAUSE_SECONDS),
      // Not in stats-tube: how long the next ready job has waited (just put: 0 s), the
      // dead-letter rule, off unless asked for, and the tube's policy (none).
      nextReadyAgeSeconds: 0,
      deadLetterAfter: 0,
      ownDeadLetterAfter: null,
      policy: null,
    });
    expect(one).toMatchObject({ urgent: 1, ready: 2, reserved: 1, delayed: 1, buried: 1, totalJobs: 5, using: 1, watching: 1 });

    expectError(await api(base, API.tube('no-such-tube')), 404, 'NOT_FOUND');
  });

  it('GET /api/tube-health lists the tubes with ready or reserved jobs, with the oldest ready job\'s age', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use health-t', 'USING health-t');
    await tcpPut(c, 'waiting', 10);
    await expectLine(c, 'use health-empty', 'USING health-empty');
    const health = expectOk<TubeHealthDto[]>(await api(base, API.tubeHealth));
    const mine = health.find((h) => h.tube === 'health-t');
    expect(mine).toEqual({ tube: 'health-t', oldestReadyAgeSeconds: expect.any(Number), reservedNearTtr: 0, backlogRise: 0 });
    expect(health.find((h) => h.tube === 'health-empty')).toBeUndefined();
  });

  it('job lists page through every state in engine order with cursors', async () => {
    const p = await tcp(srv);
    const w = await tcp(srv);
    await expectLine(p, 'use pages', 'USING pages');
    await expectLine(w, 'watch pages', 'WATCHING 2');
    await expectLine(w, 'ignore default', 'WATCHING 1');
    // Eight urgent jobs for the worker: five are buried out of id order, three stay reserved.
    const held: number[] = [];
    for (let i = 0; i < 8; i++) held.push(await tcpPut(p, `held-${i}`, 0));
    for (let i = 0; i < 8; i++) expect((await tcpReserve(w)).id).toBe(held[i]);
    const buryOrder = [held[3]!, held[0]!, held[6]!, held[5]!, held[1]!];
    for (const id of buryOrder) await expectLine(w, `bury ${id} 0`, 'BURIED');
    const reservedIds = [held[2]!, held[4]!, held[7]!];
    // Ready jobs: by (priority, id).
    const readyPris = [7, 3, 7, 1, 3, 9, 0, 4];
    const ready: { id: number; pri: number }[] = [];
    for (const [i, pri] of readyPris.entries()) ready.push({ id: await tcpPut(p, `ready-${i}`, pri), pri });
    const readyOrder = [...ready].sort((a, b) => a.pri - b.pri || a.id - b.id).map((j) => j.id);
    // Delayed jobs: by (deadline, id).
    const delays = [300, 100, 300, 200, 100];
    const delayed: { id: number; delay: number }[] = [];
    for (const [i, delay] of delays.entries()) delayed.push({ id: await tcpPut(p, `delayed-${i}`, 1, delay), delay });
    const delayedOrder = [...delayed].sort((a, b) => a.delay - b.delay || a.id - b.id).map((j) => j.id);

    const want: Record<string, number[]> = { ready: readyOrder, delayed: delayedOrder, buried: buryOrder, reserved: reservedIds };
    for (const [state, ids] of Object.entries(want)) {
      const { ids: got, pages } = await allPages(base, 'pages', state, 2);
      expect(got, state).toEqual(ids);
      expect(pages.length, state).toBe(Math.ceil(ids.length / 2));
      for (const page of pages.slice(0, -1)) {
        expect(page.jobs.length).toBe(2);
        expect(typeof page.next).toBe('string');
      }
      for (const page of pages) {
        for (const j of page.jobs) {
          expect(Object.keys(j)).toEqual([...JOB_STATS_KEYS, 'preview']);
          expect(j.state).toBe(state);
          expect(j.tube).toBe('pages');
          expect(j.preview).toMatch(/^(held|ready|delayed)-\d$/);
        }
      }
      // One page with the default limit holds them all.
      const whole = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('pages')}?state=${state}`));
      expect(whole.jobs.map((j) => j.id)).toEqual(ids);
      expect(whole.next).toBeNull();
    }
    // A ready job's summary matches stats-job.
    const first = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('pages')}?state=ready&limit=1`)).jobs[0]!;
    expectSameJobStats(first, await tcpStatsJob(p, first.id));
    expect(first.preview).toBe('ready-6');
    // A cursor stays valid while the job it names goes away: the next page starts after it.
    const page1 = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('pages')}?state=ready&limit=3`));
    await expectLine(p, `delete ${page1.jobs[2]!.id}`, 'DELETED');
    const page2 = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('pages')}?state=ready&limit=3&cursor=${page1.next!}`));
    expect(page2.jobs.map((j) => j.id)).toEqual(readyOrder.slice(3, 6));
    // An empty state.
    const c2 = await tcp(srv);
    await expectLine(c2, 'use pages-empty', 'USING pages-empty');
    expect(expectOk<JobPageDto>(await api(base, `${API.tubeJobs('pages-empty')}?state=buried`))).toEqual({ jobs: [], next: null });
  });

  it('GET /api/jobs/:id: stats as stats-job shows them, utf8 text and binary as base64', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use bodies', 'USING bodies');
    const text = 'héllo ✓ 𝄞 "quoted" \\ \u0000 end';
    const textId = await tcpPut(c, text, 42, 0, 30);
    const bin = Buffer.from([0x00, 0xff, 0xfe, 0x0d, 0x0a, 0x80, 0xc3, 0x28]);
    const binId = await tcpPut(c, bin, 7, 120, 10);

    const t = expectOk<JobDto>(await api(base, API.job(textId)));
    expect(Object.keys(t)).toEqual([...JOB_STATS_KEYS, 'body']);
    expect(t.body).toEqual({ encoding: 'utf8', text, bytes: Buffer.byteLength(text), truncated: false });
    expect(t).toMatchObject({ id: textId, tube: 'bodies', state: 'ready', priority: 42, ttrSeconds: 30, bodyBytes: Buffer.byteLength(text) });
    expectSameJobStats(t, await tcpStatsJob(c, textId));

    const b = expectOk<JobDto>(await api(base, API.job(binId)));
    expect(b.body).toEqual({ encoding: 'base64', base64: bin.toString('base64'), bytes: bin.length, truncated: false });
    expect(b).toMatchObject({ state: 'delayed', priority: 7, delaySeconds: 120, ttrSeconds: 10, bodyBytes: bin.length });
    expect(b.timeLeftSeconds).toBeGreaterThan(100);
    expectSameJobStats(b, await tcpStatsJob(c, binId));

    const raw = await apiBytes(base, API.jobBody(binId));
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toMatch(/^application\/octet-stream/);
    expect(raw.bytes.equals(bin)).toBe(true);
  });

  it('bodies over 64 KiB: a truncated preview, and GET /body returns the exact bytes', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use big', 'USING big');
    // A 3-byte character straddles the preview boundary: the preview drops it whole.
    const text = 'a'.repeat(BODY_PREVIEW_BYTES - 1) + '€' + 'b'.repeat(30_000);
    const textBytes = Buffer.from(text, 'utf8');
    const textId = await tcpPut(c, textBytes);
    const t = expectOk<JobDto>(await api(base, API.job(textId)));
    expect(t.bodyBytes).toBe(textBytes.length);
    expect(t.body.encoding).toBe('utf8');
    expect(t.body.truncated).toBe(true);
    expect(t.body.bytes).toBe(textBytes.length);
    if (t.body.encoding === 'utf8') expect(t.body.text).toBe('a'.repeat(BODY_PREVIEW_BYTES - 1));
    const textRaw = await apiBytes(base, API.jobBody(textId));
    expect(textRaw.bytes.equals(textBytes)).toBe(true);

    // Binary, put through the API as base64.
    const bin = Buffer.alloc(150_000);
    for (let i = 0; i < bin.length; i++) bin[i] = (i * 7919 + (i >> 8)) & 0xff;
    bin[0] = 0xff;
    const put = expectOk<JobDto>(await api(base, API.tubeJobs('big'), { json: { body: bin.toString('base64'), encoding: 'base64' } }), 201);
    expect(put.bodyBytes).toBe(bin.length);
    const b = expectOk<JobDto>(await api(base, API.job(put.id)));
    expect(b.body.encoding).toBe('base64');
    expect(b.body.truncated).toBe(true);
    if (b.body.encoding === 'base64') expect(Buffer.from(b.body.base64, 'base64').equals(bin.subarray(0, BODY_PREVIEW_BYTES))).toBe(true);
    const binRaw = await apiBytes(base, API.jobBody(put.id));
    expect(binRaw.bytes.equals(bin)).toBe(true);
    // The protocol sees the same bytes.
    expect((await tcpPeek(c, put.id))!.equals(bin)).toBe(true);
    // Exactly 64 KiB is not truncated.
    const exact = Buffer.alloc(BODY_PREVIEW_BYTES, 'x');
    const exactId = await tcpPut(c, exact);
    const e = expectOk<JobDto>(await api(base, API.job(exactId)));
    expect(e.body).toEqual({ encoding: 'utf8', text: exact.toString(), bytes: BODY_PREVIEW_BYTES, truncated: false });
  });

  it('base64 bodies: whole groups, padded or not, decode to the exact bytes', async () => {
    const c = await tcp(srv);
    const cases: [string, number[]][] = [
      ['', []],
      ['QQ', [0x41]],
      ['QQ==', [0x41]],
      ['QUI', [0x41, 0x42]],
      ['QUI=', [0x41, 0x42]],
      ['/+8A', [0xff, 0xef, 0x00]],
    ];
    for (const [text, bytes] of cases) {
      const j = expectOk<JobDto>(await api(base, API.tubeJobs('b64'), { json: { body: text, encoding: 'base64' } }), 201);
      expect(j.bodyBytes, text).toBe(bytes.length);
      expect((await tcpPeek(c, j.id))!.equals(Buffer.from(bytes)), text).toBe(true);
    }
  });

  it('POST /api/tubes/:name/jobs: 201, ids continue the protocol ids, counts cmd-put', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use puts', 'USING puts');
    const before = await tcpStats(c);
    const id1 = await tcpPut(c, 'over tcp');
    const res = await api(base, API.tubeJobs('puts'), { json: { body: 'over http', priority: 17, ttrSeconds: 25 } });
    const job = expectOk<JobDto>(res, 201);
    expect(job.id).toBe(id1 + 1);
    expect(job).toMatchObject({ tube: 'puts', state: 'ready', priority: 17, ttrSeconds: 25, delaySeconds: 0, bodyBytes: 9 });
    expect(job.body).toEqual({ encoding: 'utf8', text: 'over http', bytes: 9, truncated: false });
    const id3 = await tcpPut(c, 'over tcp again');
    expect(id3).toBe(id1 + 2);
    expect((await tcpPeek(c, job.id))!.toString()).toBe('over http');
    expectSameJobStats(job, await tcpStatsJob(c, job.id));

    // Defaults: priority 0, no delay, TTR 60; a delayed put.
    const d = expectOk<JobDto>(await api(base, API.tubeJobs('puts'), { json: { body: 'later', delaySeconds: 30 } }), 201);
    expect(d).toMatchObject({ state: 'delayed', priority: 0, delaySeconds: 30, ttrSeconds: 60 });
    const sj = await tcpStatsJob(c, d.id);
    expect(sj.get('state')).toBe('delayed');
    expect(sj.get('delay')).toBe('30');
    // A put into a new tube creates it.
    const n = expectOk<JobDto>(await api(base, API.tubeJobs('puts-new'), { json: { body: '' } }), 201);
    expect(n).toMatchObject({ tube: 'puts-new', bodyBytes: 0 });
    expect(expectOk<TubeDto>(await api(base, API.tube('puts-new'))).ready).toBe(1);

    const after = await tcpStats(c);
    expect(Number(after.get('cmd-put')) - Number(before.get('cmd-put'))).toBe(5);
    expect(Number(after.get('total-jobs')) - Number(before.get('total-jobs'))).toBe(5);
    expect(expectOk<ServerStatsDto>(await api(base, API.stats))['cmd-put']).toBe(Number(after.get('cmd-put')));
  });

  it('DELETE /api/jobs/:id: 204; 409 for a job a TCP worker holds; 404 afterwards', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use dels', 'USING dels');
    await expectLine(c, 'watch dels', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const a = await tcpPut(c, 'a', 0);
    const b = await tcpPut(c, 'b', 1);
    const before = Number((await tcpStats(c)).get('cmd-delete'));
    const del = await api(base, API.job(a), { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect(await tcpPeek(c, a)).toBeNull();
    expect(Number((await tcpStats(c)).get('cmd-delete'))).toBe(before + 1);
    expect((await tcpStatsTube(c, 'dels')).get('cmd-delete')).toBe('1');

    expect((await tcpReserve(c)).id).toBe(b);
    expectError(await api(base, API.job(b), { method: 'DELETE' }), 409, 'JOB_RESERVED');
    expect((await tcpStatsJob(c, b)).get('state')).toBe('reserved');
    await expectLine(c, `delete ${b}`, 'DELETED');
    expectError(await api(base, API.job(b), { method: 'DELETE' }), 404, 'NOT_FOUND');
    expectError(await api(base, API.job(a), { method: 'DELETE' }), 404, 'NOT_FOUND');
  });

  it('POST /api/jobs/:id/kick kicks a buried or delayed job; 404 for a ready one', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use kickjob', 'USING kickjob');
    await expectLine(c, 'watch kickjob', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const id = await tcpPut(c, 'x', 3);
    await tcpReserve(c);
    await expectLine(c, `bury ${id} 3`, 'BURIED');
    const k = expectOk<JobDto>(await api(base, API.jobKick(id), { method: 'POST' }));
    expect(k).toMatchObject({ id, state: 'ready', kicks: 1, buries: 1, priority: 3 });
    expect((await tcpStatsJob(c, id)).get('state')).toBe('ready');
    expectError(await api(base, API.jobKick(id), { method: 'POST' }), 404, 'NOT_FOUND');
    const d = await tcpPut(c, 'delayed', 0, 500);
    expect(expectOk<JobDto>(await api(base, API.jobKick(d), { method: 'POST' })).state).toBe('ready');
    expect((await tcpStatsJob(c, d)).get('state')).toBe('ready');
  });

  it('POST /api/tubes/:name/kick {bound} answers {count}: buried first, then delayed', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use kicktube', 'USING kicktube');
    await expectLine(c, 'watch kicktube', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    for (let i = 0; i < 5; i++) await tcpPut(c, `b${i}`);
    for (let i = 0; i < 5; i++) {
      const r = await tcpReserve(c);
      await expectLine(c, `bury ${r.id} 0`, 'BURIED');
    }
    await tcpPut(c, 'd0', 0, 500);
    await tcpPut(c, 'd1', 0, 500);
    const before = Number((await tcpStats(c)).get('cmd-kick'));
    expect(expectOk<{ count: number }>(await api(base, API.tubeKick('kicktube'), { json: { bound: 3 } }))).toEqual({ count: 3 });
    let y = await tcpStatsTube(c, 'kicktube');
    expect([y.get('current-jobs-buried'), y.get('current-jobs-ready'), y.get('current-jobs-delayed')]).toEqual(['2', '3', '2']);
    expect(expectOk<{ count: number }>(await api(base, API.tubeKick('kicktube'), { json: { bound: 10 } }))).toEqual({ count: 2 });
    expect(expectOk<{ count: number }>(await api(base, API.tubeKick('kicktube'), { json: { bound: 10 } }))).toEqual({ count: 2 });
    expect(expectOk<{ count: number }>(await api(base, API.tubeKick('kicktube'), { json: { bound: 10 } }))).toEqual({ count: 0 });
    expect(expectOk<{ count: number }>(await api(base, API.tubeKick('kicktube'), { json: { bound: 0 } }))).toEqual({ count: 0 });
    y = await tcpStatsTube(c, 'kicktube');
    expect([y.get('current-jobs-buried'), y.get('current-jobs-ready'), y.get('current-jobs-delayed')]).toEqual(['0', '7', '0']);
    expect(Number((await tcpStats(c)).get('cmd-kick'))).toBe(before + 5);
    expectError(await api(base, API.tubeKick('kick-nope'), { json: { bound: 1 } }), 404, 'NOT_FOUND');
  });

  it('POST /api/tubes/:name/pause pauses (stats-tube shows it) and 0 unpauses', async () => {
    const p = await tcp(srv);
    const w = await tcp(srv);
    await expectLine(p, 'use pausing', 'USING pausing');
    await expectLine(w, 'watch pausing', 'WATCHING 2');
    await expectLine(w, 'ignore default', 'WATCHING 1');
    const id = await tcpPut(p, 'wait for it');
    const t = expectOk<TubeDto>(await api(base, API.tubePause('pausing'), { json: { seconds: 60 } }));
    expect(t).toMatchObject({ name: 'pausing', pauseSeconds: 60, cmdPauseTube: 1, ready: 1 });
    expect(t.pauseTimeLeftSeconds).toBeGreaterThanOrEqual(59);
    let y = await tcpStatsTube(p, 'pausing');
    expect(y.get('pause')).toBe('60');
    expect(Number(y.get('pause-time-left'))).toBeGreaterThanOrEqual(59);
    expect(y.get('cmd-pause-tube')).toBe('1');
    expect(await w.call('reserve-with-timeout 0\r\n')).toBe('TIMED_OUT\r\n');

    const u = expectOk<TubeDto>(await api(base, API.tubePause('pausing'), { json: { seconds: 0 } }));
    expect(u.pauseTimeLeftSeconds).toBe(0);
    expect(u.cmdPauseTube).toBe(2);
    y = await tcpStatsTube(p, 'pausing');
    expect(y.get('pause')).toBe('0');
    expect(y.get('pause-time-left')).toBe('0');
    expect(await w.call('reserve-with-timeout 2\r\n')).toBe(`RESERVED ${id} 11\r\nwait for it\r\n`);
    expectError(await api(base, API.tubePause('pause-nope'), { json: { seconds: 1 } }), 404, 'NOT_FOUND');
  });

  it('DELETE /api/tubes/:name/jobs?state= clears one state and answers {count}', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use clearing', 'USING clearing');
    await expectLine(c, 'watch clearing', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    for (let i = 0; i < 2; i++) {
      const id = await tcpPut(c, `b${i}`);
      expect((await tcpReserve(c)).id).toBe(id);
      await expectLine(c, `bury ${id} 0`, 'BURIED');
    }
    for (let i = 0; i < 3; i++) await tcpPut(c, `r${i}`);
    for (let i = 0; i < 2; i++) await tcpPut(c, `d${i}`, 0, 900);
    const held = await tcpReserve(c);
    const before = Number((await tcpStats(c)).get('cmd-delete'));
    const clear = (state: string): Promise<ApiResponse> => api(base, `${API.tubeJobs('clearing')}?state=${state}`, { method: 'DELETE' });
    expect(expectOk<{ count: number }>(await clear('buried'))).toEqual({ count: 2 });
    expect(expectOk<{ count: number }>(await clear('ready'))).toEqual({ count: 2 });
    expect(expectOk<{ count: number }>(await clear('delayed'))).toEqual({ count: 2 });
    expect(expectOk<{ count: number }>(await clear('delayed'))).toEqual({ count: 0 });
    const y = await tcpStatsTube(c, 'clearing');
    expect([y.get('current-jobs-ready'), y.get('current-jobs-delayed'), y.get('current-jobs-buried'), y.get('current-jobs-reserved')]).toEqual([
      '0',
      '0',
      '0',
      '1',
    ]);
    expect(y.get('cmd-delete')).toBe('6');
    expect(Number((await tcpStats(c)).get('cmd-delete'))).toBe(before + 6);
    // Reserved jobs cannot be cleared.
    expectError(await clear('reserved'), 400, 'BAD_REQUEST');
    expect((await tcpStatsJob(c, held.id)).get('state')).toBe('reserved');
  });

  it('PATCH /api/jobs/:id edits body, priority, TTR, delay and tube in place', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use editing', 'USING editing');
    await expectLine(c, 'watch editing', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const id = await tcpPut(c, 'original', 100, 0, 60);
    const patch = (jobId: number, json: unknown): Promise<ApiResponse> => api(base, API.job(jobId), { method: 'PATCH', json });

    let j = expectOk<JobDto>(await patch(id, { body: 'changed ✓', priority: 5, ttrSeconds: 99 }));
    expect(j).toMatchObject({ id, state: 'ready', priority: 5, ttrSeconds: 99, tube: 'editing', bodyBytes: Buffer.byteLength('changed ✓') });
    expect(j.body).toEqual({ encoding: 'utf8', text: 'changed ✓', bytes: Buffer.byteLength('changed ✓'), truncated: false });
    expect((await tcpPeek(c, id))!.toString()).toBe('changed ✓');
    expectSameJobStats(j, await tcpStatsJob(c, id));

    j = expectOk<JobDto>(await patch(id, { body: Buffer.from([1, 2, 255]).toString('base64'), encoding: 'base64' }));
    expect((await tcpPeek(c, id))!.equals(Buffer.from([1, 2, 255]))).toBe(true);

    j = expectOk<JobDto>(await patch(id, { delaySeconds: 100 }));
    expect(j).toMatchObject({ state: 'delayed', delaySeconds: 100 });
    let y = await tcpStatsJob(c, id);
    expect([y.get('state'), y.get('delay')]).toEqual(['delayed', '100']);
    j = expectOk<JobDto>(await patch(id, { delaySeconds: 0 }));
    expect(j.state).toBe('ready');

    j = expectOk<JobDto>(await patch(id, { tube: 'edited-tube' }));
    expect(j).toMatchObject({ id, tube: 'edited-tube', state: 'ready', priority: 5 });
    expect((await tcpStatsJob(c, id)).get('tube')).toBe('edited-tube');
    expect(expectOk<JobPageDto>(await api(base, `${API.tubeJobs('edited-tube')}?state=ready`)).jobs.map((x) => x.id)).toEqual([id]);

    // Buried stays buried; kick:true kicks after saving.
    const b = await tcpPut(c, 'to bury', 0);
    expect((await tcpReserve(c)).id).toBe(b);
    await expectLine(c, `bury ${b} 0`, 'BURIED');
    j = expectOk<JobDto>(await patch(b, { body: 'buried edit', priority: 9 }));
    expect(j).toMatchObject({ state: 'buried', priority: 9, buries: 1 });
    y = await tcpStatsJob(c, b);
    expect([y.get('state'), y.get('pri')]).toEqual(['buried', '9']);
    expect(await c.call('peek-buried\r\n')).toBe(`FOUND ${b} 11\r\nburied edit\r\n`);
    j = expectOk<JobDto>(await patch(b, { body: 'kicked edit', kick: true }));
    expect(j).toMatchObject({ state: 'ready', kicks: 1 });
    expect((await tcpStatsJob(c, b)).get('state')).toBe('ready');
    expect((await tcpPeek(c, b))!.toString()).toBe('kicked edit');

    // A delayed job with kick:true becomes ready.
    const d = await tcpPut(c, 'delayed', 0, 600);
    expect(expectOk<JobDto>(await patch(d, { priority: 1, kick: true })).state).toBe('ready');

    // Reserved: 409 and nothing changes.
    const held = await tcpPut(c, 'held', 0);
    expect((await tcpReserve(c)).id).toBe(held);
    expectError(await patch(held, { priority: 77 }), 409, 'JOB_RESERVED');
    expectError(await patch(held, { kick: true }), 409, 'JOB_RESERVED');
    y = await tcpStatsJob(c, held);
    expect(y.get('state')).toBe('reserved');
    expect(y.get('pri')).not.toBe('77');

    expectError(await patch(999_999_999, { priority: 1 }), 404, 'NOT_FOUND');
  });

  it('durations may be named as on the protocol: ttr and delay (seconds), not both spellings at once', async () => {
    const c = await tcp(srv);
    const put = expectOk<JobDto>(await api(base, API.tubeJobs('aliases'), { json: { body: 'a', ttr: 7, delay: 100, priority: 3 } }), 201);
    expect(put).toMatchObject({ ttrSeconds: 7, delaySeconds: 100, state: 'delayed', priority: 3 });
    const stats = await tcpStatsJob(c, put.id);
    expect(stats.get('ttr')).toBe('7');
    expect(stats.get('delay')).toBe('100');
    const edited = expectOk<JobDto>(await api(base, API.job(put.id), { method: 'PATCH', json: { ttr: 30, delay: 0 } }));
    expect(edited).toMatchObject({ id: put.id, ttrSeconds: 30, delaySeconds: 0, state: 'ready' });
    expectError(await api(base, API.job(put.id), { method: 'PATCH', json: { ttr: 30, ttrSeconds: 30 } }), 400);
    expectError(await api(base, API.tubeJobs('aliases'), { json: { body: 'b', delay: 1, delaySeconds: 1 } }), 400);
    expect((await tcpStatsJob(c, put.id)).get('ttr')).toBe('30');
  });

  it('POST /api/tubes/:name/move {to,state,limit} moves jobs keeping id, priority and state', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use move-src', 'USING move-src');
    await expectLine(c, 'watch move-src', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const buried: number[] = [];
    for (let i = 0; i < 2; i++) {
      const id = await tcpPut(c, `b${i}`, 0);
      expect((await tcpReserve(c)).id).toBe(id);
      await expectLine(c, `bury ${id} ${20 + i}`, 'BURIED');
      buried.push(id);
    }
    const ready: { id: number; pri: number }[] = [];
    for (const pri of [5, 1, 3, 2]) ready.push({ id: await tcpPut(c, `r${pri}`, pri), pri });
    const delayedId = await tcpPut(c, 'd', 8, 700);

    const move = (json: unknown): Promise<ApiResponse> => api(base, API.tubeMove('move-src'), { json });
    expect(expectOk<{ count: number }>(await move({ to: 'move-dst', state: 'ready', limit: 3 }))).toEqual({ count: 3 });
    const moved = [...ready].sort((a, b) => a.pri - b.pri).slice(0, 3);
    const dst = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('move-dst')}?state=ready`));
    expect(dst.jobs.map((j) => [j.id, j.priority])).toEqual(moved.map((j) => [j.id, j.pri]));
    for (const j of moved) expect((await tcpStatsJob(c, j.id)).get('tube')).toBe('move-dst');
    const src = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('move-src')}?state=ready`));
    expect(src.jobs.map((j) => j.priority)).toEqual([5]);

    expect(expectOk<{ count: number }>(await move({ to: 'move-dst', state: 'buried', limit: 10 }))).toEqual({ count: 2 });
    const db = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('move-dst')}?state=buried`));
    expect(db.jobs.map((j) => [j.id, j.priority, j.state])).toEqual([
      [buried[0], 20, 'buried'],
      [buried[1], 21, 'buried'],
    ]);
    expect(expectOk<{ count: number }>(await move({ to: 'move-dst', state: 'delayed', limit: 10 }))).toEqual({ count: 1 });
    const y = await tcpStatsJob(c, delayedId);
    expect([y.get('tube'), y.get('state'), y.get('pri'), y.get('delay')]).toEqual(['move-dst', 'delayed', '8', '700']);
    expect(Number(y.get('time-left'))).toBeGreaterThan(600);
    expect(expectOk<{ count: number }>(await move({ to: 'move-dst', state: 'delayed', limit: 10 }))).toEqual({ count: 0 });
    expectError(await move({ to: 'move-src', state: 'ready', limit: 1 }), 400, 'BAD_REQUEST');
    expectError(await api(base, API.tubeMove('move-nope'), { json: { to: 'x', state: 'ready', limit: 1 } }), 404, 'NOT_FOUND');
  });

  it('GET /api/connections shows a TCP client: address, used tube, watched tubes, reserved ids', async () => {
    const p = await tcp(srv);
    await expectLine(p, 'use conn-w1', 'USING conn-w1');
    const ids = [await tcpPut(p, 'one'), await tcpPut(p, 'two')];
    const w = await tcp(srv);
    await expectLine(w, 'use conn-used', 'USING conn-used');
    await expectLine(w, 'watch conn-w1', 'WATCHING 2');
    await expectLine(w, 'watch conn-w2', 'WATCHING 3');
    await expectLine(w, 'ignore default', 'WATCHING 2');
    expect((await tcpReserve(w)).id).toBe(ids[0]);
    expect((await tcpReserve(w)).id).toBe(ids[1]);

    const list = expectOk<ConnectionDto[]>(await api(base, API.connections));
    const addr = (c: RawClient): string => `${c.socket.localAddress}:${c.socket.localPort}`;
    const wc = list.find((x) => x.address === addr(w));
    const pc = list.find((x) => x.address === addr(p));
    expect(wc, JSON.stringify(list)).toBeDefined();
    expect(pc).toBeDefined();
    expect(Object.keys(wc!).sort()).toEqual([
      'address',
      'ageSeconds',
      'holding',
      'id',
      'identity',
      'idleSeconds',
      'lastCommand',
      'producer',
      'reserved',
      'using',
      'waiting',
      'watching',
      'worker',
    ]);
    expect(wc!.address).toMatch(/^127\.0\.0\.1:\d+$/);
    // A plaintext client has no certificate, so no identity (test/tls.test.ts has one that does).
    expect(wc!.identity).toBeNull();
    expect(wc).toMatchObject({ using: 'conn-used', worker: true, producer: false, waiting: false });
    expect([...wc!.watching].sort()).toEqual(['conn-w1', 'conn-w2']);
    expect([...wc!.reserved].sort((a, b) => a - b)).toEqual(ids);
    expect(pc).toMatchObject({ using: 'conn-w1', producer: true, worker: false, watching: ['default'], reserved: [] });
    expect(typeof wc!.id).toBe('number');
    expect(wc!.id).not.toBe(pc!.id);
    // Gone once it disconnects.
    w.destroy();
    const deadline = Date.now() + 3000;
    let still = true;
    while (still && Date.now() < deadline) {
      const now = expectOk<ConnectionDto[]>(await api(base, API.connections));
      still = now.some((x) => x.address === addr(w));
      if (still) await new Promise((r) => setTimeout(r, 50));
    }
    expect(still).toBe(false);
  });

  it('GET /metrics is Prometheus text that agrees with stats', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use metrics-t', 'USING metrics-t');
    await tcpPut(c, 'm');
    const s = await tcpStats(c);
    const res = await api(base, '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const lines = res.text.trimEnd().split('\n');
    for (const l of lines) {
      if (l.startsWith('#')) expect(l).toMatch(/^# (HELP|TYPE) beanpole_[a-z_]+ /);
      else expect(l).toMatch(/^beanpole_[a-z_]+(\{[^}]*\})? -?\d+(\.\d+)?$/);
    }
    expect(res.text).toContain('# TYPE beanpole_commands_total counter');
    expect(res.text).toContain(`beanpole_commands_total{command="put"} ${s.get('cmd-put')}\n`);
    expect(res.text).toContain(`beanpole_jobs{state="ready"} ${s.get('current-jobs-ready')}\n`);
    expect(res.text).toContain('beanpole_tube_jobs{tube="metrics-t",state="ready"} 1\n');
    expect(res.text).toContain(`beanpole_connections ${s.get('current-connections')}\n`);
  });

  it('one road: an admin put is reserved over TCP, a TCP bury shows in the API, counters move alike', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'watch road', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const tcpBefore = await tcpStats(c);
    const apiBefore = expectOk<ServerStatsDto>(await api(base, API.stats));
    expect(cmdCounters(apiBefore)).toEqual(cmdCounters(tcpBefore));

    const body = Buffer.concat([Buffer.from('road ✓ '), Buffer.from([0, 255, 13, 10])]);
    const put = expectOk<JobDto>(await api(base, API.tubeJobs('road'), { json: { body: body.toString('base64'), encoding: 'base64', priority: 3 } }), 201);
    const r = await tcpReserve(c);
    expect(r.id).toBe(put.id);
    expect(r.body.equals(body)).toBe(true);
    expect(expectOk<JobDto>(await api(base, API.job(put.id))).state).toBe('reserved');
    await expectLine(c, `bury ${put.id} 4`, 'BURIED');
    const j = expectOk<JobDto>(await api(base, API.job(put.id)));
    expect(j).toMatchObject({ state: 'buried', priority: 4, buries: 1, reserves: 1 });
    expect(expectOk<TubeDto>(await api(base, API.tube('road')))).toMatchObject({ buried: 1, ready: 0, reserved: 0 });
    expect(expectOk<JobPageDto>(await api(base, `${API.tubeJobs('road')}?state=buried`)).jobs.map((x) => x.id)).toEqual([put.id]);
    expect(expectOk<JobDto>(await api(base, API.jobKick(put.id), { method: 'POST' })).state).toBe('ready');
    expect((await api(base, API.job(put.id), { method: 'DELETE' })).status).toBe(204);

    const tcpAfter = await tcpStats(c);
    const apiAfter = expectOk<ServerStatsDto>(await api(base, API.stats));
    expect(cmdCounters(apiAfter)).toEqual(cmdCounters(tcpAfter));
    const delta = (k: string): number => Number(tcpAfter.get(k)) - Number(tcpBefore.get(k));
    expect([delta('cmd-put'), delta('cmd-reserve-with-timeout'), delta('cmd-bury'), delta('cmd-delete'), delta('total-jobs')]).toEqual([
      1, 1, 1, 1, 1,
    ]);
  });

  it('an XSS body round-trips verbatim as JSON text', async () => {
    const xss = `<img src=x onerror="alert(1)"></script><script>alert('x')</script>\u2028&amp;`;
    const put = expectOk<JobDto>(await api(base, API.tubeJobs('xss'), { json: { body: xss } }), 201);
    const res = await api(base, API.job(put.id));
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const j = res.json as JobDto;
    expect(j.body).toEqual({ encoding: 'utf8', text: xss, bytes: Buffer.byteLength(xss), truncated: false });
    const page = expectOk<JobPageDto>(await api(base, `${API.tubeJobs('xss')}?state=ready`));
    expect(page.jobs[0]!.preview).toBe(xss);
    const raw = await apiBytes(base, API.jobBody(put.id));
    expect(raw.bytes.toString('utf8')).toBe(xss);
    expect(raw.headers.get('content-type')).toMatch(/^application\/octet-stream/);
    expect(raw.headers.get('content-disposition')).toMatch(/^attachment/);
  });

  it('security headers on API answers, errors, /metrics and the page', async () => {
    const paths = [API.config, API.stats, '/api/nope', '/metrics', '/healthz', '/'];
    for (const p of paths) {
      const res = await fetch(new URL(p, base));
      await res.arrayBuffer();
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, p).toContain("script-src 'self'");
      expect(csp, p).toContain("frame-ancestors 'none'");
      expect(csp, p).not.toMatch(/script-src[^;]*unsafe-(inline|eval)/);
      expect(res.headers.get('x-content-type-options'), p).toBe('nosniff');
      expect(res.headers.get('x-powered-by'), p).toBeNull();
    }
  });

  it('mutations from another origin are refused; the same origin is accepted', async () => {
    const origin = new URL(base).origin;
    const c = await tcp(srv);
    await expectLine(c, 'use origin-t', 'USING origin-t');
    const id = await tcpPut(c, 'keep me');
    const before = Number((await tcpStats(c)).get('total-jobs'));
    const put = (headers: Record<string, string>): Promise<ApiResponse> => api(base, API.tubeJobs('origin-t'), { json: { body: 'x' }, headers });
    expectError(await put({ origin: 'http://evil.example' }), 403, 'CROSS_ORIGIN');
    expectError(await put({ origin: 'null' }), 403, 'CROSS_ORIGIN');
    expectError(await put({ 'sec-fetch-site': 'cross-site' }), 403, 'CROSS_ORIGIN');
    expectError(await put({ 'sec-fetch-site': 'same-site' }), 403, 'CROSS_ORIGIN');
    expectError(await put({ origin, 'sec-fetch-site': 'cross-site' }), 403, 'CROSS_ORIGIN');
    expectError(await api(base, API.job(id), { method: 'DELETE', headers: { origin: 'http://evil.example' } }), 403, 'CROSS_ORIGIN');
    expectError(await api(base, API.job(id), { method: 'PATCH', json: { priority: 1 }, headers: { 'sec-fetch-site': 'cross-site' } }), 403);
    expect((await tcpPeek(c, id))!.toString()).toBe('keep me');
    expect(Number((await tcpStats(c)).get('total-jobs'))).toBe(before);
    // The dashboard's own requests.
    expectOk<JobDto>(await put({ origin, 'sec-fetch-site': 'same-origin' }), 201);
    expectOk<JobDto>(await put({ origin }), 201);
    expectOk<JobDto>(await put({ 'sec-fetch-site': 'none' }), 201);
    // Reads from anywhere are answered (a browser keeps them from the other page: no CORS headers).
    const read = await api(base, API.stats, { headers: { origin: 'http://evil.example' } });
    expect(read.status).toBe(200);
    expect(read.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('bad input gets a clear 4xx JSON error, and the server keeps serving', async () => {
    const c = await tcp(srv);
    await expectLine(c, 'use bad-in', 'USING bad-in');
    const jobId = await tcpPut(c, 'victim', 50);
    const before = await tcpStats(c);
    const putPath = API.tubeJobs('bad-in');
    type Case = [name: string, path: string, req: Parameters<typeof api>[2], status: number];
    const cases: Case[] = [
      ['invalid JSON', putPath, { raw: '{"body":' }, 400],
      ['JSON null', putPath, { raw: 'null' }, 400],
      ['JSON array', putPath, { json: ['x'] }, 400],
      ['JSON string', putPath, { json: 'x' }, 400],
      ['no body at all', putPath, { method: 'POST' }, 400],
      ['text/plain', putPath, { raw: '{"body":"x"}', headers: { 'content-type': 'text/plain' } }, 400],
      ['missing body', putPath, { json: {} }, 400],
      ['body is a number', putPath, { json: { body: 5 } }, 400],
      ['body is null', putPath, { json: { body: null } }, 400],
      ['unknown field', putPath, { json: { body: 'x', tube: 'y' } }, 400],
      ['unknown field __proto__', putPath, { raw: '{"body":"x","__proto__":{"priority":1}}' }, 400],
      ['priority as string', putPath, { json: { body: 'x', priority: '5' } }, 400],
      ['priority fractional', putPath, { json: { body: 'x', priority: 1.5 } }, 400],
      ['priority 2^32', putPath, { json: { body: 'x', priority: 4294967296 } }, 400],
      ['priority 1e400', putPath, { raw: '{"body":"x","priority":1e400}' }, 400],
      ['priority 1e300', putPath, { json: { body: 'x', priority: 1e300 } }, 400],
      ['priority -1', putPath, { json: { body: 'x', priority: -1 } }, 400],
      ['delay -5', putPath, { json: { body: 'x', delaySeconds: -5 } }, 400],
      ['delay huge', putPath, { json: { body: 'x', delaySeconds: 2 ** 53 } }, 400],
      ['ttr negative', putPath, { json: { body: 'x', ttrSeconds: -1 } }, 400],
      ['ttr boolean', putPath, { json: { body: 'x', ttrSeconds: true } }, 400],
      ['encoding hex', putPath, { json: { body: 'x', encoding: 'hex' } }, 400],
      ['base64 bad chars', putPath, { json: { body: '!!!!', encoding: 'base64' } }, 400],
      ['base64 padding inside', putPath, { json: { body: 'QQ==QQ==', encoding: 'base64' } }, 400],
      ['base64 one char (no whole byte)', putPath, { json: { body: 'A', encoding: 'base64' } }, 400],
      ['base64 five chars', putPath, { json: { body: 'QUJDR', encoding: 'base64' } }, 400],
      ['base64 short padding', putPath, { json: { body: 'QQ=', encoding: 'base64' } }, 400],
      ['base64 with a newline', putPath, { json: { body: 'QUJD\nREVG', encoding: 'base64' } }, 400],
      ['tube %00', API.tubeJobs('\u0000'), { json: { body: 'x' } }, 400],
      ['tube with space', API.tubeJobs('a b'), { json: { body: 'x' } }, 400],
      ['tube starting with -', API.tubeJobs('-abc'), { json: { body: 'x' } }, 400],
      ['tube of 201 chars', API.tubeJobs('t'.repeat(201)), { json: { body: 'x' } }, 400],
      ['tube non-ASCII', API.tubeJobs('tübe'), { json: { body: 'x' } }, 400],
      ['empty tube in the path', '/api/tubes//jobs', { json: { body: 'x' } }, 404],
      ['GET tube %00', API.tube('\u0000'), {}, 400],
      ['GET tube of 201 chars', API.tube('t'.repeat(201)), {}, 400],
      ['list: no state', API.tubeJobs('bad-in'), {}, 400],
      ['list: bad state', `${API.tubeJobs('bad-in')}?state=sleeping`, {}, 400],
      ['list: limit 0', `${API.tubeJobs('bad-in')}?state=ready&limit=0`, {}, 400],
      ['list: limit 501', `${API.tubeJobs('bad-in')}?state=ready&limit=501`, {}, 400],
      ['list: limit text', `${API.tubeJobs('bad-in')}?state=ready&limit=ten`, {}, 400],
      ['list: two states', `${API.tubeJobs('bad-in')}?state=ready&state=buried`, {}, 400],
      ['list: cursor too long', `${API.tubeJobs('bad-in')}?state=ready&cursor=${'1'.repeat(65)}`, {}, 400],
      ['list: cursor not a cursor', `${API.tubeJobs('bad-in')}?state=ready&cursor=garbage`, {}, 400],
      ['clear: no state', API.tubeJobs('bad-in'), { method: 'DELETE' }, 400],
      ['clear: unknown tube', `${API.tubeJobs('bad-in-nope')}?state=ready`, { method: 'DELETE' }, 404],
      ['job id text', '/api/jobs/abc', {}, 400],
      ['job id 0', '/api/jobs/0', {}, 400],
      ['job id -1', '/api/jobs/-1', {}, 400],
      ['job id beyond 2^53', '/api/jobs/99999999999999999999', {}, 400],
      ['job id 1.5', '/api/jobs/1.5', {}, 400],
      ['unknown job', API.job(987654321), {}, 404],
      ['unknown job body', API.jobBody(987654321), {}, 404],
      ['unknown job kick', API.jobKick(987654321), { method: 'POST' }, 404],
      ['unknown job patch', API.job(987654321), { method: 'PATCH', json: { priority: 1 } }, 404],
      ['patch: unknown field', API.job(jobId), { method: 'PATCH', json: { state: 'buried' } }, 400],
      ['patch: empty tube', API.job(jobId), { method: 'PATCH', json: { tube: '' } }, 400],
      ['patch: tube starting with -', API.job(jobId), { method: 'PATCH', json: { tube: '-x' } }, 400],
      ['patch: tube of 201 chars', API.job(jobId), { method: 'PATCH', json: { tube: 'x'.repeat(201) } }, 400],
      ['patch: tube with NUL', API.job(jobId), { method: 'PATCH', json: { tube: 'a\u0000b' } }, 400],
      ['patch: kick as text', API.job(jobId), { method: 'PATCH', json: { kick: 'yes' } }, 400],
      ['patch: priority -1', API.job(jobId), { method: 'PATCH', json: { priority: -1 } }, 400],
      ['patch: bad base64', API.job(jobId), { method: 'PATCH', json: { body: '@@', encoding: 'base64' } }, 400],
      ['kick: bound missing', API.tubeKick('bad-in'), { json: {} }, 400],
      ['kick: bound -1', API.tubeKick('bad-in'), { json: { bound: -1 } }, 400],
      ['kick: bound text', API.tubeKick('bad-in'), { json: { bound: '3' } }, 400],
      ['kick: bound 2^32', API.tubeKick('bad-in'), { json: { bound: 4294967296 } }, 400],
      ['pause: seconds -1', API.tubePause('bad-in'), { json: { seconds: -1 } }, 400],
      ['pause: seconds 2^32', API.tubePause('bad-in'), { json: { seconds: 4294967296 } }, 400],
      ['pause: extra field', API.tubePause('bad-in'), { json: { seconds: 1, until: 5 } }, 400],
      ['move: state reserved', API.tubeMove('bad-in'), { json: { to: 'elsewhere', state: 'reserved', limit: 1 } }, 400],
      ['move: limit 0', API.tubeMove('bad-in'), { json: { to: 'elsewhere', state: 'ready', limit: 0 } }, 400],
      ['move: empty to', API.tubeMove('bad-in'), { json: { to: '', state: 'ready', limit: 1 } }, 400],
      ['move: to of 201 chars', API.tubeMove('bad-in'), { json: { to: 'm'.repeat(201), state: 'ready', limit: 1 } }, 400],
      ['body over -z', putPath, { json: { body: 'x'.repeat(200_001) } }, 413],
      ['base64 body over -z', putPath, { json: { body: Buffer.alloc(200_001).toString('base64'), encoding: 'base64' } }, 413],
      ['patch: body over -z', API.job(jobId), { method: 'PATCH', json: { body: 'y'.repeat(200_001) } }, 413],
      ['unknown API path', '/api/nope', {}, 404],
      ['unknown API path, POST', '/api/nope', { json: {} }, 404],
      ['wrong method on stats', API.stats, { method: 'PUT', json: {} }, 404],
      ['wrong method on config', API.config, { method: 'DELETE' }, 404],
    ];
    const failures: string[] = [];
    for (const [name, p, req, status] of cases) {
      const res = await api(base, p, req);
      const body = res.json as Partial<ApiErrorDto> | undefined;
      const ok =
        res.status === status &&
        (res.headers.get('content-type') ?? '').startsWith('application/json') &&
        typeof body?.error === 'string' &&
        typeof body.message === 'string' &&
        body.message.length > 0;
      if (!ok) failures.push(`${name}: ${req?.method ?? (req?.json !== undefined || req?.raw !== undefined ? 'POST' : 'GET')} ${p.slice(0, 80)} -> ${res.status} ${res.text.slice(0, 160)} (want ${status} JSON)`);
    }
    expect(failures).toEqual([]);

    // Nothing was created or changed, and both front doors still answer.
    const after = await tcpStats(c);
    expect(after.get('total-jobs')).toBe(before.get('total-jobs'));
    expect((await tcpStatsJob(c, jobId)).get('pri')).toBe('50');
    expect((await tcpPeek(c, jobId))!.toString()).toBe('victim');
    expect(expectOk<{ ok: boolean }>(await api(base, '/healthz')).ok).toBe(true);
    expect(srv.process.exitCode).toBeNull();
    // A 200-character name is fine.
    expectOk<JobDto>(await api(base, API.tubeJobs('t'.repeat(200)), { json: { body: 'x' } }), 201);
  });
});

describe('admin API limits with a small -z', () => {
  it('a body over the maximum job size gets 413 JSON; a huge request too', async () => {
    const s = await startExtra(['-z', '10']);
    const ok = expectOk<JobDto>(await api(s.url, API.tubeJobs('small'), { json: { body: '0123456789' } }), 201);
    expect(ok.bodyBytes).toBe(10);
    const e = expectError(await api(s.url, API.tubeJobs('small'), { json: { body: '01234567890' } }), 413, 'JOB_TOO_BIG');
    expect(e.message).toMatch(/10/);
    expectError(await api(s.url, API.tubeJobs('small'), { json: { body: 'é'.repeat(6) } }), 413);
    expectError(await api(s.url, API.tubeJobs('small'), { json: { body: Buffer.alloc(11).toString('base64'), encoding: 'base64' } }), 413);
    // Far over the request size limit: the JSON parser refuses it, still as JSON.
    expectError(await api(s.url, API.tubeJobs('small'), { json: { body: 'z'.repeat(2_000_000) } }), 413);
    expectError(await api(s.url, API.job(ok.id), { method: 'PATCH', json: { body: 'z'.repeat(11) } }), 413);
    const c = await tcp(s);
    expect(await c.call('stats-tube small\r\n')).toMatch(/^OK /);
    expect(yamlMap(await c.call('stats-tube small\r\n')).get('total-jobs')).toBe('1');
    expect((await tcpPeek(c, ok.id))!.toString()).toBe('0123456789');
  });
});

/** Connects a typed socket.io client; resolves with the snapshot, or rejects with the connect error. */
function connectSocket(
  url: string,
  token?: string,
  headers?: Record<string, string>,
): Promise<{ socket: Socket<ServerToClientEvents, ClientToServerEvents>; snapshot: SnapshotDto }> {
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(url, {
    auth: token === undefined ? {} : { token },
    transports: ['websocket'],
    reconnection: false,
    timeout: 5000,
    extraHeaders: headers,
  });
  sockets.push(socket);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no snapshot within 5 s')), 5000);
    socket.once('snapshot', (snapshot) => {
      clearTimeout(timer);
      resolve({ socket, snapshot });
    });
    socket.once('connect_error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

describe('admin security', () => {
  it('--admin-token: the API, /metrics and socket.io need the bearer token; /api/config says so', async () => {
    const token = 'tok-3f9a';
    const s = await startExtra(['--admin-token', token]);
    const config = expectOk<AdminConfigDto>(await api(s.url, API.config));
    expect(config.tokenRequired).toBe(true);
    expect(config.readOnly).toBe(false);
    expect(expectOk<{ ok: boolean }>(await api(s.url, '/healthz')).ok).toBe(true);

    for (const p of [API.stats, API.tubes, API.connections, API.job(1), `${API.tubeJobs('default')}?state=ready`]) {
      expectError(await api(s.url, p), 401, 'UNAUTHORIZED');
      expectError(await api(s.url, p, { token: 'wrong' }), 401, 'UNAUTHORIZED');
      expectError(await api(s.url, p, { token: `${token}x` }), 401, 'UNAUTHORIZED');
      expectError(await api(s.url, p, { headers: { authorization: token } }), 401, 'UNAUTHORIZED');
    }
    expectError(await api(s.url, API.tubeJobs('t'), { json: { body: 'x' } }), 401, 'UNAUTHORIZED');
    expectError(await api(s.url, '/api/nope'), 401);
    expect((await api(s.url, '/metrics')).status).toBe(401);
    expect((await api(s.url, '/metrics', { token: 'wrong' })).status).toBe(401);

    expect(typeof expectOk<ServerStatsDto>(await api(s.url, API.stats, { token }))['cmd-put']).toBe('number');
    expect((await api(s.url, '/metrics', { token })).status).toBe(200);
    const put = expectOk<JobDto>(await api(s.url, API.tubeJobs('t'), { json: { body: 'x' }, token }), 201);
    expect(expectOk<JobDto>(await api(s.url, API.job(put.id), { token })).id).toBe(put.id);

    await expect(connectSocket(s.url)).rejects.toThrow(/unauthorized/);
    await expect(connectSocket(s.url, 'wrong')).rejects.toThrow(/unauthorized/);
    const { snapshot } = await connectSocket(s.url, token);
    expect(snapshot.config.tokenRequired).toBe(true);
    expect(snapshot.tubes.map((t) => t.name)).toContain('t');
  });

  it('--admin-listen 0.0.0.0 without a token exits with status 5', async () => {
    const port = await freePort();
    const env = { ...process.env };
    delete env.BEANPOLE_ADMIN_TOKEN;
    const child = spawn(process.execPath, [BEANPOLE_BIN, '-l', '127.0.0.1', '-p', String(port), '--no-gearman', '--admin-listen', '0.0.0.0', '--admin-port', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
    let err = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    expect(code, err).toBe(5);
    expect(err).toMatch(/--admin-token/);
  });

  it('--admin-read-only: every change is refused with 403, reads work', async () => {
    const s = await startExtra(['--admin-read-only']);
    const c = await tcp(s);
    await expectLine(c, 'use ro', 'USING ro');
    await expectLine(c, 'watch ro', 'WATCHING 2');
    const buried = await tcpPut(c, 'b');
    expect((await tcpReserve(c)).id).toBe(buried);
    await expectLine(c, `bury ${buried} 0`, 'BURIED');
    const id = await tcpPut(c, 'r', 10);
    const before = await tcpStats(c);

    expect(expectOk<AdminConfigDto>(await api(s.url, API.config)).readOnly).toBe(true);
    const reads = [API.stats, API.tubes, API.tube('ro'), `${API.tubeJobs('ro')}?state=ready`, API.job(id), API.connections, '/metrics', '/healthz'];
    for (const p of reads) expect((await api(s.url, p)).status, p).toBe(200);
    expect((await apiBytes(s.url, API.jobBody(id))).bytes.toString()).toBe('r');

    const changes: [string, Parameters<typeof api>[2]][] = [
      [API.tubeJobs('ro'), { json: { body: 'x' } }],
      [API.tubeJobs('ro-new'), { json: { body: 'x' } }],
      [API.job(id), { method: 'DELETE' }],
      [API.job(id), { method: 'PATCH', json: { priority: 1 } }],
      [API.jobKick(buried), { method: 'POST' }],
      [API.tubeKick('ro'), { json: { bound: 10 } }],
      [API.tubePause('ro'), { json: { seconds: 10 } }],
      [`${API.tubeJobs('ro')}?state=ready`, { method: 'DELETE' }],
      [API.tubeMove('ro'), { json: { to: 'ro2', state: 'ready', limit: 10 } }],
    ];
    for (const [p, req] of changes) expectError(await api(s.url, p, req), 403, 'READ_ONLY');

    const after = await tcpStats(c);
    expect(cmdCounters(after)).toEqual({ ...cmdCounters(before), 'cmd-stats': Number(before.get('cmd-stats')) + 1 });
    expect((await tcpStatsJob(c, id)).get('pri')).toBe('10');
    expect((await tcpStatsJob(c, buried)).get('state')).toBe('buried');
    expect((await tcpStatsTube(c, 'ro')).get('pause')).toBe('0');
  });
});

describe('DNS rebinding: the Host header', () => {
  const REBIND = 'rebind.attacker.example';
  const hostOf = (s: AdminServerProcess, name: string): string => `${name}:${new URL(s.url).port}`;
  /** What a page on `name` (resolving to 127.0.0.1) would send: its own Host and Origin. */
  const page = (s: AdminServerProcess, name: string): Record<string, string> => ({ origin: `http://${hostOf(s, name)}`, 'sec-fetch-site': 'same-origin' });

  /** A raw HTTP/1.0 request without a Host header (not a browser). */
  async function withoutHost(s: AdminServerProcess, path: string): Promise<string> {
    const c = await RawClient.connect(Number(new URL(s.url).port));
    clients.push(c);
    return c.call(`GET ${path} HTTP/1.0\r\n\r\n`);
  }

  it('without a token, another name is refused everywhere: API, static files, /metrics, /healthz and socket.io', async () => {
    const s = await startExtra([]);
    const c = await tcp(s);
    const before = Number((await tcpStats(c)).get('total-jobs'));
    const host = hostOf(s, REBIND);

    const put = await apiWithHost(s.url, API.tubeJobs('x'), host, { json: { body: 'stolen' }, headers: page(s, REBIND) });
    expectError(put, 403, 'HOST_NOT_ALLOWED');
    expect(Number((await tcpStats(c)).get('total-jobs'))).toBe(before);
    await expectLine(c, 'stats-tube x', 'NOT_FOUND');
    expectError(await apiWithHost(s.url, API.stats, host), 403, 'HOST_NOT_ALLOWED');
    expectError(await apiWithHost(s.url, API.job(1), host, { method: 'DELETE', headers: page(s, REBIND) }), 403, 'HOST_NOT_ALLOWED');
    for (const p of ['/', '/tubes/default', API.config, '/metrics', '/healthz', '/favicon.ico']) {
      expectError(await apiWithHost(s.url, p, host), 403, 'HOST_NOT_ALLOWED');
    }
    const index = await apiWithHost(s.url, '/', host);
    expect(index.text).not.toContain('<script');
    await expect(connectSocket(s.url, undefined, { host, origin: `http://${host}` })).rejects.toThrow();
    await expect(connectSocket(s.url, undefined, { host })).rejects.toThrow();

    // Names that are not this server's, and Host values that cannot be read.
    for (const bad of [REBIND, 'REBIND.attacker.example', 'localhost.attacker.example', '127.0.0.1.nip.io:80', 'evil', '', ' ', '[::1', '::1', '[::g]:80', '127.0.0.1:99999', '127.0.0.1:', 'a b', 'user@127.0.0.1', '127.0.0.1/x']) {
      expectError(await apiWithHost(s.url, API.stats, bad), 403, 'HOST_NOT_ALLOWED');
    }
    // Its own names, with or without port, in any case.
    for (const good of [hostOf(s, '127.0.0.1'), hostOf(s, 'localhost'), hostOf(s, 'LocalHost'), hostOf(s, '[::1]'), '127.0.0.1', 'localhost', '[::1]']) {
      expect((await apiWithHost(s.url, API.stats, good)).status, good).toBe(200);
    }
    expectOk<JobDto>(await apiWithHost(s.url, API.tubeJobs('x'), hostOf(s, 'localhost'), { json: { body: 'mine' }, headers: page(s, 'localhost') }), 201);
    await connectSocket(s.url, undefined, { host: hostOf(s, 'localhost'), origin: `http://${hostOf(s, 'localhost')}` });
    // No Host at all: not a browser, so it may pass.
    expect(await withoutHost(s, '/healthz')).toMatch(/^HTTP\/1\.[01] 200 /);
  });

  it('--admin-allowed-hosts: the listed names are answered (case-insensitively, any port), others still refused', async () => {
    const s = await startExtra(['--admin-allowed-hosts', `${REBIND},Dash.Example:9999`]);
    const c = await tcp(s);
    const host = hostOf(s, REBIND);
    const put = expectOk<JobDto>(await apiWithHost(s.url, API.tubeJobs('x'), host, { json: { body: 'allowed' }, headers: page(s, REBIND) }), 201);
    expect((await tcpPeek(c, put.id))!.toString()).toBe('allowed');
    expect((await apiWithHost(s.url, API.stats, host)).status).toBe(200);
    expect((await apiWithHost(s.url, API.stats, 'REBIND.Attacker.EXAMPLE')).status).toBe(200);
    expect((await apiWithHost(s.url, API.stats, 'dash.example:80')).status).toBe(200);
    const index = await apiWithHost(s.url, '/', host);
    expect(index.status).toBe(200);
    expect(index.text).toContain('<script');
    const { snapshot } = await connectSocket(s.url, undefined, { host, origin: `http://${host}` });
    expect(snapshot.tubes.map((t) => t.name)).toContain('x');
    expectError(await apiWithHost(s.url, API.stats, hostOf(s, 'other.example')), 403, 'HOST_NOT_ALLOWED');
    await expect(connectSocket(s.url, undefined, { host: hostOf(s, 'other.example') })).rejects.toThrow();
  });

  it('with --admin-token the token is the defence: any Host name works with the bearer, none without it', async () => {
    const token = 'tok-rebind';
    const s = await startExtra(['--admin-token', token]);
    const c = await tcp(s);
    const host = hostOf(s, 'dashboard.ops.example');
    const put = expectOk<JobDto>(await apiWithHost(s.url, API.tubeJobs('x'), host, { json: { body: 'remote' }, headers: page(s, 'dashboard.ops.example'), token }), 201);
    expect((await tcpPeek(c, put.id))!.toString()).toBe('remote');
    expect((await apiWithHost(s.url, API.stats, hostOf(s, REBIND), { token })).status).toBe(200);
    expect((await apiWithHost(s.url, '/metrics', host, { token })).status).toBe(200);
    expect((await apiWithHost(s.url, '/', host)).status).toBe(200);
    expectError(await apiWithHost(s.url, API.stats, hostOf(s, REBIND)), 401, 'UNAUTHORIZED');
    expectError(await apiWithHost(s.url, API.tubeJobs('x'), hostOf(s, REBIND), { json: { body: 'x' }, headers: page(s, REBIND) }), 401, 'UNAUTHORIZED');
    await connectSocket(s.url, token, { host, origin: `http://${host}` });
    await expect(connectSocket(s.url, undefined, { host, origin: `http://${host}` })).rejects.toThrow(/unauthorized/);
  });
});

describe('admin changes are durable with -b', () => {
  it('a put, an edit and a delete survive SIGKILL and a restart', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-admin-'));
    dirs.push(dir);
    const s1 = await startExtra(['-b', dir]);
    expect(expectOk<AdminConfigDto>(await api(s1.url, API.config)).binlog).toBe(true);
    const bin = Buffer.from([0, 1, 2, 250, 251, 255]);
    const kept = expectOk<JobDto>(await api(s1.url, API.tubeJobs('dur'), { json: { body: bin.toString('base64'), encoding: 'base64', priority: 12 } }), 201);
    const edited = expectOk<JobDto>(await api(s1.url, API.tubeJobs('dur'), { json: { body: 'before', priority: 1 } }), 201);
    const gone = expectOk<JobDto>(await api(s1.url, API.tubeJobs('dur'), { json: { body: 'delete me', priority: 100 } }), 201);
    const delayed = expectOk<JobDto>(await api(s1.url, API.tubeJobs('dur'), { json: { body: 'later', delaySeconds: 3600 } }), 201);
    const c = await tcp(s1);
    await expectLine(c, 'watch dur', 'WATCHING 2');
    await expectLine(c, 'ignore default', 'WATCHING 1');
    const r = await tcpReserve(c);
    expect(r.id).toBe(edited.id);
    await expectLine(c, `bury ${r.id} 1`, 'BURIED');
    expectOk<JobDto>(await api(s1.url, API.job(edited.id), { method: 'PATCH', json: { body: 'after ✓', priority: 7, ttrSeconds: 33, tube: 'dur-moved' } }));
    expect((await api(s1.url, API.job(gone.id), { method: 'DELETE' })).status).toBe(204);
    // Killed right after the last reply: nothing more gets a chance to be written.
    s1.signal('SIGKILL');
    if (s1.process.exitCode === null && s1.process.signalCode === null) await once(s1.process, 'exit');

    const s2 = await startExtra(['-b', dir]);
    const k = expectOk<JobDto>(await api(s2.url, API.job(kept.id)));
    expect(k.body).toEqual({ encoding: 'base64', base64: bin.toString('base64'), bytes: bin.length, truncated: false });
    expect(k).toMatchObject({ tube: 'dur', state: 'ready', priority: 12 });
    const e = expectOk<JobDto>(await api(s2.url, API.job(edited.id)));
    expect(e).toMatchObject({ tube: 'dur-moved', state: 'buried', priority: 7, ttrSeconds: 33, buries: 1, reserves: 1 });
    expect(e.body).toMatchObject({ encoding: 'utf8', text: 'after ✓' });
    expectError(await api(s2.url, API.job(gone.id)), 404, 'NOT_FOUND');
    expect(expectOk<JobDto>(await api(s2.url, API.job(delayed.id))).state).toBe('delayed');
    // Ids continue after the recovered ones.
    const next = expectOk<JobDto>(await api(s2.url, API.tubeJobs('dur'), { json: { body: 'new' } }), 201);
    expect(next.id).toBeGreaterThan(delayed.id);
    const c2 = await tcp(s2);
    expect((await tcpPeek(c2, edited.id))!.toString()).toBe('after ✓');
  });
});
