/**
 * Schedules on a fake clock: each slot fires once, slots missed while down are skipped or caught
 * up once, pausing and run-now, time zones across a DST change, failed puts, and a restart from
 * the saved state that does not fire a slot twice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewJob, Result } from '../operations/operations.js';
import { parseCron } from './cron.js';
import { MemoryScheduleStore, type SchedulesState } from './memory-schedule-store.js';
import type { ScheduleFields } from './schedule.js';
import { loadSchedules, saveSchedules } from './schedule-file.js';
import { ScheduleService } from './schedule-service.js';

const at = (iso: string): number => Date.parse(iso);

function fields(change: Partial<ScheduleFields> = {}): ScheduleFields {
  return {
    name: 'report',
    cron: '*/10 * * * * *',
    timeZone: 'UTC',
    tube: 'reports',
    body: Buffer.from('make the report'),
    encoding: 'utf8',
    priority: 10,
    delayMs: 0,
    ttrMs: 30_000,
    paused: false,
    missed: 'skip',
    ...change,
  };
}

/** A put that records what it was given and answers ids 1, 2, 3... (or fails with `failWith`). */
function recordingPut(failWith: Result<never> | null = null) {
  const puts: { tube: string; job: NewJob }[] = [];
  const put = async (tube: string, job: NewJob): Promise<Result<{ id: number }>> => {
    if (failWith !== null) return failWith;
    puts.push({ tube, job });
    return { ok: true, value: { id: puts.length } };
  };
  return { puts, put };
}

function service(store = new MemoryScheduleStore(), failWith: Result<never> | null = null) {
  const recorder = recordingPut(failWith);
  return { store, ...recorder, schedules: new ScheduleService({ store, put: recorder.put, node: 0 }) };
}

async function created(s: ScheduleService, f: ScheduleFields, now: number) {
  const r = await s.create(f, now);
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

describe('schedules on a fake clock', () => {
  it('fires each slot once, with the schedule job fields, and only when its time has come', async () => {
    const { schedules, puts, store } = service();
    const s = await created(schedules, fields(), at('2026-01-01T00:00:03Z'));
    await schedules.tick(at('2026-01-01T00:00:09.999Z'));
    expect(puts).toHaveLength(0);
    await schedules.tick(at('2026-01-01T00:00:10Z'));
    await schedules.tick(at('2026-01-01T00:00:10.5Z'));
    expect(puts).toEqual([{ tube: 'reports', job: { priority: 10, delayMs: 0, ttrMs: 30_000, body: Buffer.from('make the report') } }]);
    await schedules.tick(at('2026-01-01T00:00:25Z'));
    expect(puts).toHaveLength(2);
    const runs = await store.runs(s.id);
    expect(runs.map((r) => [new Date(r.slotAt).toISOString(), r.kind, r.jobId])).toEqual([
      ['2026-01-01T00:00:20.000Z', 'slot', 2],
      ['2026-01-01T00:00:10.000Z', 'slot', 1],
    ]);
  });

  it('skips slots missed while down by default, and fires the on-time one', async () => {
    const { schedules, puts, store } = service();
    const s = await created(schedules, fields({ cron: '* * * * *' }), at('2026-01-01T00:00:30Z'));
    // Down for an hour: 60 slots passed; the last one (01:00) is less than a minute late.
    await schedules.tick(at('2026-01-01T01:00:30Z'));
    expect(puts).toHaveLength(1);
    expect((await store.runs(s.id)).map((r) => [new Date(r.slotAt).toISOString(), r.kind])).toEqual([['2026-01-01T01:00:00.000Z', 'slot']]);
  });

  it('catches up once with catch-up-once: one job for all the missed slots, then on time again', async () => {
    const { schedules, puts, store } = service();
    const s = await created(schedules, fields({ cron: '* * * * *', missed: 'catch-up-once' }), at('2026-01-01T00:00:30Z'));
    await schedules.tick(at('2026-01-01T01:00:30Z'));
    expect(puts).toHaveLength(2);
    const runs = await store.runs(s.id);
    expect(runs.map((r) => [new Date(r.slotAt).toISOString(), r.kind]).sort()).toEqual([
      ['2026-01-01T00:59:00.000Z', 'catch-up'],
      ['2026-01-01T01:00:00.000Z', 'slot'],
    ]);
    await schedules.tick(at('2026-01-01T01:00:45Z'));
    expect(puts).toHaveLength(2);
    await schedules.tick(at('2026-01-01T01:01:00Z'));
    expect(puts).toHaveLength(3);
  });

  it('does not fire while paused, does not count paused slots as missed, and runs now when asked', async () => {
    const { schedules, puts, store } = service();
    const s = await created(schedules, fields({ paused: true, missed: 'catch-up-once' }), at('2026-01-01T00:00:00Z'));
    await schedules.tick(at('2026-01-01T00:05:00Z'));
    expect(puts).toHaveLength(0);
    expect(schedules.nextRuns(s, at('2026-01-01T00:05:00Z'))).toEqual([]);
    const run = await schedules.runNow(s.id, at('2026-01-01T00:05:01Z'));
    expect(run).toMatchObject({ kind: 'run-now', jobId: 1, error: null });
    // Resumed at 00:10:00: nothing for the 60 slots while paused, then on time.
    await schedules.update(s.id, fields({ paused: false, missed: 'catch-up-once' }), at('2026-01-01T00:10:00Z'));
    await schedules.tick(at('2026-01-01T00:10:01Z'));
    expect(puts).toHaveLength(1);
    await schedules.tick(at('2026-01-01T00:10:10Z'));
    expect(puts).toHaveLength(2);
    expect((await store.runs(s.id)).map((r) => r.kind)).toEqual(['slot', 'run-now']);
    expect(await schedules.runNow(99, at('2026-01-01T00:10:11Z'))).toBeUndefined();
  });

  it('reads the expression in its time zone, across a DST change, as croner does', async () => {
    const { schedules } = service();
    const s = await created(schedules, fields({ cron: '30 2 * * *', timeZone: 'Europe/Berlin' }), at('2026-03-27T12:00:00Z'));
    // 02:30 does not exist on 29 March (clocks go 02:00 -> 03:00): that day's run is at 03:00 CEST.
    expect(schedules.nextRuns(s, at('2026-03-27T12:00:00Z'), 3).map((t) => new Date(t).toISOString())).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    // 02:30 happens twice on 25 October: one run.
    const autumn = schedules.nextRuns(s, at('2026-10-24T12:00:00Z'), 3).map((t) => new Date(t).toISOString());
    expect(autumn).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z', '2026-10-27T01:30:00.000Z']);
  });

  it('refuses an expression or a zone it does not understand, saying what is wrong', async () => {
    const { schedules } = service();
    expect(await schedules.create(fields({ cron: '61 * * * *' }), 0)).toEqual({ ok: false, message: expect.stringMatching(/^cron: .*minute/) });
    expect(await schedules.create(fields({ timeZone: 'Mars/Olympus' }), 0)).toEqual({ ok: false, message: 'cron: unknown time zone: Mars/Olympus' });
    expect(await schedules.create(fields({ cron: '* * * * * * *' }), 0)).toMatchObject({ ok: false });
    expect(parseCron('0 9 * * 1-5', 'America/New_York').ok).toBe(true);
  });

  it('records a failed put in the run, and counts it', async () => {
    const { schedules, store } = service(new MemoryScheduleStore(), { ok: false, code: 'JOB_TOO_BIG' });
    const s = await created(schedules, fields(), at('2026-01-01T00:00:05Z'));
    await schedules.tick(at('2026-01-01T00:00:10Z'));
    expect(await store.runs(s.id)).toMatchObject([{ jobId: null, error: 'JOB_TOO_BIG' }]);
    expect(schedules.fires()).toEqual({ fires: [{ id: s.id, schedule: 'report', kind: 'slot', count: 1 }], failures: 1 });
  });

  describe('saved in a directory (-b)', () => {
    const dirs: string[] = [];
    afterEach(() => {
      for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
    });

    it('comes back after a restart without firing a slot twice, bodies byte for byte', async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-schedules-'));
      dirs.push(dir);
      const save = (state: SchedulesState): void => saveSchedules(dir, state);
      const body = Buffer.from([0, 255, 10, 13, 32]);
      const first = service(new MemoryScheduleStore(null, save));
      const s = await created(first.schedules, fields({ body, encoding: 'base64' }), at('2026-01-01T00:00:05Z'));
      await first.schedules.tick(at('2026-01-01T00:00:10Z'));
      expect(first.puts).toHaveLength(1);
      // "Restart": a new store and service from the file, ticking at the same instant and later.
      const second = service(new MemoryScheduleStore(loadSchedules(dir), save));
      await second.schedules.tick(at('2026-01-01T00:00:10.5Z'));
      expect(second.puts).toHaveLength(0);
      await second.schedules.tick(at('2026-01-01T00:00:20Z'));
      expect(second.puts).toHaveLength(1);
      expect(second.puts[0]!.job.body).toEqual(body);
      expect((await second.store.runs(s.id)).map((r) => r.jobId)).toEqual([1, 1]);
      const next = await second.schedules.create(fields({ name: 'second' }), at('2026-01-01T00:00:21Z'));
      expect(next.ok && next.value.id).toBe(s.id + 1);
    });

    it('says so when the file is not one it reads', async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-schedules-'));
      dirs.push(dir);
      saveSchedules(dir, { nextId: 1, schedules: [], runs: [] });
      expect(loadSchedules(dir)).toEqual({ nextId: 1, schedules: [], runs: [] });
      const { writeFileSync } = await import('node:fs');
      writeFileSync(path.join(dir, 'schedules.json'), '{"version": 99}');
      expect(() => loadSchedules(dir)).toThrow(/schedules\.json: not a schedules file/);
    });
  });
});
