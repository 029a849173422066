/**
 * Blocked reserves: how waiting sessions are woken, in which order they are served, and what
 * closing a session does to its jobs and to the sessions waiting for them.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { WIDE_SESSION_TUBES } from './engine.js';
import { Harness, type Client, fieldsOf } from './testing.js';
import { jobState, jobDeadlineAt, jobCounters } from './records.js';

let h: Harness;
let producer: Client;

beforeEach(() => {
  h = new Harness();
  producer = h.open();
});

function expectConsistent(maxId = 50): void {
  expect(h.problems(maxId)).toEqual([]);
}

function waiters(n: number, watch?: string): Client[] {
  return Array.from({ length: n }, () => {
    const w = h.open();
    if (watch !== undefined) {
      w.watch(watch);
      w.ignore('default');
    }
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    return w;
  });
}

/** Which of `clients` got each job, in the order the engine told them. */
function servedOrder(clients: Client[]): number[] {
  const order: number[] = [];
  h.engine.events.on('job:changed', (e) => {
    if (e.to === 'reserved') order.push(clients.findIndex((w) => w.session === h.engine.holderOf(e.job)) + 1);
  });
  return order;
}

describe('a blocked reserve', () => {
  it('is woken by a put from another session', () => {
    const [w] = waiters(1) as [Client];
    expect(h.engine.stats.waiting).toBe(1);
    expect(h.engine.defaultTube.waiting.size).toBe(1);
    const job = producer.put({ ttrMs: 5000 });
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(jobState(job)).toBe('reserved');
    expect(h.engine.holderOf(job)).toBe(w.session);
    expect(job.reserves).toBe(1);
    expect(jobDeadlineAt(job)).toBe(h.now() + 5000);
    expect(w.session.waiting).toBe(false);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.defaultTube.waiting.size).toBe(0);
    expect(h.engine.stats.ready).toBe(0);
    expect(h.engine.stats.reserved).toBe(1);
    // the session is served once: a second put stays ready
    producer.put();
    expect(w.delegate.calls).toEqual([]);
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expectConsistent();
  });

  it('is not woken by a put to a tube it does not watch', () => {
    const [w] = waiters(1, 'mine') as [Client];
    producer.use('other');
    producer.put();
    expect(w.delegate.calls).toEqual([]);
    producer.use('mine');
    producer.put();
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 2 }]);
  });

  it('watching several tubes, is woken by a put to any of them and leaves every waiting list', () => {
    const w = h.open();
    w.watch('a');
    w.watch('b');
    expect(w.reserve(null).kind).toBe('waiting');
    for (const name of ['default', 'a', 'b']) expect(h.engine.tube(name)!.waiting.size).toBe(1);
    producer.use('b');
    producer.put();
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    for (const name of ['default', 'a', 'b']) expect(h.engine.tube(name)!.waiting.size).toBe(0);
    expectConsistent();
  });

  it('is woken by a release from another session', () => {
    producer.put();
    producer.reserveNow();
    const [w] = waiters(1) as [Client];
    h.engine.release(producer.session, 1, 0, 0);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(jobCounters(h.engine.job(1)!).releases).toBe(1);
    expect(h.engine.job(1)!.reserves).toBe(2);
  });

  it('is not involved when another session reserves a job by id', () => {
    const [w] = waiters(1, 'x') as [Client];
    producer.put();
    expect(h.engine.reserveJob(producer.session, 1).ok).toBe(true);
    expect(w.delegate.calls).toEqual([]);
  });
});

describe('several waiters', () => {
  it('four waiters, four puts: served 1, 2, 4, 3 (beanstalkd ms_take)', () => {
    const ws = waiters(4);
    const order = servedOrder(ws);
    for (let i = 0; i < 4; i++) producer.put();
    expect(order).toEqual([1, 2, 4, 3]);
    expect(ws.map((w) => w.delegate.calls)).toEqual([
      [{ kind: 'reserved', jobId: 1 }],
      [{ kind: 'reserved', jobId: 2 }],
      [{ kind: 'reserved', jobId: 4 }],
      [{ kind: 'reserved', jobId: 3 }],
    ]);
  });

  it('six waiters, six puts: served 1, 2, 3, 6, 5, 4', () => {
    const ws = waiters(6);
    const order = servedOrder(ws);
    for (let i = 0; i < 6; i++) producer.put();
    expect(order).toEqual([1, 2, 3, 6, 5, 4]);
  });

  it('the round-robin position is per tube and survives between bursts', () => {
    const ws = waiters(3);
    const order = servedOrder(ws);
    producer.put(); // takes waiter 1 at position 0; the list becomes [3, 2], next position 1
    expect(order).toEqual([1]);
    expect(ws[0]!.reserve(null).kind).toBe('waiting'); // [3, 2, 1]
    producer.put(); // position 1: waiter 2; [3, 1], next position 2
    producer.put(); // position 2 % 2 = 0: waiter 3; [1]
    producer.put(); // waiter 1
    expect(order).toEqual([1, 2, 3, 1]);
  });

  it('waiters on other tubes are not disturbed', () => {
    const onA = waiters(2, 'a');
    const onB = waiters(2, 'b');
    producer.use('a');
    producer.put();
    producer.put();
    expect(onA.map((w) => w.delegate.calls.length)).toEqual([1, 1]);
    expect(onB.map((w) => w.delegate.calls.length)).toEqual([0, 0]);
    expect(h.engine.tube('b')!.waiting.size).toBe(2);
    expectConsistent();
  });

  it('each gets the best job (priority, id) available at the moment it is served', () => {
    const ws = waiters(2, 'q');
    h.engine.pauseTube('q', 1000);
    producer.use('q');
    producer.put({ priority: 9 }); // 1
    producer.put({ priority: 1 }); // 2
    producer.put({ priority: 5 }); // 3
    h.advance(1000);
    expect(ws[0]!.delegate.calls).toEqual([{ kind: 'reserved', jobId: 2 }]);
    expect(ws[1]!.delegate.calls).toEqual([{ kind: 'reserved', jobId: 3 }]);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
  });
});

describe('closeSession', () => {
  it('returns reserved jobs to ready in reservation order, with no counters changed', () => {
    const worker = h.open();
    for (let i = 0; i < 3; i++) producer.put({ priority: 7 });
    for (const id of [3, 1, 2]) h.engine.reserveJob(worker.session, id);
    const order: string[] = [];
    h.engine.events.on('job:changed', (e) => order.push(`${e.job.id} ${e.from}>${e.to}`));
    worker.close();
    expect(order).toEqual(['3 reserved>ready', '1 reserved>ready', '2 reserved>ready']);
    for (const id of [1, 2, 3]) {
      expect(fieldsOf(h.engine.job(id))).toMatchObject({ state: 'ready', reserves: 1, releases: 0, timeouts: 0 });
      expect(h.engine.holderOf(h.engine.job(id)!)).toBeNull();
    }
    expect(h.engine.stats.jobTimeouts).toBe(0);
    expect(h.engine.stats.reserved).toBe(0);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('releases at most `budget` jobs per call, in order, and lets go of its tubes only at the end', () => {
    const worker = h.open();
    worker.use('side');
    worker.watch('side');
    for (let i = 0; i < 5; i++) producer.put();
    for (let i = 0; i < 5; i++) worker.reserveNow();
    const released: number[] = [];
    h.engine.events.on('job:changed', (e) => released.push(e.job.id));
    expect(h.engine.closeSession(worker.session, 2)).toBe(false);
    expect(released).toEqual([1, 2]);
    expect(worker.session.closed).toBe(false);
    expect(h.engine.tube('side')).toBeDefined();
    expect(h.engine.closeSession(worker.session, 2)).toBe(false);
    expect(h.engine.closeSession(worker.session, 2)).toBe(true);
    expect(released).toEqual([1, 2, 3, 4, 5]);
    expect(worker.session.closed).toBe(true);
    expect(h.engine.tube('side')).toBeUndefined();
    expect(h.engine.stats.currentConnections).toBe(1);
    expect(h.engine.closeSession(worker.session, 2)).toBe(true);
    expectConsistent();
  });

  it('hands the released jobs to waiting sessions (upstream close_releases_job)', () => {
    const consumer = h.open();
    producer.put({ ttrMs: 100_000 });
    producer.put({ ttrMs: 100_000 });
    producer.put({ ttrMs: 100_000 });
    for (const id of [2, 3, 1]) h.engine.reserveJob(consumer.session, id);
    const ws = waiters(2);
    consumer.close();
    expect(ws[0]!.delegate.calls).toEqual([{ kind: 'reserved', jobId: 2 }]);
    expect(ws[1]!.delegate.calls).toEqual([{ kind: 'reserved', jobId: 3 }]);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expectConsistent();
  });

  it('of a waiting session: it stops waiting and is never told anything', () => {
    const [w] = waiters(1) as [Client];
    w.close();
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.defaultTube.waiting.size).toBe(0);
    producer.put();
    expect(w.delegate.calls).toEqual([]);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expectConsistent();
  });

  it('of a session waiting with a timeout and holding a job: no timers are left behind', () => {
    const w = h.open();
    producer.put({ ttrMs: 10_000 });
    w.reserveNow();
    expect(w.reserve(5000).kind).toBe('waiting');
    expect(h.engine.nextDeadline()).toBeDefined();
    w.close();
    expect(h.engine.nextDeadline()).toBeUndefined();
    h.advance(60_000);
    expect(w.delegate.calls).toEqual([]);
    expect(fieldsOf(h.engine.job(1))).toMatchObject({ state: 'ready', timeouts: 0 });
  });

  it('updates connection, producer and worker counts, and is idempotent', () => {
    const w = h.open();
    producer.put();
    w.reserveNow();
    expect(h.engine.stats).toMatchObject({ currentConnections: 2, totalConnections: 2, producers: 1, workers: 1 });
    w.close();
    w.close();
    producer.close();
    expect(h.engine.stats).toMatchObject({ currentConnections: 0, totalConnections: 2, producers: 0, workers: 0 });
    expect(h.engine.defaultTube.watching).toBe(0);
    expect(h.engine.defaultTube.using).toBe(0);
    expectConsistent();
  });
});

describe('a session watching more than WIDE_SESSION_TUBES tubes (wide)', () => {
  /** A session watching `n` tubes t0..t(n-1) besides default, blocked in reserve. */
  function wideWaiter(n: number): Client {
    const w = h.open();
    for (let i = 0; i < n; i++) w.watch(`t${i}`);
    expect(w.session.wide).toBe(true);
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    return w;
  }

  it('waits without joining each tube\'s waiting list, counts in each tube\'s current-waiting, and is woken by a put to any of them', () => {
    const w = wideWaiter(WIDE_SESSION_TUBES + 36);
    const t57 = h.engine.tube('t57')!;
    expect(t57.waiting.size).toBe(0);
    expect(t57.waitingSessions).toBe(1);
    expect(h.engine.stats.waiting).toBe(1);
    producer.use('t57');
    producer.put();
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(t57.waitingSessions).toBe(0);
    expect(h.engine.stats.waiting).toBe(0);
    // served once: the next put stays ready, and the next reserve takes it at once
    producer.put();
    expect(w.delegate.calls).toEqual([]);
    expect(w.reserve(null)).toMatchObject({ kind: 'reserved' });
    expectConsistent();
  });

  it('is not woken by a put to a tube it does not watch', () => {
    const w = wideWaiter(WIDE_SESSION_TUBES + 1);
    producer.use('elsewhere');
    producer.put();
    expect(w.delegate.calls).toEqual([]);
    expectConsistent();
  });

  it('takes turns with the other wide sessions waiting on a tube; sessions watching few tubes are served first', () => {
    const a = wideWaiter(WIDE_SESSION_TUBES + 1);
    const b = wideWaiter(WIDE_SESSION_TUBES + 1);
    producer.use('t3');
    producer.put();
    producer.put();
    expect(a.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(b.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 2 }]);
    expect(a.reserve(null)).toEqual({ kind: 'waiting' });
    expect(b.reserve(null)).toEqual({ kind: 'waiting' });
    const [narrow] = waiters(1, 't3') as [Client];
    producer.put();
    producer.put();
    producer.put();
    expect(narrow.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 3 }]);
    // the turn carries over: b was not served last
    expect(a.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 4 }]);
    expect(b.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 5 }]);
    expectConsistent();
  });

  it('gets the best job when jobs become ready in several of its tubes at once', () => {
    producer.use('t1');
    producer.put({ priority: 5 });
    producer.use('t2');
    producer.put({ priority: 1 });
    h.engine.pauseTube('t1', 1000);
    h.engine.pauseTube('t2', 1000);
    const w = wideWaiter(WIDE_SESSION_TUBES + 1);
    h.advance(1000);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 2 }]);
    expectConsistent();
  });

  it('asleep (woken without reserving), stays woken-to-be across becoming wide and narrow again', () => {
    const s = h.open();
    expect(h.engine.sleep(s.session)).toBe(false);
    for (let i = 0; i <= WIDE_SESSION_TUBES; i++) s.watch(`t${i}`);
    expect(s.session.wide).toBe(true);
    producer.use(`t${WIDE_SESSION_TUBES}`);
    producer.put();
    expect(s.delegate.drain()).toEqual([{ kind: 'woken' }]);
    h.engine.delete(null, 1);
    expect(h.engine.sleep(s.session)).toBe(false);
    for (let i = 0; i <= WIDE_SESSION_TUBES; i++) s.ignore(`t${i}`);
    expect(s.session.wide).toBe(false);
    expect(h.engine.defaultTube.waiting.size).toBe(1);
    producer.use('default');
    producer.put();
    expect(s.delegate.drain()).toEqual([{ kind: 'woken' }]);
    expectConsistent();
  });

  it('waiting on a paused tube with a job, is served when the pause runs out at the scheduler\'s tick', () => {
    producer.use('t5');
    producer.put();
    h.engine.pauseTube('t5', 500);
    const w = wideWaiter(WIDE_SESSION_TUBES + 1);
    expect(w.delegate.calls).toEqual([]);
    h.advance(500);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expectConsistent();
  });

  it('asleep and becoming wide while a watched tube is paused with a job, is woken when the pause ends', () => {
    producer.use('t0');
    producer.put();
    h.engine.pauseTube('t0', 500);
    const s = h.open();
    s.watch('t0');
    expect(h.engine.sleep(s.session)).toBe(false);
    for (let i = 1; i <= WIDE_SESSION_TUBES; i++) s.watch(`t${i}`);
    expect(s.session.wide).toBe(true);
    expect(s.delegate.calls).toEqual([]);
    h.advance(500);
    expect(s.delegate.drain()).toEqual([{ kind: 'woken' }]);
    expectConsistent();
  });

  it('leaves every tube\'s list of wide watchers when it closes', () => {
    const w = wideWaiter(WIDE_SESSION_TUBES + 1);
    const t0 = h.engine.tube('t0')!;
    producer.watch('t0');
    expect(t0.wideWatchers.size).toBe(1);
    w.close();
    expect(t0.wideWatchers.size).toBe(0);
    expectConsistent();
  });
});
