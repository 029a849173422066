/**
 * Paged job lists for the dashboard (listJobs) and the heap walk behind them
 * (IndexedHeap.ordered): engine order, cursors that survive changes between pages, bad cursors,
 * reserved jobs across sessions, and the cost of a first page of a huge heap.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { IndexedHeap } from './heap.js';
import type { Job, JobState, Tube } from './records.js';
import type { JobPage } from '../common/job-page.js';
import { listJobs } from './job-pages.js';
import { Harness, T0, type Client } from './testing.js';
import { jobPriority, jobDeadlineAt, jobCounters, jobState } from './records.js';

/** mulberry32: a small seeded generator, so a failure replays. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(xs: T[], rnd: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

let h: Harness;
let c: Client;

beforeEach(() => {
  h = new Harness();
  c = h.open();
});

/** The sort key of a job in a state's list, compared lexicographically. */
function keyOf(state: JobState, job: Job): number[] {
  switch (state) {
    case 'ready':
      return [jobPriority(job), job.id];
    case 'delayed':
      return [jobDeadlineAt(job), job.id];
    case 'buried':
      return [jobCounters(job).buriedSeq];
    case 'reserved':
      return [job.id];
  }
}

function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Every job of `tube` in `state`, sorted as the engine orders them (from all jobs, not the tube's structures). */
function expectedOrder(tube: Tube, state: JobState): number[] {
  return [...h.engine.allJobs()]
    .filter((j) => j.tube === tube && jobState(j) === state)
    .sort((a, b) => compareKeys(keyOf(state, a), keyOf(state, b)))
    .map((j) => j.id);
}

/**
 * Follows `next` from the first page to the end; checks that every page but the last is full and
 * says there is more. `between` runs before each page after the first.
 */
function walk(tube: Tube, state: JobState, limit: number, between?: (last: Job) => void): { pages: JobPage<Job>[]; ids: number[] } {
  const pages: JobPage<Job>[] = [];
  let after: string | null = null;
  for (let guard = 0; ; guard++) {
    if (guard > 10_000) throw new Error(`walk of ${state} with limit ${limit} does not end`);
    const page = listJobs(h.engine, tube, state, limit, after);
    expect(page.jobs.length).toBeLessThanOrEqual(limit);
    pages.push(page);
    if (page.next === null) break;
    expect(page.jobs.length, `page ${guard} of ${state} says there is more`).toBe(limit);
    expect(typeof page.next).toBe('string');
    after = page.next;
    if (between !== undefined) between(page.jobs.at(-1)!);
  }
  return { pages, ids: pages.flatMap((p) => p.jobs.map((j) => j.id)) };
}

interface World {
  tube: Tube;
  workerA: Client;
  workerB: Client;
}

/**
 * 500 jobs in tube "jobs" with random priorities (many ties) and delays (many equal deadlines),
 * about a fifth buried in random order, some reserved by two workers; plus noise in "other".
 */
function build(seed: number, count = 500): World {
  const rnd = rng(seed);
  const int = (n: number): number => Math.floor(rnd() * n);
  const workerA = h.open();
  const workerB = h.open();
  for (let i = 0; i < count; i++) {
    c.use(rnd() < 0.9 ? 'jobs' : 'other');
    const priority = rnd() < 0.1 ? 4294967295 - int(3) : int(40);
    const delayMs = rnd() < 0.35 ? 1000 * (1 + int(12)) : 0;
    c.put({ priority, delayMs });
    if (i % 97 === 0) h.advance(1); // deadlines differ by more than the delay steps
  }
  const tube = h.engine.tube('jobs')!;
  const ready = shuffle(
    [...h.engine.allJobs()].filter((j) => jobState(j) === 'ready'),
    rnd,
  );
  for (const job of ready.slice(0, Math.floor(count / 5))) {
    expect(h.engine.reserveJob(workerA.session, job.id).ok).toBe(true);
    expect(h.engine.bury(workerA.session, job.id, int(50)).ok).toBe(true);
  }
  for (const job of ready.slice(Math.floor(count / 5), Math.floor(count / 5) + 40)) {
    const w = job.id % 2 === 0 ? workerA : workerB;
    expect(h.engine.reserveJob(w.session, job.id).ok).toBe(true);
  }
  expect(h.problems(count + 1)).toEqual([]);
  return { tube, workerA, workerB };
}

const STATES: readonly JobState[] = ['ready', 'delayed', 'buried', 'reserved'];

describe('listJobs: engine order', () => {
  for (const seed of [11, 12]) {
    it(`pages of every state concatenate to the engine's order, for every page size (seed ${seed})`, () => {
      const { tube } = build(seed);
      for (const state of STATES) {
        const expected = expectedOrder(tube, state);
        expect(expected.length, state).toBeGreaterThan(state === 'reserved' ? 20 : 80);
        for (const limit of [1, 2, 3, 7, 50, expected.length - 1, expected.length, expected.length + 1, 1000]) {
          const { pages, ids } = walk(tube, state, limit);
          expect(ids, `${state} limit ${limit}`).toEqual(expected);
          expect(pages.length, `${state} limit ${limit}`).toBe(Math.max(1, Math.ceil(expected.length / limit)));
        }
      }
    });
  }

  it('agrees with what the engine hands out: reserve order, delayed due order, kick order', () => {
    const { tube } = build(13);
    const readyPages = walk(tube, 'ready', 13).ids;
    const delayedPages = walk(tube, 'delayed', 13).ids;
    const buriedPages = walk(tube, 'buried', 13).ids;
    const w = h.open();
    w.watch('jobs');
    w.ignore('default');
    const reserved: number[] = [];
    for (let outcome = w.reserve(0); outcome.kind === 'reserved'; outcome = w.reserve(0)) reserved.push(outcome.job.id);
    expect(reserved).toEqual(readyPages);
    const due: number[] = [];
    h.engine.events.on('job:changed', (e) => {
      if (e.from === 'delayed' && e.job.tube === tube) due.push(e.job.id);
    });
    h.advance(60_000);
    expect(due).toEqual(delayedPages);
    expect(buriedPages[0]).toBe(h.engine.peekBuried(tube)!.id);
    const kicked: number[] = [];
    while (tube.buried.size > 0) {
      const first = h.engine.peekBuried(tube)!.id;
      expect(h.engine.kick(tube, 1)).toBe(1);
      kicked.push(first);
    }
    expect(kicked).toEqual(buriedPages);
  });

  it('an empty list is one empty page', () => {
    const tube = h.engine.defaultTube;
    for (const state of STATES) expect(listJobs(h.engine, tube, state, 10, null)).toEqual({ jobs: [], next: null });
  });

  it('lists only the given tube', () => {
    build(14, 200);
    const other = h.engine.tube('other')!;
    for (const state of STATES) {
      for (const job of walk(other, state, 4).pages.flatMap((p) => p.jobs)) {
        expect(job.tube).toBe(other);
        expect(jobState(job)).toBe(state);
      }
      expect(walk(other, state, 4).ids).toEqual(expectedOrder(other, state));
    }
  });
});

describe('listJobs: cursors across changes', () => {
  /**
   * Walks `state` while `mutate` changes the tube between pages. Then: no job is shown twice, keys
   * strictly increase across the whole walk, every job that was in the list from start to end is
   * shown, and every job that joined after the cursor at the time (and stayed) is shown too.
   */
  function walkWhileChanging(
    world: World,
    state: JobState,
    limit: number,
    seed: number,
    /** Changes the list; `gone` holds the jobs that left it, which must not be brought back (they could be shown twice then, rightly). */
    mutate: (rnd: () => number, cursor: number[], gone: ReadonlySet<number>) => { removed: number[]; added: Job[] },
  ): void {
    const rnd = rng(seed);
    const tube = world.tube;
    const initial = new Set(expectedOrder(tube, state));
    const removed = new Set<number>();
    const mustAppear = new Set<number>();
    let changes = 0;
    const { pages, ids } = walk(tube, state, limit, (last) => {
      const cursor = keyOf(state, last);
      const change = mutate(rnd, cursor, removed);
      for (const id of change.removed) {
        removed.add(id);
        mustAppear.delete(id);
      }
      for (const job of change.added) if (compareKeys(keyOf(state, job), cursor) > 0) mustAppear.add(job.id);
      changes += change.removed.length + change.added.length;
    });
    expect(changes).toBeGreaterThanOrEqual(Math.min(5, pages.length));
    expect(new Set(ids).size, 'no duplicates').toBe(ids.length);
    const shown = pages.flatMap((p) => p.jobs);
    for (let i = 1; i < shown.length; i++) {
      expect(compareKeys(keyOf(state, shown[i - 1]!), keyOf(state, shown[i]!)), `${state}: keys increase at ${i}`).toBeLessThan(0);
    }
    const shownSet = new Set(ids);
    const throughout = [...initial].filter((id) => !removed.has(id));
    expect(throughout.length).toBeGreaterThan(10);
    for (const id of throughout) expect(shownSet.has(id), `${state}: job ${id} was there throughout`).toBe(true);
    expect(mustAppear.size).toBeGreaterThan(0);
    for (const id of mustAppear) expect(shownSet.has(id), `${state}: job ${id} joined after the cursor`).toBe(true);
    expect(h.problems(h.engine.nextId)).toEqual([]);
  }

  /** A random member of the list, before or after the cursor (or the cursor job itself). */
  function victims(tube: Tube, state: JobState, rnd: () => number, n: number, except: ReadonlySet<number> = new Set()): Job[] {
    const all = [...h.engine.allJobs()].filter((j) => j.tube === tube && jobState(j) === state && !except.has(j.id));
    return shuffle(all, rnd).slice(0, n);
  }

  it('ready: deletes and puts on both sides of the cursor, the cursor job itself deleted', () => {
    const world = build(21);
    for (const limit of [1, 5, 17]) {
      walkWhileChanging(world, 'ready', limit, 100 + limit, (rnd, cursor) => {
        const removed: number[] = [];
        const cursorJob = h.engine.job(cursor[1]!);
        if (cursorJob !== undefined && rnd() < 0.3) {
          expect(h.engine.delete(null, cursorJob.id).ok).toBe(true);
          removed.push(cursorJob.id);
        }
        for (const job of victims(world.tube, 'ready', rnd, rnd() < 0.5 ? 1 : 0)) {
          expect(h.engine.delete(null, job.id).ok).toBe(true);
          removed.push(job.id);
        }
        const added: Job[] = [];
        c.use('jobs');
        if (rnd() < 0.7) added.push(c.put({ priority: Math.floor(rnd() * 45) }));
        return { removed, added };
      });
    }
  });

  it('delayed: deletes and new delayed jobs on both sides of the cursor', () => {
    const world = build(22);
    for (const limit of [1, 4, 9]) {
      walkWhileChanging(world, 'delayed', limit, 200 + limit, (rnd) => {
        const removed: number[] = [];
        for (const job of victims(world.tube, 'delayed', rnd, rnd() < 0.5 ? 1 : 0)) {
          expect(h.engine.delete(null, job.id).ok).toBe(true);
          removed.push(job.id);
        }
        const added: Job[] = [];
        c.use('jobs');
        if (rnd() < 0.7) added.push(c.put({ delayMs: 1000 * (1 + Math.floor(rnd() * 14)) }));
        return { removed, added };
      });
    }
  });

  it('buried: kicks and deletes anywhere, new burials at the end are still shown', () => {
    const world = build(23);
    const w = world.workerA;
    for (const limit of [1, 3, 8]) {
      walkWhileChanging(world, 'buried', limit, 300 + limit, (rnd, _cursor, gone) => {
        const removed: number[] = [];
        for (const job of victims(world.tube, 'buried', rnd, rnd() < 0.5 ? 1 : 0)) {
          if (rnd() < 0.5) expect(h.engine.delete(null, job.id).ok).toBe(true);
          else expect(h.engine.kickJob(job.id).ok).toBe(true);
          removed.push(job.id);
        }
        const added: Job[] = [];
        if (rnd() < 0.5) {
          const ready = victims(world.tube, 'ready', rnd, 1, new Set([...gone, ...removed]))[0];
          if (ready !== undefined) {
            expect(h.engine.reserveJob(w.session, ready.id).ok).toBe(true);
            expect(h.engine.bury(w.session, ready.id, 1).ok).toBe(true);
            added.push(ready);
          }
        }
        return { removed, added };
      });
    }
  });

  it('reserved: releases and new reservations on both sides of the cursor', () => {
    const world = build(24);
    for (const limit of [1, 3, 6]) {
      walkWhileChanging(world, 'reserved', limit, 400 + limit, (rnd, _cursor, gone) => {
        const removed: number[] = [];
        for (const job of victims(world.tube, 'reserved', rnd, rnd() < 0.5 ? 1 : 0)) {
          expect(h.engine.release(h.engine.holderOf(job)!, job.id, jobPriority(job), 0).ok).toBe(true);
          removed.push(job.id);
        }
        const added: Job[] = [];
        if (rnd() < 0.7) {
          const candidates = victims(world.tube, 'ready', rnd, 1, new Set([...gone, ...removed]));
          for (const job of candidates) {
            const w = rnd() < 0.5 ? world.workerA : world.workerB;
            expect(h.engine.reserveJob(w.session, job.id).ok).toBe(true);
            added.push(job);
          }
        }
        return { removed, added };
      });
    }
  });

  it('a cursor from a page stays valid after every job on that page is gone', () => {
    const { tube } = build(25, 200);
    for (const state of ['ready', 'delayed', 'buried'] as const) {
      const expected = expectedOrder(tube, state);
      const first = listJobs(h.engine, tube, state, 5, null);
      expect(first.jobs.map((j) => j.id)).toEqual(expected.slice(0, 5));
      for (const job of first.jobs) expect(h.engine.delete(null, job.id).ok).toBe(true);
      const second = listJobs(h.engine, tube, state, 5, first.next);
      expect(second.jobs.map((j) => j.id), state).toEqual(expected.slice(5, 10));
    }
  });
});

describe('listJobs: cursors that do not parse start from the beginning', () => {
  it('for every state', () => {
    const { tube } = build(31, 200);
    const bad = ['', 'abc', '1.2.3', '-5', ' 1', '1 ', '1e3', 'null', '.5', '5.', 'NaN', 'Infinity', '0x10', '1,2', '１'];
    for (const state of STATES) {
      const fresh = listJobs(h.engine, tube, state, 7, null);
      expect(fresh.jobs.length).toBe(7);
      for (const cursor of bad) {
        const page = listJobs(h.engine, tube, state, 7, cursor);
        expect(page.jobs.map((j) => j.id), `${state} after ${JSON.stringify(cursor)}`).toEqual(fresh.jobs.map((j) => j.id));
        expect(page.next).toBe(fresh.next);
      }
    }
  });
});

describe('listJobs: reserved jobs', () => {
  it('lists the reservations of two sessions together by id, only for the tube asked', () => {
    const a = h.open();
    const b = h.open();
    c.use('x');
    for (let i = 0; i < 12; i++) c.put(); // 1..12 in x
    c.use('y');
    for (let i = 0; i < 4; i++) c.put(); // 13..16 in y
    // a and b take jobs in an interleaved, non-sorted order from both tubes.
    for (const id of [9, 2, 13, 11, 5]) expect(h.engine.reserveJob(a.session, id).ok).toBe(true);
    for (const id of [14, 1, 12, 7, 3]) expect(h.engine.reserveJob(b.session, id).ok).toBe(true);
    const x = h.engine.tube('x')!;
    const y = h.engine.tube('y')!;
    for (const limit of [1, 2, 3, 8, 100]) {
      expect(walk(x, 'reserved', limit).ids, `limit ${limit}`).toEqual([1, 2, 3, 5, 7, 9, 11, 12]);
      expect(walk(y, 'reserved', limit).ids, `limit ${limit}`).toEqual([13, 14]);
    }
    const page = listJobs(h.engine, x, 'reserved', 3, null);
    expect(page.jobs.map((j) => h.engine.holderOf(j)!.id)).toEqual([b.id, a.id, b.id]);
    // a leaves: its jobs go back to ready; the next page carries on with b's.
    a.close();
    const rest = listJobs(h.engine, x, 'reserved', 10, page.next);
    expect(rest.jobs.map((j) => j.id)).toEqual([7, 12]);
    expect(rest.next).toBeNull();
    expect(walk(x, 'ready', 100).ids).toEqual([2, 4, 5, 6, 8, 9, 10, 11]);
  });
});

describe('listJobs: times with fractions of a millisecond', () => {
  it('delayed cursors work when deadlines are fractional (the system clock has sub-ms resolution)', () => {
    // The real clock is performance.timeOrigin + performance.now(): deadlines like 1700000001000.25.
    h.clock.set(T0 + 0.25);
    for (let i = 0; i < 6; i++) c.put({ delayMs: 1000 * (i + 1) });
    const tube = h.engine.defaultTube;
    const expected = expectedOrder(tube, 'delayed');
    expect(expected).toEqual([1, 2, 3, 4, 5, 6]);
    const first = listJobs(h.engine, tube, 'delayed', 2, null);
    expect(first.jobs.map((j) => j.id)).toEqual([1, 2]);
    expect(first.next).not.toBeNull();
    const second = listJobs(h.engine, tube, 'delayed', 2, first.next);
    expect(second.jobs.map((j) => j.id), `page after cursor ${first.next}`).toEqual([3, 4]);
  });
});

// ---- IndexedHeap.ordered ------------------------------------------------------------------------

interface Item {
  key: number;
  id: number;
  index: number;
}

const itemLess = (a: Item, b: Item): boolean => a.key < b.key || (a.key === b.key && a.id < b.id);
const byKey = (a: Item, b: Item): number => a.key - b.key || a.id - b.id;

function counted(): { heap: IndexedHeap<Item>; counts: { less: number; setIndex: number } } {
  const counts = { less: 0, setIndex: 0 };
  const heap = new IndexedHeap<Item>(
    (a, b) => {
      counts.less++;
      return itemLess(a, b);
    },
    (item, index) => {
      counts.setIndex++;
      item.index = index;
    },
  );
  return { heap, counts };
}

/** The heap's array and every item's recorded index, to show ordered() changes neither. */
function layout(heap: IndexedHeap<Item>): string {
  const out: string[] = [];
  for (let i = 0; i < heap.size; i++) out.push(`${heap.at(i)!.id}@${heap.at(i)!.index}`);
  return out.join(',');
}

describe('IndexedHeap.ordered', () => {
  it('returns nothing for an empty heap or a limit of 0 or less', () => {
    const { heap } = counted();
    expect(heap.ordered(10)).toEqual([]);
    heap.push({ key: 1, id: 1, index: -1 });
    expect(heap.ordered(0)).toEqual([]);
    expect(heap.ordered(-3)).toEqual([]);
    expect(heap.ordered(1).map((x) => x.id)).toEqual([1]);
  });

  for (const seed of [1, 2, 3, 4, 5, 6]) {
    it(`walks random heaps in sorted order, with and without a before predicate (seed ${seed})`, () => {
      const rnd = rng(seed);
      const { heap, counts } = counted();
      const live = new Set<Item>();
      const n = 1 + Math.floor(rnd() * 400);
      const keyRange = 1 + Math.floor(rnd() * (seed % 2 === 0 ? 10 : 100_000));
      for (let i = 0; i < n; i++) {
        const item = { key: Math.floor(rnd() * keyRange), id: i + 1, index: -1 };
        heap.push(item);
        live.add(item);
        // Some removals and key changes, so the heap is not just a sequence of pushes.
        if (rnd() < 0.2 && live.size > 0) {
          const victim = [...live][Math.floor(rnd() * live.size)]!;
          heap.removeAt(victim.index);
          live.delete(victim);
        }
        if (rnd() < 0.2 && live.size > 0) {
          const changed = [...live][Math.floor(rnd() * live.size)]!;
          changed.key = Math.floor(rnd() * keyRange);
          heap.update(changed.index);
        }
      }
      const sorted = [...live].sort(byKey);
      const before = layout(heap);
      const setIndexCalls = counts.setIndex;
      for (const limit of [1, 2, 5, 33, sorted.length - 1, sorted.length, sorted.length + 5]) {
        if (limit <= 0) continue;
        expect(heap.ordered(limit).map((x) => x.id), `limit ${limit}`).toEqual(sorted.slice(0, limit).map((x) => x.id));
        // A page after a cursor: everything up to and including a pivot is left out.
        for (const at of [0, Math.floor(sorted.length / 3), sorted.length - 1]) {
          const pivot = sorted[at]!;
          const after = heap.ordered(limit, (x) => !itemLess(pivot, x));
          expect(after.map((x) => x.id), `limit ${limit} after #${at}`).toEqual(sorted.slice(at + 1, at + 1 + limit).map((x) => x.id));
        }
        // A predicate that leaves out everything.
        expect(heap.ordered(limit, () => true)).toEqual([]);
      }
      expect(layout(heap)).toBe(before);
      expect(counts.setIndex).toBe(setIndexCalls);
      // Popping agrees too.
      const popped: number[] = [];
      for (let x = heap.pop(); x !== undefined; x = heap.pop()) popped.push(x.id);
      expect(popped).toEqual(sorted.map((x) => x.id));
    });
  }

  it('costs a few hundred comparisons for the first page of a 100,000-item heap', () => {
    for (const order of ['random', 'ascending', 'descending', 'equal keys'] as const) {
      const rnd = rng(7);
      const { heap, counts } = counted();
      const N = 100_000;
      for (let i = 0; i < N; i++) {
        const key = order === 'random' ? Math.floor(rnd() * 1e9) : order === 'ascending' ? i : order === 'descending' ? N - i : 5;
        heap.push({ key, id: i + 1, index: -1 });
      }
      counts.less = 0;
      const page = heap.ordered(50);
      expect(page.length).toBe(50);
      for (let i = 1; i < page.length; i++) expect(itemLess(page[i - 1]!, page[i]!)).toBe(true);
      expect(counts.less, order).toBeLessThan(2000);
      counts.less = 0;
      expect(heap.ordered(1).length).toBe(1);
      expect(counts.less, order).toBeLessThan(5);
      // A page after a cursor 1,000 items in costs in proportion to the items skipped, not to N.
      const pivot = heap.ordered(1000).at(-1)!;
      counts.less = 0;
      const next = heap.ordered(50, (x) => !itemLess(pivot, x));
      expect(next.length).toBe(50);
      expect(itemLess(pivot, next[0]!)).toBe(true);
      expect(counts.less, `${order} after 1000`).toBeLessThan(40_000);
    }
  });
});
