/**
 * Everything the clock drives, on a fake clock: delayed jobs, nextDeadline, TTR expiry,
 * DEADLINE_SOON, reserve timeouts, tube pause and the tick budget. Nothing here sleeps.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { Harness, T0, type Client, fieldsOf } from './testing.js';
import { jobState, jobDeadlineAt, jobCounters, jobCreatedAt, jobDelayMs } from './records.js';

let h: Harness;
let c: Client;

beforeEach(() => {
  h = new Harness();
  c = h.open();
});

function expectConsistent(maxId = 50): void {
  expect(h.problems(maxId)).toEqual([]);
}

describe('delayed jobs', () => {
  it('become ready exactly at their deadline, through tick', () => {
    const job = c.put({ delayMs: 5000 });
    expect(h.engine.nextDeadline()).toBe(T0 + 5000);
    expect(h.engine.tick(T0 + 4999)).toBe(false);
    expect(jobState(job)).toBe('delayed');
    h.clock.set(T0 + 5000);
    expect(jobState(job)).toBe('delayed'); // time alone changes nothing: only tick does
    expect(h.engine.tick(T0 + 5000)).toBe(false);
    expect(jobState(job)).toBe('ready');
    expect(jobDeadlineAt(job)).toBe(0);
    expect(h.engine.stats.ready).toBe(1);
    expect(h.engine.stats.delayed).toBe(0);
    expect(h.engine.delayedCount).toBe(0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('come due in (deadline, id) order, one deadline after another (upstream delayed_to_ready)', () => {
    const tube = h.engine.defaultTube;
    c.put({ delayMs: 3000 }); // 1
    c.put({ delayMs: 1000 }); // 2
    c.put({ delayMs: 2000 }); // 3
    c.put({ delayMs: 1000 }); // 4
    expect(tube.delayed.size).toBe(4);
    expect(tube.totalJobs).toBe(4);
    const order: number[] = [];
    h.engine.events.on('job:changed', (e) => {
      if (e.from === 'delayed') order.push(e.job.id);
    });
    const deadlines: number[] = [];
    for (let next = h.engine.nextDeadline(); next !== undefined; next = h.engine.nextDeadline()) {
      deadlines.push(next - T0);
      h.advanceTo(next);
    }
    expect(deadlines).toEqual([1000, 2000, 3000]);
    expect(order).toEqual([2, 4, 3, 1]);
    expect(tube.ready.size).toBe(4);
    expect(tube.totalJobs).toBe(4);
  });

  it('a late tick moves everything that is due', () => {
    for (let i = 1; i <= 5; i++) c.put({ delayMs: i * 1000 });
    expect(h.engine.tick(T0 + 3500)).toBe(false);
    expect([1, 2, 3, 4, 5].map((id) => jobState(h.engine.job(id)!))).toEqual(['ready', 'ready', 'ready', 'delayed', 'delayed']);
    expect(h.engine.nextDeadline()).toBe(T0 + 4000);
  });

  it('a due job goes to a waiting session', () => {
    const w = h.open();
    c.put({ delayMs: 2000 });
    expect(w.reserve(null).kind).toBe('waiting');
    h.advance(1999);
    expect(w.delegate.calls).toEqual([]);
    h.advance(1);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(h.engine.holderOf(h.engine.job(1)!)).toBe(w.session);
  });
});

describe('nextDeadline', () => {
  it('is undefined when nothing is timed', () => {
    expect(h.engine.nextDeadline()).toBeUndefined();
    c.put();
    expect(h.engine.nextDeadline()).toBeUndefined();
    expect(c.reserve(null).kind).toBe('reserved');
    c.put();
    h.engine.release(c.session, 1, 0, 0);
    expect(h.engine.nextDeadline()).toBeUndefined();
  });

  it('is undefined for a session waiting forever', () => {
    expect(c.reserve(null).kind).toBe('waiting');
    expect(h.engine.nextDeadline()).toBeUndefined();
  });

  it('is the soonest of delayed jobs, tube pauses, TTRs and reserve timeouts', () => {
    c.put({ delayMs: 50_000 });
    expect(h.engine.nextDeadline()).toBe(T0 + 50_000);
    h.engine.pauseTube('default', 40_000);
    expect(h.engine.nextDeadline()).toBe(T0 + 40_000);
    const worker = h.open();
    worker.use('w');
    worker.put({ ttrMs: 30_000 });
    worker.watch('w');
    expect(worker.reserveNow()).toBe(2);
    // protocol: a reserved job expires once now > deadline, so the engine looks 1 ms after it
    expect(h.engine.nextDeadline()).toBe(T0 + 30_001);
    const waiter = h.open();
    expect(waiter.reserve(20_000).kind).toBe('waiting');
    expect(h.engine.nextDeadline()).toBe(T0 + 20_000);
    // each deadline comes off in turn
    const seen: number[] = [];
    for (let next = h.engine.nextDeadline(); next !== undefined; next = h.engine.nextDeadline()) {
      seen.push(next - T0);
      h.advanceTo(next);
    }
    expect(seen).toEqual([20_000, 30_001, 40_000, 50_000]);
    expect(waiter.delegate.calls).toEqual([{ kind: 'timed-out' }]);
  });

  it('is the DEADLINE_SOON point (deadline - 1 s) for a waiting session that holds a job', () => {
    c.put({ ttrMs: 10_000 });
    c.reserveNow();
    expect(h.engine.nextDeadline()).toBe(T0 + 10_001);
    expect(c.reserve(null).kind).toBe('waiting');
    expect(h.engine.nextDeadline()).toBe(T0 + 9000);
  });

  it('never stays at or before now after a tick', () => {
    c.put({ delayMs: 1000, ttrMs: 1000 });
    c.put({ delayMs: 1000, ttrMs: 2000 });
    h.engine.pauseTube('default', 1000);
    const w = h.open();
    expect(w.reserve(1000).kind).toBe('waiting');
    // Harness.tickNow throws if a tick leaves work due at or before now.
    for (let t = 0; t <= 5000; t += 250) h.advance(250);
    expectConsistent();
  });
});

describe('TTR', () => {
  it('returns an expired job to ready and counts the timeout', () => {
    c.put({ ttrMs: 10_000, priority: 5 });
    c.reserveNow();
    const job = h.engine.job(1)!;
    expect(jobDeadlineAt(job)).toBe(T0 + 10_000);
    h.advance(10_000);
    // protocol: a job expires when deadline < now, strictly
    expect(jobState(job)).toBe('reserved');
    expect(h.engine.touch(c.session, 1).ok).toBe(true); // still ours at the deadline itself
    h.advance(10_000);
    expect(jobState(job)).toBe('reserved');
    h.advance(1);
    expect(fieldsOf(job)).toMatchObject({ state: 'ready', timeouts: 1, reserves: 1, deadlineAt: 0 });
    expect(h.engine.holderOf(job)).toBeNull();
    expect(h.engine.stats.jobTimeouts).toBe(1);
    expect(h.engine.stats.reserved).toBe(0);
    expect(h.engine.stats.ready).toBe(1);
    expect(h.engine.defaultTube.reserved).toBe(0);
    expect(c.reservedIds()).toEqual([]);
    expect(h.engine.nextDeadline()).toBeUndefined();
    // the old holder can no longer act on it
    expect(h.engine.delete(c.session, 1).ok).toBe(true);
    expectConsistent();
  });

  it('expires each reserved job of a session at its own deadline', () => {
    c.put({ ttrMs: 3000 });
    c.put({ ttrMs: 1000 });
    c.put({ ttrMs: 2000 });
    for (let i = 0; i < 3; i++) c.reserveNow();
    const expired: number[] = [];
    h.engine.events.on('job:changed', (e) => {
      if (e.from === 'reserved' && e.to === 'ready') expired.push(e.job.id);
    });
    h.advance(1001);
    expect(expired).toEqual([2]);
    h.advance(1000);
    expect(expired).toEqual([2, 3]);
    h.advance(1000);
    expect(expired).toEqual([2, 3, 1]);
    expect(h.engine.stats.jobTimeouts).toBe(3);
  });

  it('a late tick expires all overdue jobs at once, soonest deadline first', () => {
    c.put({ ttrMs: 3000 });
    c.put({ ttrMs: 1000 });
    c.reserveNow();
    c.reserveNow();
    const expired: number[] = [];
    h.engine.events.on('job:changed', (e) => expired.push(e.job.id));
    expect(h.engine.tick(T0 + 60_000)).toBe(false);
    expect(expired).toEqual([2, 1]);
  });

  it('hands an expired job to a waiting session', () => {
    const w = h.open();
    c.put({ ttrMs: 1000 });
    c.reserveNow();
    expect(w.reserve(null).kind).toBe('waiting');
    h.advance(1001);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(fieldsOf(h.engine.job(1))).toMatchObject({ timeouts: 1, reserves: 2 });
  });

  it('does not expire a job that was released, deleted or buried in time', () => {
    c.put({ ttrMs: 1000 });
    c.put({ ttrMs: 1000 });
    c.put({ ttrMs: 1000 });
    for (let i = 0; i < 3; i++) c.reserveNow();
    h.engine.release(c.session, 1, 0, 0);
    h.engine.delete(c.session, 2);
    h.engine.bury(c.session, 3, 0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    h.advance(5000);
    expect(h.engine.stats.jobTimeouts).toBe(0);
  });
});

describe('DEADLINE_SOON', () => {
  it('is the answer at once when a held job is within 1 s of its deadline and nothing watched is ready', () => {
    c.put({ ttrMs: 3000 });
    c.reserveNow();
    h.advance(1999);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' }); // not in the margin yet
    h.advance(1); // now = deadline - 1 s: in the margin (inclusive)
    expect(c.reserve(0)).toEqual({ kind: 'deadline-soon' });
    expect(c.reserve(null)).toEqual({ kind: 'deadline-soon' });
    expect(c.reserve(5000)).toEqual({ kind: 'deadline-soon' });
    expect(c.session.waiting).toBe(false);
    // the job stays reserved and can still be touched, released or deleted
    const job = h.engine.job(1)!;
    expect(jobState(job)).toBe('reserved');
    expect(h.engine.touch(c.session, 1).ok).toBe(true);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' }); // touched: out of the margin again
    expect(jobCounters(job).timeouts).toBe(0);
  });

  it('is not the answer when a watched tube has a ready job: that job is reserved instead', () => {
    c.put({ ttrMs: 1000 });
    c.reserveNow(); // deadline in 1 s: in the margin at once
    expect(c.reserve(0)).toEqual({ kind: 'deadline-soon' });
    c.use('other');
    c.put(); // 2, in a tube not watched
    expect(c.reserve(0)).toEqual({ kind: 'deadline-soon' });
    c.watch('other');
    const outcome = c.reserve(0);
    expect(outcome.kind === 'reserved' && outcome.job.id).toBe(2);
  });

  it('counts ready jobs in paused watched tubes: no immediate DEADLINE_SOON, but it comes on the next tick', () => {
    c.put({ ttrMs: 1000 }); // 1
    c.reserveNow();
    c.put(); // 2, ready
    h.engine.pauseTube('default', 60_000);
    // protocol: the ready check ignores pause, so the session waits...
    expect(c.reserve(null)).toEqual({ kind: 'waiting' });
    // ...and its timer is already due, so the next wake-up answers DEADLINE_SOON.
    expect(h.engine.nextDeadline()).toBe(T0);
    h.tickNow();
    expect(c.delegate.drain()).toEqual([{ kind: 'deadline-soon' }]);
    expect(c.session.waiting).toBe(false);
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expectConsistent();
  });

  it('with timeout 0 in the margin and only paused tubes ready: DEADLINE_SOON, not TIMED_OUT', () => {
    // beanstalkd makes even a zero-timeout reserve wait for the next tick, and there the
    // DEADLINE_SOON check comes before the timeout.
    c.put({ ttrMs: 1000 }); // 1
    c.reserveNow();
    c.put(); // 2
    h.engine.pauseTube('default', 60_000);
    expect(c.reserve(0)).toEqual({ kind: 'deadline-soon' });
    expect(c.session.waiting).toBe(false);
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
    h.engine.release(c.session, 1, 0, 0);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
  });

  it('arrives while waiting, 1 s before the deadline (upstream reserve_ttr_deadline_soon pattern)', () => {
    c.put({ ttrMs: 3000 });
    c.reserveNow();
    expect(c.reserve(null)).toEqual({ kind: 'waiting' });
    expect(h.engine.stats.waiting).toBe(1);
    h.advance(1999);
    expect(c.delegate.calls).toEqual([]);
    h.advance(1);
    expect(c.delegate.drain()).toEqual([{ kind: 'deadline-soon' }]);
    expect(c.session.waiting).toBe(false);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.defaultTube.waiting.size).toBe(0);
    const job = h.engine.job(1)!;
    expect(jobState(job)).toBe('reserved');
    // the job can still be released; then it is ready
    expect(h.engine.release(c.session, 1, 0, 0).ok).toBe(true);
    expect(jobState(job)).toBe('ready');
    expectConsistent();
  });

  it('while waiting, if not acted on, the job then times out at its deadline', () => {
    c.put({ ttrMs: 3000 });
    c.reserveNow();
    c.reserve(null);
    h.advance(2000);
    expect(c.delegate.drain()).toEqual([{ kind: 'deadline-soon' }]);
    expect(h.engine.nextDeadline()).toBe(T0 + 3001);
    h.advance(1001);
    expect(fieldsOf(h.engine.job(1))).toMatchObject({ state: 'ready', timeouts: 1 });
  });

  it('comes before a longer reserve timeout, and a shorter reserve timeout comes first', () => {
    c.put({ ttrMs: 3000 });
    c.reserveNow();
    expect(c.reserve(5000).kind).toBe('waiting');
    h.advance(2000);
    expect(c.delegate.drain()).toEqual([{ kind: 'deadline-soon' }]);
    h.advance(5000);
    expect(c.delegate.calls).toEqual([]); // the abandoned wait never reports TIMED_OUT
    expect(jobState(h.engine.job(1)!)).toBe('ready');

    c.reserveNow(); // job 1 again, deadline now + 3 s
    expect(c.reserve(1000).kind).toBe('waiting');
    h.advance(1000);
    expect(c.delegate.drain()).toEqual([{ kind: 'timed-out' }]);
  });

  it('is not sent while a waiting session gets a job in time', () => {
    c.put({ ttrMs: 3000 });
    c.reserveNow();
    c.reserve(null);
    const p = h.open();
    h.advance(1000);
    p.put();
    expect(c.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 2 }]);
    h.advance(1500);
    expect(c.delegate.calls).toEqual([]);
  });

  it('is never the answer to reserveJob (upstream reserve_job_ttr_deadline_soon)', () => {
    c.put({ delayMs: 5000, ttrMs: 1000 });
    c.put({ ttrMs: 1000 });
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(c.reserve(1000)).toEqual({ kind: 'reserved', job: h.engine.job(2) });
    expect(c.reserve(1000)).toEqual({ kind: 'deadline-soon' });
    expect(h.engine.reserveJob(c.session, 99)).toEqual({ ok: false, code: 'NOT_FOUND' });
    h.advance(1001);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
  });
});

describe('reserve timeout', () => {
  it('a waiting reserve times out exactly at now + timeout', () => {
    expect(c.reserve(5000)).toEqual({ kind: 'waiting' });
    expect(c.session.waiting).toBe(true);
    expect(h.engine.stats.waiting).toBe(1);
    expect(h.engine.defaultTube.waiting.size).toBe(1);
    expect(h.engine.nextDeadline()).toBe(T0 + 5000);
    h.advance(4999);
    expect(c.delegate.calls).toEqual([]);
    h.advance(1);
    expect(c.delegate.drain()).toEqual([{ kind: 'timed-out' }]);
    expect(c.session.waiting).toBe(false);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.defaultTube.waiting.size).toBe(0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('is cancelled when a job arrives first', () => {
    expect(c.reserve(5000).kind).toBe('waiting');
    h.advance(1000);
    const p = h.open();
    p.put({ ttrMs: 60_000 });
    expect(c.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(h.engine.nextDeadline()).toBe(T0 + 1000 + 60_001);
    h.advance(10_000);
    expect(c.delegate.calls).toEqual([]);
  });

  it('another session watching the same tube does not disturb it (upstream reserve_with_timeout_2conns)', () => {
    const c0 = c;
    const c1 = h.open();
    c0.watch('foo');
    expect(c0.reserve(1000).kind).toBe('waiting');
    c1.watch('foo');
    h.advance(1000);
    expect(c0.delegate.drain()).toEqual([{ kind: 'timed-out' }]);
    expect(c1.delegate.calls).toEqual([]);
  });

  it('a half-closed session times out at once, and later blocking reserves do too', () => {
    expect(c.reserve(null).kind).toBe('waiting');
    h.engine.halfClose(c.session);
    expect(c.delegate.drain()).toEqual([{ kind: 'timed-out' }]);
    expect(c.session.waiting).toBe(false);
    expect(h.engine.stats.waiting).toBe(0);
    expect(c.reserve(null)).toEqual({ kind: 'timed-out' });
    const p = h.open();
    p.put();
    expect(c.delegate.calls).toEqual([]);
    expect(c.reserve(null).kind).toBe('reserved');
    expectConsistent();
  });
});

describe('pause-tube', () => {
  it('is NOT_FOUND for a tube that does not exist, and does not create it', () => {
    expect(h.engine.pauseTube('nope', 1000)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.tubeNames()).toEqual(['default']);
  });

  it('blocks reserve until the pause ends (upstream pause)', () => {
    c.put();
    const r = h.engine.pauseTube('default', 1000);
    expect(r.ok).toBe(true);
    const tube = h.engine.defaultTube;
    expect(tube.paused).toBe(true);
    expect(tube.pauseMs).toBe(1000);
    expect(tube.unpauseAt).toBe(T0 + 1000);
    expect(tube.cmdPause).toBe(1);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(c.reserve(null)).toEqual({ kind: 'waiting' });
    expect(h.engine.nextDeadline()).toBe(T0 + 1000);
    h.advance(999);
    expect(c.delegate.calls).toEqual([]);
    h.advance(1);
    expect(c.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(tube.paused).toBe(false);
    expect(tube.pauseMs).toBe(0);
    expectConsistent();
  });

  it('pause 0 wakes waiters on the next tick (upstream unpause_tube)', () => {
    c.put();
    h.engine.pauseTube('default', 86_400_000);
    const w = h.open();
    expect(w.reserve(null).kind).toBe('waiting');
    expect(h.engine.pauseTube('default', 0).ok).toBe(true);
    expect(h.engine.nextDeadline()).toBe(h.now());
    h.tickNow();
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(h.engine.defaultTube.paused).toBe(false);
    expect(h.engine.defaultTube.cmdPause).toBe(2);
    expect(h.engine.nextDeadline()).toBeDefined(); // only the TTR now
    expect(h.engine.nextDeadline()).toBe(jobDeadlineAt(h.engine.job(1)!) + 1);
  });

  it('a new pause replaces the old one, shorter or longer', () => {
    const tube = h.engine.defaultTube;
    h.engine.pauseTube('default', 10_000);
    h.engine.pauseTube('default', 2000);
    expect(tube.unpauseAt).toBe(T0 + 2000);
    expect(h.engine.nextDeadline()).toBe(T0 + 2000);
    h.engine.pauseTube('default', 30_000);
    expect(tube.unpauseAt).toBe(T0 + 30_000);
    expect(h.engine.nextDeadline()).toBe(T0 + 30_000);
    h.advance(29_999);
    expect(tube.paused).toBe(true);
    h.advance(1);
    expect(tube.paused).toBe(false);
    expect(h.engine.nextDeadline()).toBeUndefined();
  });

  it('still allows peek, kick, reserveJob and delete in the paused tube', () => {
    const tube = h.engine.defaultTube;
    c.put(); // 1
    c.put({ delayMs: 100_000 }); // 2
    c.put(); // 3
    h.engine.pauseTube('default', 60_000);
    expect(h.engine.peekReady(tube)!.id).toBe(1);
    expect(h.engine.kick(tube, 1)).toBe(1);
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(h.engine.delete(c.session, 3).ok).toBe(true);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
  });

  it('a pause that ran out is noticed by reserve even before the tick', () => {
    c.put();
    h.engine.pauseTube('default', 1000);
    h.clock.advance(1000); // no tick
    expect(c.reserve(0).kind).toBe('reserved');
    expect(h.engine.defaultTube.paused).toBe(false);
    expect(h.engine.nextDeadline()).toBe(jobDeadlineAt(h.engine.job(1)!) + 1);
  });

  it('a reserve racing the tick for a pause that ran out does not take a job already handed to a waiter', () => {
    h.engine.pauseTube('default', 1000);
    const w = h.open();
    expect(w.reserve(null).kind).toBe('waiting');
    c.put(); // 1: stays ready, the tube is paused
    h.clock.advance(1000); // the pause is over, but the scheduler has not ticked yet
    const outcome = c.reserve(null);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(outcome).toEqual({ kind: 'waiting' });
    expect(h.engine.holderOf(h.engine.job(1)!)).toBe(w.session);
    expectConsistent();
  });

  it('serves the best job first when pauses on several tubes end at once', () => {
    const a = h.open();
    const b = h.open();
    a.watch('ta');
    a.ignore('default');
    b.watch('tb');
    b.ignore('default');
    h.engine.pauseTube('ta', 1000);
    h.engine.pauseTube('tb', 1000);
    expect(a.reserve(null).kind).toBe('waiting');
    expect(b.reserve(null).kind).toBe('waiting');
    c.use('ta');
    c.put({ priority: 10 }); // 1
    c.use('tb');
    c.put({ priority: 5 }); // 2
    const order: number[] = [];
    h.engine.events.on('job:changed', (e) => order.push(e.job.id));
    h.advance(1000);
    expect(order).toEqual([2, 1]);
    expect(a.delegate.calls).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(b.delegate.calls).toEqual([{ kind: 'reserved', jobId: 2 }]);
  });
  it('a session watching several tubes whose pauses end together gets the best job of all of them', () => {
    const w = h.open();
    // tb is created first, so its pause would be ended first if the engine served waiters per tube
    w.watch('tb');
    w.watch('ta');
    w.ignore('default');
    h.engine.pauseTube('tb', 1000);
    h.engine.pauseTube('ta', 1000);
    c.use('tb');
    c.put({ priority: 10 }); // 1
    c.use('ta');
    c.put({ priority: 5 }); // 2
    expect(w.reserve(null).kind).toBe('waiting');
    h.advance(1000);
    expect(w.delegate.calls).toEqual([{ kind: 'reserved', jobId: 2 }]);
  });
});

describe('tick budget', () => {
  it('moves 10,000 jobs due at once in slices of at most the budget', () => {
    for (let i = 0; i < 10_000; i++) c.put({ delayMs: 1000 + (i % 7) });
    h.clock.set(T0 + 2000);
    const moved: number[] = [];
    const results: boolean[] = [];
    for (let call = 0; call < 20; call++) {
      const before = h.engine.stats.ready;
      const more = h.engine.tick(h.now(), 1000);
      moved.push(h.engine.stats.ready - before);
      results.push(more);
      if (!more) break;
    }
    expect(results).toEqual([...Array<boolean>(9).fill(true), false]);
    expect(moved).toEqual(Array<number>(10).fill(1000));
    expect(h.engine.delayedCount).toBe(0);
    expect(h.engine.stats.ready).toBe(10_000);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expect(h.engine.tick(h.now(), 1000)).toBe(false);
    expectConsistent(10_000);
  });

  it('moves due jobs in (deadline, id) order across slices', () => {
    for (let i = 0; i < 100; i++) c.put({ delayMs: 1000 + ((i * 37) % 10) });
    const order: number[] = [];
    const deadlines: number[] = [];
    h.engine.events.on('job:changed', (e) => {
      order.push(e.job.id);
      deadlines.push(jobCreatedAt(h.engine.job(e.job.id)!) + jobDelayMs(e.job));
    });
    while (h.engine.tick(T0 + 5000, 7));
    expect(order.length).toBe(100);
    for (let i = 1; i < 100; i++) {
      const earlier = deadlines[i - 1]! < deadlines[i]! || (deadlines[i - 1] === deadlines[i] && order[i - 1]! < order[i]!);
      expect(earlier).toBe(true);
    }
  });

  it('counts pauses and session timers against the same budget', () => {
    c.put({ delayMs: 1000 });
    c.put({ delayMs: 1000 });
    h.engine.pauseTube('default', 1000);
    const w = h.open();
    expect(w.reserve(null).kind).toBe('waiting');
    const v = h.open();
    v.watch('other');
    v.ignore('default');
    expect(v.reserve(1000).kind).toBe('waiting');
    const now = T0 + 1000;
    expect(h.engine.tick(now, 2)).toBe(true); // the two delayed jobs; the pause is still due
    expect(h.engine.stats.ready).toBe(2);
    expect(h.engine.defaultTube.paused).toBe(true);
    expect(h.engine.tick(now, 1)).toBe(true); // the pause ends; v's timeout is still due
    expect(h.engine.defaultTube.paused).toBe(false);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(v.delegate.calls).toEqual([]);
    expect(h.engine.tick(now, 1)).toBe(false); // v times out; nothing else is due
    expect(v.delegate.drain()).toEqual([{ kind: 'timed-out' }]);
    expectConsistent();
  });

  it('a budget of 0 does nothing and reports whether anything is due', () => {
    c.put({ delayMs: 1000 });
    expect(h.engine.tick(T0 + 999, 0)).toBe(false);
    expect(h.engine.tick(T0 + 1000, 0)).toBe(true);
    expect(jobState(h.engine.job(1)!)).toBe('delayed');
    expect(h.engine.tick(T0 + 1000, 1)).toBe(false);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
  });
});
