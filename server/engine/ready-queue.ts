import { IndexedHeap, setHeapIndex } from './heap.js';
import { JobList, type Linked } from './job-list.js';

/** What a ReadyQueue orders by and keeps its place in: a Job's fields (records.ts). */
export interface Ranked<T> extends Linked<T> {
  readonly id: number;
  /** The priority minus its bias: compares like the priority. */
  readonly rank: number;
  heapIndex: number;
}

/** Ready order: priority, then id. */
export function readyLess<T extends Ranked<T>>(a: T, b: T): boolean {
  return a.rank < b.rank || (a.rank === b.rank && a.id < b.id);
}

/** `heapIndex` of a job that sits in the sorted run rather than in the heap. */
const IN_RUN = -2;

/**
 * A tube's ready jobs in (priority, id) order.
 *
 * Why not one heap: almost every job arrives in that order already (one priority, ids that only
 * grow: every Gearman job of a priority, most beanstalkd puts), and a heap makes each of them pay
 * for order it already has: taking the first of 100,000 jobs sifts through ~17 levels of cold
 * cache lines, a tenth of a worker drain's server time. So a job that sorts after the last of
 * the run is appended to a linked run (O(1) append, first and removal, through the job's own
 * list links, free while a job is ready); any other job (a more urgent put, a release, a kick)
 * goes to a heap. The first job is the smaller of the run's head and the heap's top.
 * Generic over the job so that this file need not import the Job record, whose tube holds a
 * ReadyQueue (types only: the compiled code is the same).
 */
export class ReadyQueue<Job extends Ranked<Job>> {
  private readonly heap = new IndexedHeap<Job>(readyLess, setHeapIndex);
  private readonly run = new JobList<Job>();

  get size(): number {
    return this.heap.size + this.run.size;
  }

  peek(): Job | undefined {
    const fromRun = this.run.first();
    const fromHeap = this.heap.peek();
    if (fromRun === undefined) return fromHeap;
    if (fromHeap === undefined) return fromRun;
    return readyLess(fromHeap, fromRun) ? fromHeap : fromRun;
  }

  push(job: Job): void {
    const last = this.run.last();
    if (last === undefined || readyLess(last, job)) {
      this.run.push(job);
      job.heapIndex = IN_RUN;
    } else {
      this.heap.push(job);
    }
  }

  /** Removes `job`, which the caller knows is ready in this queue. */
  remove(job: Job): void {
    if (job.heapIndex === IN_RUN) {
      this.run.remove(job);
      job.heapIndex = -1;
    } else {
      this.heap.removeAt(job.heapIndex);
    }
  }

  /**
   * Up to `limit` jobs in order, leaving out the leading ones for which `before` is true (a page
   * after a cursor): the heap's best-first walk merged with the run, which is already sorted.
   */
  ordered(limit: number, before: (job: Job) => boolean = () => false): Job[] {
    const fromHeap = this.heap.ordered(limit, before);
    const out: Job[] = [];
    let r = this.run.first() ?? null;
    while (r !== null && before(r)) r = r.listNext;
    let h = 0;
    while (out.length < limit) {
      const x = fromHeap[h];
      if (r === null && x === undefined) break;
      if (r !== null && (x === undefined || readyLess(r, x))) {
        out.push(r);
        r = r.listNext;
      } else {
        out.push(x!);
        h++;
      }
    }
    return out;
  }

  /** Visits every job, in no particular order. */
  forEach(fn: (job: Job) => void): void {
    this.heap.forEach(fn);
    for (const job of this.run.values()) fn(job);
  }

  /** For invariant checks: whether the run is in order, as `push` promises. */
  runIsSorted(): boolean {
    let prev: Job | null = null;
    for (const job of this.run.values()) {
      if (prev !== null && !readyLess(prev, job)) return false;
      prev = job;
    }
    return true;
  }
}
