import { describe, expect, it } from 'vitest';
import { JobIndex } from './job-index.js';
import type { Job } from './job.js';

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
    for (const id of [-1, 0, 2 ** 53, Number.NaN]) expect(index.get(id)).toBeUndefined();
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
