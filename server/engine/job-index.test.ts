import { describe, expect, it } from 'vitest';
import { JobIndex } from './job-index.js';
import type { Job } from './records.js';

/** Index entries only need an identity here. */
const job = (id: number): Job => ({ id }) as Job;

describe('JobIndex', () => {
  it('finds, replaces and deletes by id across shards, counting each id once', () => {
    const index = new JobIndex();
    for (let id = 1; id <= 100; id++) index.set(id, job(id));
    expect(index.size).toBe(100);
    const replacement = job(7);
    index.set(7, replacement);
    expect(index.size).toBe(100);
    expect(index.get(7)).toBe(replacement);
    expect(index.get(2 ** 40 + 3)).toBeUndefined();
    // Lookups of ids that cannot exist (the protocol carries ids beyond 2^53 as -1) find nothing.
    for (const id of [-1, 0, 2 ** 53, Number.NaN, 1.5, 7.25]) expect(index.get(id)).toBeUndefined();
    expect(index.delete(1.5)).toBe(false);
    index.set(2 ** 52 + 5, job(2 ** 52 + 5));
    expect(index.get(2 ** 52 + 5)?.id).toBe(2 ** 52 + 5);
    index.delete(2 ** 52 + 5);
    expect(index.delete(7)).toBe(true);
    expect(index.delete(7)).toBe(false);
    expect(index.size).toBe(99);
    expect(index.get(7)).toBeUndefined();
    expect([...index.values()].map((j) => j.id).sort((a, b) => a - b)).toEqual([...Array(100).keys()].map((i) => i + 1).filter((id) => id !== 7));
  });

  it('keeps iterating while jobs come and go, like a Map iterator', () => {
    const index = new JobIndex();
    for (let id = 1; id <= 64; id++) index.set(id, job(id));
    const visits: number[] = [];
    const deleted = new Set<number>();
    for (const j of index.values()) {
      visits.push(j.id);
      // Every visit deletes one job not visited yet and adds a new one.
      const victim = [...index.values()].find((k) => !visits.includes(k.id) && k.id <= 64);
      if (victim !== undefined) {
        index.delete(victim.id);
        deleted.add(victim.id);
      }
      if (j.id <= 64) index.set(1000 + j.id, job(1000 + j.id));
    }
    const original = visits.filter((id) => id <= 64);
    // Each job present from the start is visited once, unless it was deleted before its turn.
    expect(new Set(visits).size).toBe(visits.length);
    expect(original.length + deleted.size).toBe(64);
    for (const id of deleted) expect(visits).not.toContain(id);
  });
});

describe('JobIndex pages and the sparse part', () => {
  it('moves the few jobs left in old ranges to the sparse part and still finds every one', () => {
    const index = new JobIndex();
    const kept = new Set<number>();
    for (let id = 1; id <= 10_000; id++) {
      index.set(id, job(id));
      // Everything but every 100th job is deleted soon after its put, as a busy server does.
      if (id > 50 && (id - 50) % 100 !== 0) index.delete(id - 50);
      else if (id > 50) kept.add(id - 50);
    }
    for (let id = 9_951; id <= 10_000; id++) kept.add(id);
    expect(index.size).toBe(kept.size);
    for (let id = 1; id <= 10_000; id++) expect(index.get(id)?.id).toBe(kept.has(id) ? id : undefined);
    expect([...index.values()].map((j) => j.id).sort((a, b) => a - b)).toEqual([...kept].sort((a, b) => a - b));
    // Deleting from the sparse part works as from a page.
    expect(index.delete(100)).toBe(true);
    expect(index.get(100)).toBeUndefined();
    expect(index.delete(100)).toBe(false);
  });

  it('takes sparse ids (a restart after long uptime) without a page each', () => {
    const index = new JobIndex();
    const ids = Array.from({ length: 2000 }, (_, i) => 1 + i * 5000);
    for (const id of ids) index.set(id, job(id));
    for (const id of ids) expect(index.get(id)?.id).toBe(id);
    expect(index.size).toBe(ids.length);
    // Only the newest range keeps a page: every other one went to the sparse part.
    const pages = (index as unknown as { pages: Map<number, unknown> }).pages;
    expect(pages.size).toBe(1);
  });

  it('visits each job once while pages retire under a walk that spans many turns', () => {
    const index = new JobIndex();
    for (let id = 1; id <= 5000; id++) index.set(id, job(id));
    const visits: number[] = [];
    let next = 5001;
    const gone = new Set<number>();
    for (const j of index.values()) {
      visits.push(j.id);
      // Drains the oldest jobs ahead of the walk (retiring their pages half-walked) and adds new ones.
      for (let k = 0; k < 3; k++) {
        const victim = j.id + 1 + k * 7;
        if (victim <= 5000 && (victim % 5 !== 0) && index.delete(victim)) gone.add(victim);
      }
      if (j.id <= 5000) index.set(next, job(next++));
    }
    expect(new Set(visits).size).toBe(visits.length);
    const visited = new Set(visits);
    for (let id = 1; id <= 5000; id++) expect(visited.has(id)).toBe(!gone.has(id));
  });
});
