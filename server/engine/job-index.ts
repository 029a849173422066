import type { Job } from './job.js';

/**
 * Shards of the id index. A V8 Map holds at most 2^24 (16.7 M) entries and throws beyond that,
 * while a server with a large heap can hold many more jobs; with shards the index holds 16 times
 * as many, and growing one shard rehashes a sixteenth of the index, not all of it at once (a
 * rehash briefly needs the old and the new table, which matters near the heap limit).
 */
/** A power of two (see shardOf). */
const SHARDS = 16;

/** Jobs by id, sharded by the low bits of the id. */
export class JobIndex {
  private readonly shards: Map<number, Job>[] = Array.from({ length: SHARDS }, () => new Map());
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(id: number): Job | undefined {
    return this.shardOf(id).get(id);
  }

  set(id: number, job: Job): void {
    const shard = this.shardOf(id);
    const before = shard.size;
    shard.set(id, job);
    this.count += shard.size - before;
  }

  delete(id: number): boolean {
    const deleted = this.shardOf(id).delete(id);
    if (deleted) this.count--;
    return deleted;
  }

  /**
   * The id's shard. `&` takes the low bits of any integer id up to 2^53 and maps every other
   * number a lookup may bring (-1 for an id too large to exist, NaN) to a shard too, where it
   * is simply not found.
   */
  private shardOf(id: number): Map<number, Job> {
    return this.shards[id & (SHARDS - 1)]!;
  }

  /**
   * Every job, shard by shard. Like a Map's iterator it stays valid while jobs are added and
   * removed (compaction walks it across many turns of the event loop).
   */
  *values(): IterableIterator<Job> {
    for (const shard of this.shards) yield* shard.values();
  }
}
