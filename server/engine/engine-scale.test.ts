/**
 * Scale sanity checks. None of them measures time: they check results at sizes where a
 * per-operation scan of all tubes or jobs would show, and count the engine's heap operations
 * per command to show that the work does not grow with the number of tubes.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { IndexedHeap } from './heap.js';
import { Harness, T0, type Client } from './testing.js';

const TUBES = 10_000;
const JOBS_PER_TUBE = 10;

/** A small deterministic PRNG (LCG), so failures reproduce. */
function prng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x;
  };
}

const HEAP_METHODS = ['peek', 'push', 'pop', 'removeAt', 'update', 'at', 'forEach'] as const;

/** Counts every IndexedHeap method call (and `size` read) made while `fn` runs. */
function heapCalls(fn: () => void): number {
  const spies = [
    ...HEAP_METHODS.map((name) => vi.spyOn(IndexedHeap.prototype, name)),
    vi.spyOn(IndexedHeap.prototype, 'size', 'get'),
  ];
  try {
    fn();
    return spies.reduce((n, spy) => n + spy.mock.calls.length, 0);
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('100,000 jobs across 10,000 tubes with one waiting session', () => {
  let h: Harness;
  let producer: Client;
  let waiter: Client;
  const random = prng(42);
  /** Ready jobs by tube name: [priority, id]. */
  const readyByTube = new Map<string, [number, number][]>();
  let delayedCount = 0;

  beforeAll(() => {
    h = new Harness();
    producer = h.open();
    waiter = h.open();
    waiter.watch('target');
    waiter.ignore('default');
    expect(waiter.reserve(null)).toEqual({ kind: 'waiting' });
    for (let t = 0; t < TUBES; t++) {
      const name = `t${t}`;
      producer.use(name);
      const ready: [number, number][] = [];
      for (let j = 0; j < JOBS_PER_TUBE; j++) {
        const priority = random() % 2048;
        const delayed = j === JOBS_PER_TUBE - 1; // one delayed job per tube
        const job = producer.put({ priority, delayMs: delayed ? 1000 + (random() % 1000) : 0, ttrMs: 60_000, body: 'b' });
        if (delayed) delayedCount++;
        else ready.push([priority, job.id]);
      }
      readyByTube.set(name, ready);
    }
  });

  it('holds every job, and the waiter was never disturbed by puts to tubes it does not watch', () => {
    expect(h.engine.jobTotal).toBe(TUBES * JOBS_PER_TUBE);
    expect(h.engine.stats.totalJobs).toBe(TUBES * JOBS_PER_TUBE);
    expect(h.engine.delayedCount).toBe(delayedCount);
    expect(h.engine.stats.delayed).toBe(delayedCount);
    expect(h.engine.stats.ready).toBe(TUBES * (JOBS_PER_TUBE - 1));
    expect(h.engine.tubes().length).toBe(TUBES + 2); // default, target, t0..t9999
    expect(waiter.delegate.calls).toEqual([]);
    expect(waiter.session.waiting).toBe(true);
    expect(h.engine.nextDeadline()).toBeGreaterThanOrEqual(T0 + 1000);
    expect(h.problems(TUBES * JOBS_PER_TUBE)).toEqual([]);
  });

  it('each tube ready head is its smallest (priority, id)', () => {
    const wrong: string[] = [];
    for (const [name, ready] of readyByTube) {
      let best = ready[0]!;
      for (const r of ready) if (r[0] < best[0] || (r[0] === best[0] && r[1] < best[1])) best = r;
      if (h.engine.peekReady(h.engine.tube(name)!)?.id !== best[1]) wrong.push(name);
    }
    expect(wrong).toEqual([]);
  });

  it('does a bounded number of heap operations per command, whatever the number of tubes', () => {
    const worker = h.open();
    worker.watch('t5000');
    worker.ignore('default');
    const counts: Record<string, number> = {};
    let id = 0;
    producer.use('t123');
    counts['put ready'] = heapCalls(() => (id = producer.put({ priority: 7 }).id));
    counts['put delayed'] = heapCalls(() => producer.put({ delayMs: 500 }));
    counts['reserve'] = heapCalls(() => worker.reserveNow());
    counts['reserveJob'] = heapCalls(() => h.engine.reserveJob(worker.session, id));
    counts['touch'] = heapCalls(() => h.engine.touch(worker.session, id));
    counts['release delayed'] = heapCalls(() => h.engine.release(worker.session, id, 3, 100));
    counts['kickJob'] = heapCalls(() => h.engine.kickJob(id));
    h.engine.reserveJob(worker.session, id);
    counts['bury'] = heapCalls(() => h.engine.bury(worker.session, id, 0));
    counts['kick'] = heapCalls(() => h.engine.kick(h.engine.tube('t123')!, 1));
    counts['delete'] = heapCalls(() => h.engine.delete(worker.session, id));
    counts['pause'] = heapCalls(() => h.engine.pauseTube('t77', 10));
    counts['nextDeadline'] = heapCalls(() => h.engine.nextDeadline());
    counts['tick (one pause ends)'] = heapCalls(() => h.engine.tick(h.now() + 10));
    counts['tick (nothing due)'] = heapCalls(() => h.engine.tick(h.now() + 10));
    for (const [what, n] of Object.entries(counts)) expect({ what, n, bounded: n <= 40 }).toMatchObject({ what, bounded: true });
  });

  it('a put into the watched tube wakes the waiter with that job', () => {
    producer.use('target');
    let job = 0;
    const calls = heapCalls(() => (job = producer.put({ priority: 4_000_000_000 }).id));
    expect(calls).toBeLessThanOrEqual(40);
    expect(waiter.delegate.drain()).toEqual([{ kind: 'reserved', jobId: job }]);
    expect(h.engine.holderOf(h.engine.job(job)!)).toBe(waiter.session);
  });

  it('a session watching ten of the tubes gets their jobs in global (priority, id) order', () => {
    const names = Array.from({ length: 10 }, (_, i) => `t${i * 997}`);
    const worker = h.open();
    for (const name of names) worker.watch(name);
    worker.ignore('default');
    const expected = names
      .flatMap((name) => readyByTube.get(name)!)
      .sort((a, b) => a[0] - b[0] || a[1] - b[1])
      .map(([, id]) => id);
    const got: number[] = [];
    for (let outcome = worker.reserve(0); outcome.kind === 'reserved'; outcome = worker.reserve(0)) got.push(outcome.job.id);
    expect(got).toEqual(expected);
    worker.close();
  });

  it('all delayed jobs come due through budgeted ticks, and everything stays consistent', () => {
    const target = T0 + 2000;
    h.clock.set(target);
    let calls = 0;
    let before = h.engine.stats.delayed;
    while (h.engine.tick(target, 1000)) {
      calls++;
      expect(before - h.engine.stats.delayed).toBeLessThanOrEqual(1000);
      before = h.engine.stats.delayed;
    }
    expect(calls).toBeGreaterThanOrEqual(Math.floor(delayedCount / 1000));
    expect(h.engine.stats.delayed).toBe(0);
    expect(h.problems(TUBES * JOBS_PER_TUBE + 100)).toEqual([]);
  });
});

describe('many sessions', () => {
  it('10,000 waiting sessions are each served exactly once by 10,000 puts', () => {
    const h = new Harness();
    const producer = h.open();
    const ws = Array.from({ length: 10_000 }, () => {
      const w = h.open();
      expect(w.reserve(null).kind).toBe('waiting');
      return w;
    });
    expect(h.engine.stats.waiting).toBe(10_000);
    for (let i = 0; i < 10_000; i++) producer.put();
    const served = ws.map((w) => w.delegate.calls.length);
    expect(served.every((n) => n === 1)).toBe(true);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.stats.reserved).toBe(10_000);
    // close them all: 10,000 jobs go back to ready
    for (const w of ws) w.close();
    expect(h.engine.stats.ready).toBe(10_000);
    expect(h.engine.stats.currentConnections).toBe(1);
  });

  it('kickSome moves 10,000 buried jobs in slices, FIFO', () => {
    const h = new Harness();
    const c = h.open();
    const tube = h.engine.defaultTube;
    for (let i = 1; i <= 10_000; i++) {
      c.put();
      h.engine.reserveJob(c.session, i);
      h.engine.bury(c.session, i, 0);
    }
    const order: number[] = [];
    h.engine.events.on('job:changed', (e) => order.push(e.job.id));
    const slices: number[] = [];
    for (let n = h.engine.kickSome(tube, 'buried', 1000); n > 0; n = h.engine.kickSome(tube, 'buried', 1000)) slices.push(n);
    expect(slices).toEqual(Array<number>(10).fill(1000));
    expect(order).toEqual(Array.from({ length: 10_000 }, (_, i) => i + 1));
    expect(h.engine.stats.buried).toBe(0);
    expect(h.engine.stats.ready).toBe(10_000);
  });
});
