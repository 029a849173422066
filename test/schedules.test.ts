/**
 * Schedules on a real server: the API creates, edits, pauses and runs them now; a slot puts a
 * real job that a real client (jackd) reserves, with the schedule's priority and TTR; with -b a
 * schedule and its runs survive a restart and go on firing; bad input gets a clear 4xx.
 * (--automation-tick 50 and 6-field expressions keep the waits to a second or two.)
 */
import { createRequire } from 'node:module';
import type { JackdClient } from 'jackd';
import { describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { ScheduleDto, ScheduleRunDto } from '../shared/dto.js';
import { adminFixture } from './support/admin-fixture.js';
import { api, type AdminServerProcess } from './support/admin-server.js';

const require = createRequire(import.meta.url);
const Jackd = require('jackd') as typeof import('jackd').JackdClient;
const fixture = adminFixture();
const TICK = ['--automation-tick', '50', '--no-gearman'];

const clients: JackdClient[] = [];
async function worker(server: AdminServerProcess, tube: string): Promise<JackdClient> {
  const client = new Jackd();
  await client.connect({ host: '127.0.0.1', port: server.port });
  clients.push(client);
  await client.watch(tube);
  await client.ignore('default');
  return client;
}

function payload(job: { payload: string | Uint8Array }): string {
  return typeof job.payload === 'string' ? job.payload : Buffer.from(job.payload).toString('utf8');
}

const schedule = (over: Record<string, unknown> = {}) => ({
  name: 'nightly report',
  cron: '* * * * * *',
  timeZone: 'Europe/Berlin',
  tube: 'reports',
  body: '{"report":"daily"}',
  priority: 42,
  ttrSeconds: 90,
  ...over,
});

async function create(server: AdminServerProcess, over: Record<string, unknown> = {}): Promise<ScheduleDto> {
  const r = await api(server.url, API.schedules, { json: schedule(over) });
  expect(r.status, r.text).toBe(201);
  return r.json as ScheduleDto;
}

/** Polls GET /api/schedules/:id until `done` (at most 5 s). */
async function waitFor(server: AdminServerProcess, id: number, done: (s: ScheduleDto) => boolean): Promise<ScheduleDto> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const s = (await api(server.url, API.schedule(id))).json as ScheduleDto;
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`schedule ${id} never got there: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('schedules through the API', () => {
  it('a slot puts a real job that a real client reserves, with the schedule job fields', async () => {
    const server = await fixture.start(TICK);
    const client = await worker(server, 'reports');
    try {
      const created = await create(server);
      expect(created).toMatchObject({ name: 'nightly report', paused: false, missed: 'skip', delaySeconds: 0, ttrSeconds: 90, lastRuns: [] });
      expect(created.nextRuns).toHaveLength(5);
      const job = await client.reserveWithTimeout(5);
      expect(payload(job)).toBe('{"report":"daily"}');
      const stats = String(await client.statsJob(job.id));
      expect(stats).toMatch(/^tube: reports$/m);
      expect(stats).toMatch(/^pri: 42$/m);
      expect(stats).toMatch(/^ttr: 90$/m);
      const seen = await waitFor(server, created.id, (s) => s.lastRuns.some((r) => r.jobId === Number(job.id)));
      const run = seen.lastRuns.find((r) => r.jobId === Number(job.id))!;
      expect(run).toMatchObject({ kind: 'slot', jobState: 'reserved', error: null, node: 0 });
      expect(run.slotAt % 1000).toBe(0);
      const metrics = await (await fetch(new URL('/metrics', server.url))).text();
      expect(metrics).toMatch(new RegExp(`^beanpole_schedule_fires_total\\{schedule_id="${created.id}",schedule="nightly report",kind="slot"\\} [1-9]`, 'm'));
    } finally {
      await Promise.all(clients.splice(0).map((c) => c.disconnect()));
    }
  });

  it('edits, pauses and runs now; a paused schedule puts nothing on its own', async () => {
    const server = await fixture.start(TICK);
    const created = await create(server, { cron: '0 0 1 1 *', paused: true });
    expect(created.nextRuns).toEqual([]);
    const edited = await api(server.url, API.schedule(created.id), { method: 'PATCH', json: { cron: '0 9 * * 1-5', body: 'weekday', missed: 'catch-up-once' } });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.json).toMatchObject({ cron: '0 9 * * 1-5', body: 'weekday', missed: 'catch-up-once', paused: true, priority: 42, timeZone: 'Europe/Berlin' });
    const resumed = (await api(server.url, API.schedule(created.id), { method: 'PATCH', json: { paused: false } })).json as ScheduleDto;
    expect(resumed.nextRuns).toHaveLength(5);
    // 09:00 in Berlin is 07:00 or 08:00 UTC, on a weekday.
    for (const t of resumed.nextRuns) {
      const d = new Date(t);
      expect([7, 8]).toContain(d.getUTCHours());
      expect([1, 2, 3, 4, 5]).toContain(new Date(t + 3600_000).getUTCDay());
    }
    await api(server.url, API.schedule(created.id), { method: 'PATCH', json: { paused: true } });
    const run = await api(server.url, API.scheduleRun(created.id), { method: 'POST' });
    expect(run.status, run.text).toBe(201);
    const r = run.json as ScheduleRunDto;
    expect(r).toMatchObject({ kind: 'run-now', jobState: 'ready', error: null });
    const job = await api(server.url, API.job(r.jobId!));
    expect(job.json).toMatchObject({ tube: 'reports', priority: 42, body: { text: 'weekday' } });
    const list = (await api(server.url, API.schedules)).json as ScheduleDto[];
    expect(list.map((s) => [s.id, s.paused, s.lastRuns.length])).toEqual([[created.id, true, 1]]);
    expect((await api(server.url, API.schedule(created.id), { method: 'DELETE' })).status).toBe(204);
    expect((await api(server.url, API.schedule(created.id))).status).toBe(404);
    expect((await api(server.url, API.scheduleRun(created.id), { method: 'POST' })).status).toBe(404);
  });

  it('previews an expression: its next runs, or what is wrong with it', async () => {
    const server = await fixture.start(TICK);
    const ok = await api(server.url, `${API.cronPreview}?cron=${encodeURIComponent('*/15 * * * *')}&timeZone=UTC`);
    expect(ok.json).toMatchObject({ ok: true });
    const runs = (ok.json as { nextRuns: number[] }).nextRuns;
    expect(runs.map((t) => t % (15 * 60_000))).toEqual([0, 0, 0, 0, 0]);
    const bad = await api(server.url, `${API.cronPreview}?cron=${encodeURIComponent('* 25 * * *')}`);
    expect(bad.json).toEqual({ ok: false, message: expect.stringMatching(/hour/) });
  });

  it('answers bad input with a 4xx that says what is wrong', async () => {
    const server = await fixture.start([...TICK, '-z', '32']);
    const post = (over: Record<string, unknown>) => api(server.url, API.schedules, { json: schedule(over) });
    const cases: [Record<string, unknown>, number, RegExp][] = [
      [{ cron: '61 * * * *' }, 400, /cron: .*minute/],
      [{ cron: '* * * * * * *' }, 400, /cron: /],
      [{ timeZone: 'Mars/Olympus' }, 400, /unknown time zone/],
      [{ tube: '-bad' }, 400, /tube: not a valid tube name/],
      [{ name: '' }, 400, /name/],
      [{ priority: -1 }, 400, /priority/],
      [{ ttrSeconds: 1.5 }, 400, /ttrSeconds/],
      [{ missed: 'sometimes' }, 400, /missed/],
      [{ surprise: true }, 400, /surprise|unrecognized/i],
      [{ body: 'x'.repeat(33) }, 413, /maximum job size/],
      [{ body: 'A', encoding: 'base64' }, 400, /base64/],
    ];
    for (const [over, status, message] of cases) {
      const r = await post(over);
      expect(r.status, `${JSON.stringify(over)}: ${r.text}`).toBe(status);
      expect((r.json as { message: string }).message, JSON.stringify(over)).toMatch(message);
    }
    expect((await api(server.url, API.schedules, { raw: '{"name": ' })).status).toBe(400);
    expect((await api(server.url, '/api/schedules/abc')).status).toBe(400);
    expect((await api(server.url, API.schedule(12345))).status).toBe(404);
    const s = await create(server, { paused: true });
    const r = await api(server.url, API.schedule(s.id), { method: 'PATCH', json: { cron: 'every day' } });
    expect(r.status).toBe(400);
    const lone = await api(server.url, API.schedule(s.id), { method: 'PATCH', json: { encoding: 'base64' } });
    expect(lone.status).toBe(400);
    expect((lone.json as { message: string }).message).toBe('encoding: give it with a body');
    expect((await api(server.url, API.schedules)).json).toHaveLength(1);
  });

  it('with -b, a schedule and its runs survive a restart and go on firing', async () => {
    const dir = fixture.tmpDir();
    const first = await fixture.start([...TICK, '-b', dir]);
    const created = await create(first);
    const fired = await waitFor(first, created.id, (s) => s.lastRuns.length >= 1 && s.lastRuns.every((r) => r.jobId !== null));
    await first.stop();
    const second = await fixture.start([...TICK, '-b', dir]);
    const client = await worker(second, 'reports');
    try {
      const back = (await api(second.url, API.schedule(created.id))).json as ScheduleDto;
      expect(back).toMatchObject({ name: 'nightly report', cron: '* * * * * *', timeZone: 'Europe/Berlin', priority: 42, ttrSeconds: 90 });
      // The jobs of the runs before the restart are still there (the binlog kept them).
      const firstJob = fired.lastRuns.at(-1)!.jobId!;
      expect(back.lastRuns.some((r) => r.jobId === firstJob && r.jobState === 'ready')).toBe(true);
      const after = await waitFor(second, created.id, (s) => s.lastRuns[0]!.slotAt > fired.lastRuns[0]!.slotAt && s.lastRuns[0]!.jobId !== null);
      expect(new Set(after.lastRuns.map((r) => r.slotAt)).size).toBe(after.lastRuns.length);
      const ids = new Set(after.lastRuns.map((r) => r.jobId));
      expect(ids.size).toBe(after.lastRuns.length);
      const job = await client.reserveWithTimeout(5);
      expect(payload(job)).toBe('{"report":"daily"}');
      // A new schedule does not reuse an id.
      expect((await create(second, { name: 'second' })).id).toBe(created.id + 1);
    } finally {
      await Promise.all(clients.splice(0).map((c) => c.disconnect()));
    }
  });
});
