/**
 * What a queued job costs on the V8 heap. The Job record is shaped so that every number in it is
 * a small integer V8 keeps inline (see Job): this checks the bytes, with the garbage collector
 * run before and after, for a fresh engine and for one that has already seen the values that
 * would otherwise give every later job boxed numbers (a fractional clock, a default beanstalkd
 * priority of 2^31, a delay of months, a TTR of 2^32 seconds).
 */
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { systemClock } from './clock.js';
import { Engine } from './engine.js';
import { Harness, RecordingDelegate } from './testing.js';
import { jobImage } from '../persistence/testing.js';
import type { Job } from './records.js';
import { jobPriority, jobDelayMs, jobTtrMs, jobCreatedAt, jobDeadlineAt, setJobDeadlineAt, countersShared } from './records.js';

v8.setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

const JOBS = 100_000;
/**
 * Heap bytes per ready job with an empty body, index entries included: about 152 on Node 20 (a
 * 144-byte Job and an 8-byte index slot), so one boxed number more (16) breaks it. Before the
 * record was packed it was 200 on a fresh engine and 232 on a used one.
 */
const BUDGET = 166;

function heapUsed(): number {
  collect();
  collect();
  return v8.getHeapStatistics().used_heap_size;
}

/** Heap bytes per job for JOBS ready jobs of `priority` put into `engine`. */
function bytesPerJob(engine: Engine, priority: number): number {
  const tube = engine.findOrCreateTube('measured');
  const body = Buffer.alloc(0);
  const before = heapUsed();
  for (let i = 0; i < JOBS; i++) engine.put({ tube, priority, delayMs: 0, ttrMs: 120_000, body });
  const after = heapUsed();
  expect(engine.jobTotal).toBeGreaterThanOrEqual(JOBS);

  return (after - before) / JOBS;
}

describe('the heap cost of a queued job', () => {
  it('stays within budget on a fresh engine', () => {
    const engine = new Engine({ clock: systemClock });
    expect(bytesPerJob(engine, 0)).toBeLessThan(BUDGET);
  });

  it('stays within budget after reserves, long delays, huge TTRs and priorities of 2^31', () => {
    const engine = new Engine({ clock: systemClock });
    const tube = engine.findOrCreateTube('default');
    const body = Buffer.from('x');
    engine.put({ tube, priority: 2 ** 32 - 1, delayMs: 60 * 86_400_000, ttrMs: 2 ** 32 * 1000, body });
    engine.put({ tube, priority: 0, delayMs: 1.5, ttrMs: 120_000, body });
    engine.put({ tube, priority: 5, delayMs: 0, ttrMs: 1_000, body });
    const session = engine.openSession(new RecordingDelegate());
    expect(engine.reserve(session, 0).kind).toBe('reserved');
    expect(bytesPerJob(engine, 2 ** 31)).toBeLessThan(BUDGET);
  });
});

describe('values too large for a job\'s small fields', () => {
  it('come back exactly, from any clock', () => {
    const base = new Engine({ clock: systemClock }).now();
    for (const now of [base, 1_700_000_000_000.25, base + 40 * 86_400_000]) {
      const engine = new Engine({ clock: { now: () => now } });
      const tube = engine.findOrCreateTube('default');
      const body = Buffer.from('x');
      const cases = [
        { priority: 2 ** 32 - 1, delayMs: 60 * 86_400_000, ttrMs: (2 ** 32 - 1) * 1000 },
        { priority: 2 ** 31, delayMs: 1.5, ttrMs: 1_000 },
        { priority: 0, delayMs: 2 ** 30, ttrMs: 2 ** 30 - 1 },
      ];
      for (const c of cases) {
        const job = engine.put({ tube, ...c, body });
        expect(job.ok).toBe(true);
        if (!job.ok) continue;
        const j = job.value;
        expect([jobPriority(j), jobDelayMs(j), jobTtrMs(j), jobCreatedAt(j)]).toEqual([c.priority, c.delayMs, c.ttrMs, Math.floor(now)]);
        expect(jobDeadlineAt(j)).toBe(Math.floor(now + c.delayMs));
        setJobDeadlineAt(j, 0);
        expect(jobDeadlineAt(j)).toBe(0);
        setJobDeadlineAt(j, now + 2 ** 40);
        expect(jobDeadlineAt(j)).toBe(Math.floor(now + 2 ** 40));
      }
    }
  });
});

describe('the time base', () => {
  const DAY = 86_400_000;
  const times = (jobs: Job[]): number[][] => jobs.map((j) => [jobCreatedAt(j), jobDeadlineAt(j), jobDelayMs(j), jobTtrMs(j)]);

  it('moves with the clock, keeping every job\'s times, and new jobs\' times small', () => {
    const h = new Harness();
    const c = h.open();
    const jobs = [c.put(), c.put({ delayMs: 10 * DAY }), c.put({ ttrMs: 10 * DAY })];
    expect(c.reserveNow()).toBe(jobs[0]!.id);
    h.clock.advance(0.25);
    const before = times(jobs);
    expect(jobs.every((j) => countersShared(j))).toBe(true);

    // A week later: the next put moves the base; the week-old jobs still fit.
    h.clock.advance(7 * DAY);
    jobs.push(c.put());
    expect(times(jobs.slice(0, 3))).toEqual(before);
    expect(jobs.every((j) => countersShared(j))).toBe(true);
    expect(h.problems(100)).toEqual([]);

    // Three weeks later the base has moved again. Nothing ran in between, so the reserved and
    // delayed jobs' deadlines are now weeks past: they no longer fit inline, and keep their value.
    h.clock.advance(20 * DAY);
    const fresh = c.put();
    expect(times(jobs.slice(0, 3))).toEqual(before);
    expect([jobs[0], jobs[1], jobs[2], jobs[3]].map((j) => countersShared(j!))).toEqual([false, false, true, true]);
    expect(countersShared(fresh)).toBe(true);
    expect(jobCreatedAt(fresh)).toBe(Math.floor(h.now()));
    expect(h.problems(100)).toEqual([]);
  });
});

describe('times far from the time base', () => {
  const YEAR = 365 * 86_400_000;

  it('are kept: a creation time to the second beyond 6 days, any time beyond reach in the counters object', () => {
    const h = new Harness();
    const now = h.now();
    const restored = (id: number, createdAt: number): Job => {
      h.engine.restoreJob(jobImage({ id, createdAt, body: Buffer.from('x') }), 0);
      return h.engine.job(id)!;
    };
    // To the second beyond 6 days, never later than it was.
    for (const [id, t] of [[10, now - 7 * 86_400_000 - 1_234.5], [11, now - YEAR - 0.5], [13, now + 7 * 86_400_000 + 0.5]] as const) {
      const job = restored(id, t);
      expect(jobCreatedAt(job)).toBeLessThanOrEqual(t);
      expect(jobCreatedAt(job)).toBeGreaterThan(t - 1_000);
      expect(countersShared(job)).toBe(true);
    }
    const ancient = restored(12, now - 30 * YEAR - 0.5);
    expect(jobCreatedAt(ancient)).toBe(now - 30 * YEAR - 1);
    expect(countersShared(ancient)).toBe(false);
    h.engine.finishRestore(100);

    const c = h.open();
    const longDelay = c.put({ delayMs: 9 * 86_400_000 + 1_500 });
    expect(jobDeadlineAt(longDelay)).toBe(now + 9 * 86_400_000 + 1_500);
    expect(countersShared(longDelay)).toBe(true);
    const monthDelay = c.put({ delayMs: 30 * 86_400_000 + 1_500 });
    expect(jobDeadlineAt(monthDelay)).toBe(now + 30 * 86_400_000 + 1_500);
    const maxDelay = c.put({ delayMs: (2 ** 32 - 1) * 1000 });
    expect(jobDeadlineAt(maxDelay)).toBe(now + (2 ** 32 - 1) * 1000);
    expect(jobDelayMs(maxDelay)).toBe((2 ** 32 - 1) * 1000);
    expect(h.problems(1000)).toEqual([]);
  });
});

describe('special deadlines', () => {
  it('a job held for ever (a Gearman worker\'s) keeps an infinite deadline inline', () => {
    const h = new Harness();
    const c = h.open();
    const job = c.put();
    h.engine.setHold(c.session, Number.POSITIVE_INFINITY);
    expect(c.reserveNow()).toBe(job.id);
    expect(jobDeadlineAt(job)).toBe(Number.POSITIVE_INFINITY);
    expect(countersShared(job)).toBe(true);
    expect(h.problems(100)).toEqual([]);
  });

  it('a deadline that lands on the new time base keeps its value and its place', () => {
    const h = new Harness(); // T0 is a whole second, so the base can land on a deadline
    const c = h.open();
    const at = h.now() + 7 * 86_400_000;
    const onBase = c.put({ delayMs: 7 * 86_400_000 });
    const before = c.put({ delayMs: 7 * 86_400_000 - 1 });
    h.clock.set(at); // no tick: both are due, neither has moved yet
    c.put();
    expect([jobDeadlineAt(onBase), jobDeadlineAt(before)]).toEqual([at, at - 1]);
    expect(h.engine.peekDelayed(onBase.tube)).toBe(before);
    expect(h.problems(100)).toEqual([]);
  });
});
