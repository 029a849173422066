import type { Job } from './records.js';

/** Slots per page: 2^PAGE_BITS. */
const PAGE_BITS = 10;
const PAGE_SLOTS = 1 << PAGE_BITS;
const SLOT_MASK = PAGE_SLOTS - 1;
/**
 * A page the id counter has passed moves its jobs to the sparse part once fewer than this many
 * are left: a page costs 8 bytes a slot, so at a quarter full its jobs cost about what a Map
 * entry does, and a few jobs that stay for months cannot each hold a page.
 */
const SPARSE_BELOW = PAGE_SLOTS / 4;
/**
 * Shards of the sparse part. A V8 Map holds at most 2^24 (16.7 M) entries and throws beyond
 * that, while a server with a large heap can hold many more jobs; with shards it holds 16 times
 * as many, and growing one shard rehashes a sixteenth of it at a time. A power of two (shardOf).
 */
const SHARDS = 16;

/** Up to PAGE_SLOTS consecutive ids; `retired` once its jobs moved to the sparse part. */
interface Page {
  readonly slots: (Job | undefined)[];
  live: number;
  retired: boolean;
}

/**
 * Jobs by id. Why pages: ids are handed out in order, so the jobs of a busy server sit on a few
 * dense ranges, and an array slot per id is both faster to fill than a hash table (a put-heavy
 * load spent 8% of its time growing Maps) and smaller (8 bytes a job, not about 30). Ids that
 * are left alone in old ranges (a job buried for a week, sparse ids after a restart) go to
 * sharded Maps instead, so memory stays bounded by the jobs, not by the ids ever issued.
 */
export class JobIndex {
  /** Pages by page number, in creation order, which is ascending (see `set`). */
  private readonly pages = new Map<number, Page>();
  /** The highest page number made so far: the page the next ids go to. */
  private frontier = -1;
  /** That page, kept at hand: a busy server's jobs are mostly on it (no Map lookup for them). */
  private frontierPage: Page | undefined = undefined;
  private readonly sparse: Map<number, Job>[] = Array.from({ length: SHARDS }, () => new Map());
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The page of page number `pageNo`, if there is one. */
  private pageOf(pageNo: number): Page | undefined {
    return pageNo === this.frontier ? this.frontierPage : this.pages.get(pageNo);
  }

  get(id: number): Job | undefined {
    const page = this.pageOf(Math.floor(id / PAGE_SLOTS));
    // `& SLOT_MASK` takes the low bits of any integer id up to 2^53 (ToInt32 is modulo 2^32);
    // the id check turns away a number that is not an id (1.5 would find job 1's slot).
    if (page !== undefined) {
      const job = page.slots[id & SLOT_MASK];
      return job !== undefined && job.id === id ? job : undefined;
    }
    return this.shardOf(id).get(id);
  }

  set(id: number, job: Job): void {
    const pageNo = Math.floor(id / PAGE_SLOTS);
    let page = this.pageOf(pageNo);
    if (page === undefined && pageNo > this.frontier) {
      const passedNo = this.frontier;
      const passed = this.frontierPage;
      this.frontier = pageNo;
      page = { slots: new Array<Job | undefined>(PAGE_SLOTS), live: 0, retired: false };
      this.frontierPage = page;
      this.pages.set(pageNo, page);
      if (passed !== undefined && passed.live < SPARSE_BELOW) this.retire(passed, passedNo);
    }
    if (page === undefined) {
      const shard = this.shardOf(id);
      const before = shard.size;
      shard.set(id, job);
      this.count += shard.size - before;
      return;
    }
    const slot = id & SLOT_MASK;
    if (page.slots[slot] === undefined) {
      page.live++;
      this.count++;
    }
    page.slots[slot] = job;
  }

  delete(id: number): boolean {
    const pageNo = Math.floor(id / PAGE_SLOTS);
    const page = this.pageOf(pageNo);
    if (page === undefined) {
      const deleted = this.shardOf(id).delete(id);
      if (deleted) this.count--;
      return deleted;
    }
    const slot = id & SLOT_MASK;
    if (page.slots[slot]?.id !== id) return false;
    page.slots[slot] = undefined;
    page.live--;
    this.count--;
    if (pageNo !== this.frontier && page.live < SPARSE_BELOW) this.retire(page, pageNo);
    return true;
  }

  /**
   * Every job. Like a Map's iterator it stays valid while jobs are added and removed (compaction
   * walks it across many turns of the event loop): each job present throughout is visited once,
   * a job removed before its turn is not, and one added meanwhile may or may not be.
   */
  *values(): IterableIterator<Job> {
    // How far this walk got through each page, so the jobs of a page retired meanwhile are
    // visited in the sparse part only if the walk had not passed them yet.
    const reached = new Map<number, number>();
    for (const [pageNo, page] of this.pages) {
      let slot = 0;
      for (; slot < PAGE_SLOTS && !page.retired; slot++) {
        const job = page.slots[slot];
        if (job !== undefined) yield job;
      }
      reached.set(pageNo, slot);
    }
    for (const shard of this.sparse) {
      for (const job of shard.values()) {
        const passed = reached.get(Math.floor(job.id / PAGE_SLOTS));
        if (passed === undefined || (job.id & SLOT_MASK) >= passed) yield job;
      }
    }
  }

  /** Moves a page's jobs to the sparse part and drops the page. */
  private retire(page: Page, pageNo: number): void {
    this.pages.delete(pageNo);
    page.retired = true;
    for (let slot = 0; slot < PAGE_SLOTS && page.live > 0; slot++) {
      const job = page.slots[slot];
      if (job === undefined) continue;
      page.slots[slot] = undefined;
      page.live--;
      this.shardOf(job.id).set(job.id, job);
    }
  }

  /**
   * The id's shard. `&` takes the low bits of any integer id up to 2^53 and maps every other
   * number a lookup may bring (-1 for an id too large to exist, NaN) to a shard too, where it
   * is simply not found.
   */
  private shardOf(id: number): Map<number, Job> {
    return this.sparse[id & (SHARDS - 1)]!;
  }
}
