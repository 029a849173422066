/**
 * Tube policies in the engine, on a fake clock: the concurrency cap and the rate hold reserves
 * back exactly as if the tube had no ready job (other watched tubes serve, waiters wait and are
 * served when the cap frees or tokens come back), the queue cap refuses puts, and the timeout
 * backoff sends a timed-out job back delayed. A tube without a policy behaves as before.
 */
import { describe, expect, it } from 'vitest';
import { NO_POLICY, backoffDelayMs, type TubePolicy } from '../../shared/policy.js';
import { Harness, RecordingJournal, unwrap } from './testing.js';
import { jobState, jobDeadlineAt } from './records.js';

const policy = (p: Partial<TubePolicy>): TubePolicy => ({ ...NO_POLICY, ...p });

describe('the concurrency cap', () => {
  it('hands out at most N jobs at once; a reserve beyond it waits and is served when one ends', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('default', policy({ concurrency: 2 })));
    const a = h.open();
    const b = h.open();
    const c = h.open();
    const jobs = [a.put(), a.put(), a.put()];
    expect(a.reserveNow()).toBe(jobs[0]!.id);
    expect(b.reserveNow()).toBe(jobs[1]!.id);
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(c.reserve(null)).toEqual({ kind: 'waiting' });
    expect(h.engine.tube('default')!.gate!.capHeld).toBe(true);
    unwrap(h.engine.delete(a.session, jobs[0]!.id));
    expect(c.delegate.drain()).toEqual([{ kind: 'reserved', jobId: jobs[2]!.id }]);
    expect(h.engine.tube('default')!.reserved).toBe(2);
    expect(h.problems(100)).toEqual([]);
  });

  it('lets a capped tube be passed by for another watched tube, even a worse job', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('capped', policy({ concurrency: 1 })));
    const p = h.open();
    p.use('capped');
    const urgent = [p.put({ priority: 0 }), p.put({ priority: 0 })];
    p.use('other');
    const slow = p.put({ priority: 1000 });
    const w1 = h.open();
    const w2 = h.open();
    for (const w of [w1, w2]) {
      w.watch('capped');
      w.watch('other');
    }
    expect(w1.reserveNow()).toBe(urgent[0]!.id);
    expect(w2.reserveNow()).toBe(slow.id);
    expect(jobState(urgent[1]!)).toBe('ready');
    expect(h.problems(100)).toEqual([]);
  });

  it('serves a waiting wide session when the cap frees', () => {
    const h = new Harness({ wideSessionTubes: 4 });
    unwrap(h.engine.setTubePolicy('t3', policy({ concurrency: 1 })));
    const p = h.open();
    p.use('t3');
    const jobs = [p.put(), p.put()];
    const w = h.open();
    const other = h.open();
    for (let i = 0; i < 8; i++) w.watch(`t${i}`);
    other.watch('t3');
    expect(other.reserveNow()).toBe(jobs[0]!.id);
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    expect(w.delegate.drain()).toEqual([]);
    unwrap(h.engine.release(other.session, jobs[0]!.id, 0, 0));
    // The release made the cap free: the waiting wide session gets the best job, the released one.
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: jobs[0]!.id }]);
    expect(h.problems(100)).toEqual([]);
  });

  it('holds at a lowered cap without taking jobs back, and opens when the policy goes', () => {
    const h = new Harness();
    const a = h.open();
    const jobs = [a.put(), a.put(), a.put()];
    a.reserveNow();
    a.reserveNow();
    unwrap(h.engine.setTubePolicy('default', policy({ concurrency: 1 })));
    expect(a.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(a.reserve(null)).toEqual({ kind: 'waiting' });
    unwrap(h.engine.setTubePolicy('default', null));
    expect(a.delegate.drain()).toEqual([{ kind: 'reserved', jobId: jobs[2]!.id }]);
    expect(h.problems(100)).toEqual([]);
  });

  it('outlives its tube: a tube made again has the policy', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('later', policy({ concurrency: 1 })));
    expect(h.engine.tube('later')).toBeUndefined();
    const a = h.open();
    a.use('later');
    a.put();
    a.put();
    a.watch('later');
    a.reserveNow();
    expect(a.reserve(0)).toEqual({ kind: 'timed-out' });
  });
});

describe('the rate limit', () => {
  it('hands out a burst, then one job per 1/rate seconds, to waiting workers as tokens come back', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('default', policy({ rate: { perSecond: 2, burst: 3 } })));
    const p = h.open();
    const jobs = Array.from({ length: 6 }, () => p.put());
    const w = h.open();
    for (let i = 0; i < 3; i++) expect(w.reserveNow()).toBe(jobs[i]!.id);
    expect(w.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    expect(h.engine.nextDeadline()).toBe(h.now() + 500);
    h.advance(499);
    expect(w.delegate.drain()).toEqual([]);
    h.advance(1);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: jobs[3]!.id }]);
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    h.advance(500);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: jobs[4]!.id }]);
    expect(h.problems(100)).toEqual([]);
  });

  it('refills up to the burst while idle, never beyond', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('default', policy({ rate: { perSecond: 10, burst: 2 } })));
    const p = h.open();
    for (let i = 0; i < 10; i++) p.put({ ttrMs: 3_600_000 });
    const w = h.open();
    w.reserveNow();
    w.reserveNow();
    expect(w.reserve(0)).toEqual({ kind: 'timed-out' });
    h.advance(60_000);
    w.reserveNow();
    w.reserveNow();
    expect(w.reserve(0)).toEqual({ kind: 'timed-out' });
  });
});

describe('the queue cap', () => {
  it('refuses a put beyond N ready and delayed jobs (QUEUE_FULL), counts it, and takes puts again when there is room', () => {
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('default', policy({ queueCap: 2 })));
    const p = h.open();
    p.put();
    p.put({ delayMs: 5000 });
    expect(p.tryPut()).toEqual({ ok: false, code: 'QUEUE_FULL' });
    expect(h.engine.tube('default')!.gate!.refusedPuts).toBe(1);
    // A reserved job no longer counts.
    p.reserveNow();
    p.put();
    expect(p.tryPut()).toEqual({ ok: false, code: 'QUEUE_FULL' });
    expect(h.engine.stats.totalJobs).toBe(3);
  });
});

describe('the timeout backoff', () => {
  it('sends a timed-out job back delayed, longer each time up to the cap', () => {
    const backoff = { baseMs: 2000, factor: 3, maxMs: 10_000, jitter: 0 };
    const h = new Harness();
    unwrap(h.engine.setTubePolicy('default', policy({ timeoutBackoff: backoff })));
    const c = h.open();
    const job = c.put({ ttrMs: 1000 });
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      c.reserveNow();
      h.advance(1001);
      expect(jobState(job)).toBe('delayed');
      delays.push(jobDeadlineAt(job) - h.now());
      h.advance(jobDeadlineAt(job) - h.now());
      expect(jobState(job)).toBe('ready');
    }
    expect(delays).toEqual([2000, 6000, 10_000, 10_000]);
    expect(h.engine.tube('default')!.gate!.backoffs).toBe(4);
    expect(h.problems(100)).toEqual([]);
  });

  it('takes off up to `jitter` of the delay at random', () => {
    const backoff = { baseMs: 1000, factor: 2, maxMs: 60_000, jitter: 0.5 };
    expect(backoffDelayMs(backoff, 1, 0)).toBe(1000);
    expect(backoffDelayMs(backoff, 1, 0.999)).toBe(501);
    expect(backoffDelayMs(backoff, 3, 0.5)).toBe(3000);
    const h = new Harness({ random: () => 0.5 });
    unwrap(h.engine.setTubePolicy('default', policy({ timeoutBackoff: backoff })));
    const c = h.open();
    const job = c.put({ ttrMs: 1000 });
    c.reserveNow();
    h.advance(1001);
    expect(jobDeadlineAt(job) - h.now()).toBe(750);
  });

  it('leaves the dead-letter rule first: the N-th timeout buries', () => {
    const h = new Harness({ deadLetterAfter: 2 });
    unwrap(h.engine.setTubePolicy('default', policy({ timeoutBackoff: { baseMs: 1000, factor: 2, maxMs: 5000, jitter: 0 } })));
    const c = h.open();
    const job = c.put({ ttrMs: 1000 });
    c.reserveNow();
    h.advance(1001);
    expect(jobState(job)).toBe('delayed');
    h.advance(1000);
    c.reserveNow();
    h.advance(1001);
    expect(jobState(job)).toBe('buried');
  });
});

describe('policies and the journal', () => {
  it('records a policy before it applies; a refused record leaves the old one', () => {
    const journal = new RecordingJournal();
    const h = new Harness({ journal });
    const p = policy({ concurrency: 4 });
    unwrap(h.engine.setTubePolicy('jobs', p));
    expect(journal.writes).toEqual([`policy jobs ${JSON.stringify(p)}`]);
    journal.failUpdate = true;
    expect(h.engine.setTubePolicy('jobs', null)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(h.engine.tubePolicy('jobs')).toEqual(p);
  });

  it('costs a tube without a policy nothing: no gate', () => {
    const h = new Harness();
    const c = h.open();
    c.put();
    c.reserveNow();
    expect(h.engine.tube('default')!.gate).toBeNull();
  });
});

describe('policies under random work', () => {
  it.each([12345, 777, 4242, 99991, 31337])('never reserve into a full cap or an empty bucket, keep every index consistent, and serve every waiter they can (seed %i)', (first) => {
    let seed = first;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const h = new Harness({ wideSessionTubes: 3, random, deadLetterAfter: 4 });
    const names = ['a', 'b', 'c', 'd', 'e'];
    const policies: TubePolicy[] = [
      policy({ concurrency: 1 }),
      policy({ concurrency: 3, timeoutBackoff: { baseMs: 500, factor: 2, maxMs: 4000, jitter: 0.5 } }),
      policy({ rate: { perSecond: 2, burst: 2 } }),
      policy({ concurrency: 2, rate: { perSecond: 5, burst: 1 }, queueCap: 6 }),
    ];
    // Each reservation must find a free place and a whole token (the gate state before it).
    h.engine.events.on('job:changed', ({ job, to }) => {
      if (to !== 'reserved') return;
      const gate = job.tube.gate;
      if (gate === null) return;
      const cap = gate.policy.concurrency;
      if (cap !== null) expect(job.tube.reserved - 1, `tube ${job.tube.name} reserved into a full cap`).toBeLessThan(cap);
      expect(gate.rateHeld, `tube ${job.tube.name} reserved with no token`).toBe(false);
    });
    const producer = h.open();
    const workers = Array.from({ length: 6 }, () => h.open());
    for (const w of workers) {
      for (const name of names) if (random() < 0.5) w.watch(name);
    }
    let maxId = 0;
    for (let step = 0; step < 4000; step++) {
      const r = random();
      if (r < 0.3) {
        producer.use(pick(names));
        const put = producer.tryPut({ ttrMs: 1000 + Math.floor(random() * 3000), priority: Math.floor(random() * 10) });
        if (put.ok) maxId = Math.max(maxId, put.value.id);
        else expect(put.code).toBe('QUEUE_FULL');
      } else if (r < 0.5) {
        const w = pick(workers);
        if (!w.session.waiting) w.reserve(random() < 0.5 ? null : Math.floor(random() * 2000));
      } else if (r < 0.7) {
        const w = pick(workers);
        const held = [...w.session.reservedJobs.values()];
        if (held.length > 0) {
          const job = pick(held);
          const how = random();
          if (how < 0.5) unwrap(h.engine.delete(w.session, job.id));
          else if (how < 0.8) unwrap(h.engine.release(w.session, job.id, 1, random() < 0.3 ? 500 : 0));
          else unwrap(h.engine.bury(w.session, job.id, 1));
        }
      } else if (r < 0.9) {
        h.advance(Math.floor(random() * 700));
      } else if (r < 0.97) {
        unwrap(h.engine.setTubePolicy(pick(names), random() < 0.2 ? null : pick(policies)));
      } else {
        const tube = h.engine.tube(pick(names));
        if (tube !== undefined) h.engine.kick(tube, 5);
      }
      expect(h.problems(maxId), `step ${step}`).toEqual([]);
    }
    // With every policy gone and time passed, every waiting worker that watches a tube with a
    // ready job has one: nothing was left gated.
    for (const name of names) unwrap(h.engine.setTubePolicy(name, null));
    h.advance(10_000);
    for (const w of workers) {
      if (!w.session.waiting) continue;
      for (const tube of w.session.watched.values()) expect(tube.ready.size, `${tube.name} has ready jobs and a waiting watcher`).toBe(0);
    }
  });
});
