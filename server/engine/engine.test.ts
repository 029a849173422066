/**
 * Engine unit tests: put, ready order, reserve, reserve-job, delete, release, bury, touch and
 * kick. Time-driven behaviour is in engine-time.test.ts, blocked reserves in
 * engine-waiters.test.ts, tube lifetime in engine-tubes.test.ts, counters and events in
 * engine-stats.test.ts.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { jobImage } from '../persistence/testing.js';
import { Harness, RecordingJournal, T0, type Client, fieldsOf } from './testing.js';
import { jobBody, jobState, jobDelayMs, jobDeadlineAt, jobCounters, jobPriority, countersShared } from './records.js';

let h: Harness;
let c: Client;

beforeEach(() => {
  h = new Harness();
  c = h.open();
});

function expectConsistent(maxId = 50): void {
  expect(h.problems(maxId)).toEqual([]);
}

describe('put', () => {
  it('numbers jobs from 1 across all tubes', () => {
    expect(c.put().id).toBe(1);
    c.use('other');
    expect(c.put().id).toBe(2);
    c.use('default');
    expect(c.put().id).toBe(3);
    expectConsistent();
  });

  it('makes a ready job with the given fields and fresh counters', () => {
    const job = c.put({ priority: 7, ttrMs: 5000, body: 'hello' });
    expect(fieldsOf(job)).toMatchObject({
      id: 1,
      state: 'ready',
      priority: 7,
      delayMs: 0,
      ttrMs: 5000,
      deadlineAt: 0,
      createdAt: T0,
      reserves: 0,
      timeouts: 0,
      releases: 0,
      buries: 0,
      kicks: 0,
    });
    expect(h.engine.holderOf(job)).toBeNull();
    expect(job.tube).toBe(h.engine.defaultTube);
    expect(jobBody(job).toString()).toBe('hello');
    expect(h.engine.job(1)).toBe(job);
    expect(h.engine.peekReady(h.engine.defaultTube)).toBe(job);
    expectConsistent();
  });

  it('makes a delayed job when delayMs > 0, due at now + delay', () => {
    const job = c.put({ delayMs: 3000 });
    expect(jobState(job)).toBe('delayed');
    expect(jobDelayMs(job)).toBe(3000);
    expect(jobDeadlineAt(job)).toBe(T0 + 3000);
    expect(h.engine.peekDelayed(h.engine.defaultTube)).toBe(job);
    expect(h.engine.peekReady(h.engine.defaultTube)).toBeUndefined();
    expectConsistent();
  });

  it('uses an id taken earlier with allocateJobId, and a failed put still uses up its id', () => {
    const taken = h.engine.allocateJobId();
    expect(taken).toBe(1);
    const lost = h.engine.allocateJobId(); // e.g. the body ended without CRLF
    expect(lost).toBe(2);
    const result = h.engine.put({ tube: c.session.used, priority: 0, delayMs: 0, ttrMs: 1000, body: Buffer.from('a'), id: taken });
    expect(result.ok && result.value.id).toBe(1);
    expect(c.put().id).toBe(3);
    expect(h.engine.job(2)).toBeUndefined();
  });

  it('keeps the body bytes it was given', () => {
    const body = Buffer.from([0, 13, 10, 255]);
    const job = c.put({ body });
    expect(jobBody(job).equals(Buffer.from([0, 13, 10, 255]))).toBe(true);
    expect(h.engine.bodyBytes).toBe(4);
  });
});

describe('ready order', () => {
  it('hands out jobs by priority, then by id (FIFO within a priority)', () => {
    for (const priority of [5, 1, 5, 0, 1, 4294967295, 0]) c.put({ priority });
    const order = Array.from({ length: 7 }, () => c.reserveNow());
    expect(order).toEqual([4, 7, 2, 5, 1, 3, 6]);
  });

  it('picks the smallest (priority, id) across all watched tubes (upstream multi_tube)', () => {
    c.use('abc');
    c.put({ priority: 999999 });
    c.use('def');
    c.put({ priority: 99 });
    expect(c.watch('abc')).toBe(2);
    expect(c.watch('def')).toBe(3);
    expect(c.reserveNow()).toBe(2);
    expect(c.reserveNow()).toBe(1);
  });

  it('orders equal priorities by id, not by tube or by watch order', () => {
    const w = h.open();
    w.watch('b');
    w.watch('a');
    for (const name of ['a', 'b', 'a', 'b', 'default']) {
      c.use(name);
      c.put({ priority: 10 });
    }
    expect(Array.from({ length: 5 }, () => w.reserveNow())).toEqual([1, 2, 3, 4, 5]);
  });

  it('only looks at watched tubes', () => {
    c.use('elsewhere');
    c.put();
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(jobState(h.engine.job(1)!)).toBe('ready');
  });

  it('skips paused tubes when choosing, even if they hold a better job', () => {
    c.use('paused');
    c.put({ priority: 0 });
    c.use('default');
    c.put({ priority: 100 });
    c.watch('paused');
    h.engine.pauseTube('paused', 10_000);
    expect(c.reserveNow()).toBe(2);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
  });

  it('peeks: ready by (priority, id), delayed by (deadline, id), buried oldest first', () => {
    const tube = h.engine.defaultTube;
    c.put({ priority: 3 }); // 1
    c.put({ priority: 2 }); // 2
    c.put({ delayMs: 99_000 }); // 3
    c.put({ delayMs: 1000 }); // 4
    c.put({ delayMs: 1000 }); // 5
    expect(h.engine.peekReady(tube)!.id).toBe(2);
    expect(h.engine.peekDelayed(tube)!.id).toBe(4);
    expect(h.engine.peekBuried(tube)).toBeUndefined();
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(h.engine.bury(c.session, 1, 0).ok).toBe(true);
    expect(h.engine.reserveJob(c.session, 2).ok).toBe(true);
    expect(h.engine.bury(c.session, 2, 0).ok).toBe(true);
    expect(h.engine.peekBuried(tube)!.id).toBe(1);
    expect(h.engine.peekReady(tube)).toBeUndefined();
    h.engine.delete(c.session, 4);
    expect(h.engine.peekDelayed(tube)!.id).toBe(5);
  });
});

describe('reserve', () => {
  it('reserves the job for the session with a TTR deadline and counts it', () => {
    c.put({ ttrMs: 7000 });
    h.advance(500);
    const outcome = c.reserve(null);
    expect(outcome.kind).toBe('reserved');
    const job = h.engine.job(1)!;
    expect(jobState(job)).toBe('reserved');
    expect(h.engine.holderOf(job)).toBe(c.session);
    expect(jobDeadlineAt(job)).toBe(T0 + 500 + 7000);
    expect(job.reserves).toBe(1);
    expect(c.reservedIds()).toEqual([1]);
    expect(h.engine.stats.reserved).toBe(1);
    expect(h.engine.defaultTube.reserved).toBe(1);
    expect(c.session.isWorker).toBe(true);
    expect(c.session.waiting).toBe(false);
    expectConsistent();
  });

  it('lets one session hold many jobs', () => {
    for (let i = 0; i < 5; i++) c.put();
    for (let i = 0; i < 5; i++) c.reserveNow();
    expect(c.reservedIds()).toEqual([1, 2, 3, 4, 5]);
    expectConsistent();
  });

  it('with timeout 0 and nothing ready: TIMED_OUT at once, without waiting', () => {
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(c.session.waiting).toBe(false);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.defaultTube.waiting.size).toBe(0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expect(c.session.isWorker).toBe(true);
  });

  it('with timeout 0 and a ready job: reserves it', () => {
    c.put();
    expect(c.reserve(0).kind).toBe('reserved');
  });

  it('does not hand out delayed or buried jobs', () => {
    c.put({ delayMs: 1000 });
    c.put();
    c.reserveNow();
    h.engine.bury(c.session, 2, 0);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
  });
});

describe('reserveJob', () => {
  it('reserves a ready job out of order (upstream reserve_job_ready)', () => {
    c.put();
    c.put();
    const r = h.engine.reserveJob(c.session, 2);
    expect(r.ok && r.value.id).toBe(2);
    expect(h.engine.reserveJob(c.session, 3)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.release(c.session, 1, 1, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.release(c.session, 2, 1, 0).ok).toBe(true);
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expectConsistent();
  });

  it('reserves a delayed job, taking it off the timer (upstream reserve_job_delayed)', () => {
    c.put({ delayMs: 5000, ttrMs: 2000 });
    c.put({ delayMs: 6000 });
    c.put({ delayMs: 7000 });
    const r = h.engine.reserveJob(c.session, 1);
    expect(r.ok).toBe(true);
    const job = h.engine.job(1)!;
    expect(jobState(job)).toBe('reserved');
    expect(jobDeadlineAt(job)).toBe(T0 + 2000);
    expect(h.engine.delayedCount).toBe(2);
    expect(h.engine.peekDelayed(h.engine.defaultTube)!.id).toBe(2);
    expect(h.engine.release(c.session, 1, 1, 0).ok).toBe(true);
    expect(jobState(job)).toBe('ready');
    expectConsistent();
  });

  it('reserves buried jobs (upstream reserve_job_buried)', () => {
    c.put();
    c.put();
    h.engine.reserveJob(c.session, 1);
    h.engine.bury(c.session, 1, 0);
    h.engine.reserveJob(c.session, 2);
    h.engine.bury(c.session, 2, 0);
    expect(h.engine.stats.buried).toBe(2);
    expect(h.engine.reserveJob(c.session, 2).ok).toBe(true);
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(h.engine.stats.buried).toBe(0);
    expect(h.engine.defaultTube.buried.size).toBe(0);
    h.engine.release(c.session, 1, 0, 0);
    h.engine.release(c.session, 2, 0, 0);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expectConsistent();
  });

  it('is NOT_FOUND for a job reserved by anyone, this session included (upstream reserve_job_already_reserved)', () => {
    const other = h.open();
    c.put();
    c.put();
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(h.engine.reserveJob(c.session, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(other.reserveNow()).toBe(2);
    expect(h.engine.reserveJob(c.session, 2)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.holderOf(h.engine.job(2)!)).toBe(other.session);
    expectConsistent();
  });

  it('ignores the watch list and tube pause, and counts the session as a worker', () => {
    c.use('hidden');
    c.put();
    h.engine.pauseTube('hidden', 60_000);
    const w = h.open();
    expect(w.watched()).toEqual(['default']);
    expect(h.engine.reserveJob(w.session, 1).ok).toBe(true);
    expect(w.session.isWorker).toBe(true);
    expect(h.engine.stats.workers).toBe(1);
  });

  it('is NOT_FOUND for an unknown id', () => {
    expect(h.engine.reserveJob(c.session, 42)).toEqual({ ok: false, code: 'NOT_FOUND' });
  });
});

describe('delete', () => {
  it('deletes ready, delayed and buried jobs for anyone', () => {
    const other = h.open();
    c.put(); // 1 ready
    c.put({ delayMs: 1000 }); // 2 delayed
    c.put(); // 3 -> buried
    h.engine.reserveJob(c.session, 3);
    h.engine.bury(c.session, 3, 0);
    expect(h.engine.delete(other.session, 1).ok).toBe(true);
    expect(h.engine.delete(other.session, 2).ok).toBe(true);
    expect(h.engine.delete(null, 3).ok).toBe(true);
    expect(h.engine.jobTotal).toBe(0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('deletes a job reserved by this session', () => {
    c.put({ ttrMs: 5000 });
    c.reserveNow();
    expect(h.engine.nextDeadline()).toBeDefined();
    const r = h.engine.delete(c.session, 1);
    expect(r.ok && r.value.id).toBe(1);
    expect(h.engine.job(1)).toBeUndefined();
    expect(c.reservedIds()).toEqual([]);
    expect(h.engine.stats.reserved).toBe(0);
    // nothing is timed any more: the session's TTR timer is gone
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('is NOT_FOUND for a job reserved by another session, and leaves it alone (upstream delete_reserved_by_other)', () => {
    const other = h.open();
    c.put();
    other.reserveNow();
    expect(h.engine.delete(c.session, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.delete(null, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.holderOf(h.engine.job(1)!)).toBe(other.session);
    expect(h.engine.defaultTube.cmdDelete).toBe(0);
    expectConsistent();
  });

  it('is NOT_FOUND for unknown or already deleted jobs', () => {
    expect(h.engine.delete(c.session, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    c.put();
    expect(h.engine.delete(c.session, 1).ok).toBe(true);
    expect(h.engine.delete(c.session, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
  });

  it("counts the tube's cmd-delete and frees the body bytes", () => {
    c.put({ body: 'abcd' });
    c.put({ body: 'ef' });
    expect(h.engine.bodyBytes).toBe(6);
    h.engine.delete(c.session, 1);
    expect(h.engine.bodyBytes).toBe(2);
    expect(h.engine.defaultTube.cmdDelete).toBe(1);
  });

  it('leaves the engine unchanged when the journal cannot record the delete', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    c.put();
    journal.failDelete = true;
    expect(h.engine.delete(c.session, 1)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expectConsistent();
  });
});

describe('release', () => {
  it('is NOT_FOUND unless this session holds the job', () => {
    const other = h.open();
    c.put();
    c.put();
    expect(h.engine.release(c.session, 1, 0, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    other.reserveNow();
    expect(h.engine.release(c.session, 1, 0, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.release(c.session, 99, 0, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(jobCounters(h.engine.job(1)!).releases).toBe(0);
  });

  it('without delay: back to ready with the new priority, releases++', () => {
    c.put({ priority: 2000 });
    c.reserveNow();
    expect(h.engine.stats.urgent).toBe(0);
    const r = h.engine.release(c.session, 1, 5, 0);
    expect(r.ok).toBe(true);
    const job = h.engine.job(1)!;
    expect(fieldsOf(job)).toMatchObject({ state: 'ready', priority: 5, delayMs: 0, releases: 1, deadlineAt: 0 });
    expect(h.engine.holderOf(job)).toBeNull();
    expect(h.engine.stats.urgent).toBe(1);
    expect(h.engine.defaultTube.urgent).toBe(1);
    expect(c.reservedIds()).toEqual([]);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('takes its new place in the ready order', () => {
    c.put({ priority: 10 }); // 1
    c.put({ priority: 10 }); // 2
    c.reserveNow();
    h.engine.release(c.session, 1, 10, 0);
    // (10, 1) still comes before (10, 2): FIFO is by id, not by time of release
    expect(c.reserveNow()).toBe(1);
    h.engine.release(c.session, 1, 11, 0);
    expect(c.reserveNow()).toBe(2);
  });

  it('with delay: delayed until now + delay, then ready', () => {
    c.put({ priority: 1 });
    c.reserveNow();
    h.advance(1000);
    expect(h.engine.release(c.session, 1, 3, 4000).ok).toBe(true);
    const job = h.engine.job(1)!;
    expect(fieldsOf(job)).toMatchObject({ state: 'delayed', priority: 3, delayMs: 4000, releases: 1, deadlineAt: T0 + 5000 });
    expect(h.engine.nextDeadline()).toBe(T0 + 5000);
    expect(h.engine.peekDelayed(h.engine.defaultTube)).toBe(job);
    h.advance(3999);
    expect(jobState(job)).toBe('delayed');
    h.advance(1);
    expect(jobState(job)).toBe('ready');
    expectConsistent();
  });

  it('journals every release, with or without a delay', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    c.put();
    c.reserveNow();
    h.engine.release(c.session, 1, 0, 0);
    c.reserveNow();
    h.engine.release(c.session, 1, 0, 1000);
    expect(journal.writes).toEqual(['put 1 ready', 'update 1 ready', 'update 1 delayed']);
  });

  it('leaves a release, bury, kick and reserve-job undone when the journal has no room', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    c.put();
    c.put({ delayMs: 5000 });
    c.reserveNow();
    journal.failUpdate = true;
    expect(h.engine.release(c.session, 1, 7, 0)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(h.engine.bury(c.session, 1, 7)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
    expect(jobPriority(h.engine.job(1)!)).not.toBe(7);
    expect(h.engine.kickJob(2)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(h.engine.kick(h.engine.defaultTube, 10)).toBe(0);
    expect(h.engine.reserveJob(c.session, 2)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(jobState(h.engine.job(2)!)).toBe('delayed');
    expectConsistent();
  });
});

describe('bury', () => {
  it('only buries a job this session holds', () => {
    const other = h.open();
    c.put();
    expect(h.engine.bury(c.session, 1, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    other.reserveNow();
    expect(h.engine.bury(c.session, 1, 0)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
  });

  it('sets the priority, counts buries and keeps buried jobs in FIFO order of burial', () => {
    for (let i = 0; i < 3; i++) c.put({ priority: 100 });
    for (const id of [3, 1, 2]) {
      h.engine.reserveJob(c.session, id);
      expect(h.engine.bury(c.session, id, 7).ok).toBe(true);
    }
    const tube = h.engine.defaultTube;
    expect([...tube.buried.values()].map((j) => j.id)).toEqual([3, 1, 2]);
    expect(fieldsOf(h.engine.job(3))).toMatchObject({ state: 'buried', priority: 7, buries: 1, deadlineAt: 0 });
    expect(h.engine.holderOf(h.engine.job(3)!)).toBeNull();
    expect(h.engine.stats.buried).toBe(3);
    expect(h.engine.peekBuried(tube)!.id).toBe(3);
    expect(h.engine.nextDeadline()).toBeUndefined();
    const kicked: number[] = [];
    h.engine.events.on('job:changed', (e) => kicked.push(e.job.id));
    expect(h.engine.kick(tube, 10)).toBe(3);
    expect(kicked).toEqual([3, 1, 2]);
    expectConsistent();
  });

  it('does not wake a waiting session', () => {
    const w = h.open();
    expect(w.reserve(null).kind).toBe('waiting');
    c.put();
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    h.engine.bury(w.session, 1, 0);
    const w2 = h.open();
    expect(w2.reserve(null).kind).toBe('waiting');
    expect(w2.delegate.calls).toEqual([]);
  });
});

describe('touch', () => {
  it('restarts the TTR from now', () => {
    c.put({ ttrMs: 10_000 });
    c.reserveNow();
    h.advance(6000);
    const r = h.engine.touch(c.session, 1);
    expect(r.ok).toBe(true);
    expect(jobDeadlineAt(h.engine.job(1)!)).toBe(T0 + 16_000);
    h.advance(9000); // past the original deadline
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
    expect(jobCounters(h.engine.job(1)!).timeouts).toBe(0);
  });

  it('is NOT_FOUND for jobs this session does not hold', () => {
    const other = h.open();
    c.put();
    c.put();
    other.reserveNow();
    expect(h.engine.touch(c.session, 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.touch(c.session, 2)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.touch(c.session, 3)).toEqual({ ok: false, code: 'NOT_FOUND' });
  });

  it('moves the session timer with the soonest deadline', () => {
    c.put({ ttrMs: 10_000 });
    c.put({ ttrMs: 20_000 });
    c.reserveNow();
    c.reserveNow();
    const before = h.engine.nextDeadline()!;
    h.advance(5000);
    h.engine.touch(c.session, 1); // 1 now ends at T0 + 15 s, 2 still at T0 + 20 s
    expect(h.engine.nextDeadline()).toBe(before + 5000);
    h.advance(12_000);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expect(jobState(h.engine.job(2)!)).toBe('reserved');
  });
});

describe('kick', () => {
  it('kicks buried jobs first and never mixes them with delayed ones', () => {
    const tube = h.engine.defaultTube;
    c.put();
    c.put();
    c.put({ delayMs: 60_000 });
    for (const id of [1, 2]) {
      h.engine.reserveJob(c.session, id);
      h.engine.bury(c.session, id, 0);
    }
    expect(h.engine.kickKind(tube)).toBe('buried');
    expect(h.engine.kick(tube, 10)).toBe(2);
    expect(jobState(h.engine.job(3)!)).toBe('delayed');
    expect(h.engine.kickKind(tube)).toBe('delayed');
    expect(h.engine.kick(tube, 10)).toBe(1);
    expect(jobState(h.engine.job(3)!)).toBe('ready');
    expect(h.engine.kick(tube, 10)).toBe(0);
    for (const id of [1, 2, 3]) expect(jobCounters(h.engine.job(id)!).kicks).toBe(1);
    expectConsistent();
  });

  it('kick 0 kicks nothing', () => {
    c.put({ delayMs: 1000 });
    expect(h.engine.kick(h.engine.defaultTube, 0)).toBe(0);
    expect(jobState(h.engine.job(1)!)).toBe('delayed');
  });

  it('kicks delayed jobs earliest deadline first, up to the bound, and takes them off the timer', () => {
    const tube = h.engine.defaultTube;
    c.put({ delayMs: 30_000 }); // 1
    c.put({ delayMs: 10_000 }); // 2
    c.put({ delayMs: 20_000 }); // 3
    c.put({ delayMs: 10_000 }); // 4
    expect(h.engine.kick(tube, 3)).toBe(3);
    expect([1, 2, 3, 4].map((id) => jobState(h.engine.job(id)!))).toEqual(['delayed', 'ready', 'ready', 'ready']);
    expect(h.engine.nextDeadline()).toBe(T0 + 30_000);
    expectConsistent();
  });

  it('acts on the given tube only', () => {
    c.use('a');
    c.put({ delayMs: 1000 });
    c.use('b');
    c.put({ delayMs: 1000 });
    expect(h.engine.kick(h.engine.tube('b')!, 10)).toBe(1);
    expect(jobState(h.engine.job(1)!)).toBe('delayed');
    expect(jobState(h.engine.job(2)!)).toBe('ready');
  });

  it('kickSome works in slices, keeping the buried FIFO order', () => {
    const tube = h.engine.defaultTube;
    for (let i = 1; i <= 10; i++) {
      c.put();
      h.engine.reserveJob(c.session, i);
      h.engine.bury(c.session, i, 0);
    }
    c.put({ delayMs: 5000 }); // 11
    const order: number[] = [];
    h.engine.events.on('job:changed', (e) => order.push(e.job.id));
    const slices: number[] = [];
    for (let n = h.engine.kickSome(tube, 'buried', 3); n > 0; n = h.engine.kickSome(tube, 'buried', 3)) slices.push(n);
    expect(slices).toEqual([3, 3, 3, 1]);
    expect(order).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(jobState(h.engine.job(11)!)).toBe('delayed');
    expect(h.engine.kickSome(tube, 'delayed', 3)).toBe(1);
    expectConsistent();
  });

  it('kickSome of the delayed kind leaves buried jobs alone', () => {
    const tube = h.engine.defaultTube;
    c.put();
    h.engine.reserveJob(c.session, 1);
    h.engine.bury(c.session, 1, 0);
    c.put({ delayMs: 5000 });
    expect(h.engine.kickSome(tube, 'delayed', 10)).toBe(1);
    expect(jobState(h.engine.job(1)!)).toBe('buried');
  });

  it('kickJob kicks one buried or delayed job in any tube (upstream kickjob_buried, kickjob_delayed)', () => {
    c.use('x');
    c.put(); // 1 -> buried
    h.engine.reserveJob(c.session, 1);
    h.engine.bury(c.session, 1, 0);
    c.put({ delayMs: 10_000 }); // 2
    c.put(); // 3 ready
    c.put(); // 4 reserved
    h.engine.reserveJob(c.session, 4);
    c.use('default');
    expect(h.engine.kickJob(100)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.kickJob(1).ok).toBe(true);
    expect(h.engine.kickJob(1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.kickJob(2).ok).toBe(true);
    expect(h.engine.kickJob(2)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.kickJob(3)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.kickJob(4)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(fieldsOf(h.engine.job(1))).toMatchObject({ state: 'ready', kicks: 1 });
    expect(fieldsOf(h.engine.job(2))).toMatchObject({ state: 'ready', kicks: 1 });
    expect(h.engine.nextDeadline()).toBe(jobDeadlineAt(h.engine.job(4)!) + 1);
    expectConsistent();
  });

  it('a kicked job goes straight to a waiting session', () => {
    const w = h.open();
    c.put({ delayMs: 10_000 });
    expect(w.reserve(null).kind).toBe('waiting');
    h.engine.kick(h.engine.defaultTube, 1);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
  });

  it('journals every kicked job', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    c.put({ delayMs: 1000 });
    c.put({ delayMs: 1000 });
    h.engine.kick(h.engine.defaultTube, 5);
    expect(journal.writes).toEqual(['put 1 delayed', 'put 2 delayed', 'update 1 ready', 'update 2 ready']);
  });
});

describe('a job\'s rarer counters (Job.more)', () => {
  it('are shared until one changes, kept once it has, and stay shared for a job recovered with none', () => {
    const h = new Harness();
    const c = h.open();
    const job = c.put();
    expect(countersShared(job)).toBe(true);
    c.reserve(0);
    expect(countersShared(job)).toBe(true); // a reserve counts in `reserves`, which the job keeps itself
    h.engine.release(c.session, job.id, 0, 0);
    expect(countersShared(job)).toBe(false);
    expect(jobCounters(job).releases).toBe(1);
    expect(jobCounters(job).strikes).toBe(1);
    h.engine.restoreJob(jobImage({ id: 50, createdAt: h.now(), body: Buffer.from('x') }), 0);
    expect(countersShared(h.engine.job(50)!)).toBe(true);
    h.engine.restoreJob(jobImage({ id: 51, createdAt: h.now(), kicks: 2, body: Buffer.from('x') }), 0);
    expect(jobCounters(h.engine.job(51)!).kicks).toBe(2);
  });
});
