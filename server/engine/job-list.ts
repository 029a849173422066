/** What a JobList links through: the item's own neighbour fields (a Job's, records.ts). */
export interface Linked<T> {
  listPrev: T | null;
  listNext: T | null;
}

/**
 * A first-in, first-out list of jobs linked through the jobs themselves (beanstalkd's buried
 * list): append, remove from anywhere and read the head are all O(1), with no per-node allocation.
 * Generic over the item so that this file need not import the Job record, which holds lists
 * (types only: the compiled code is the same).
 */
export class JobList<Job extends Linked<Job>> {
  private head: Job | null = null;
  private tail: Job | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  first(): Job | undefined {
    return this.head ?? undefined;
  }

  last(): Job | undefined {
    return this.tail ?? undefined;
  }

  push(job: Job): void {
    job.listPrev = this.tail;
    job.listNext = null;
    if (this.tail === null) this.head = job;
    else this.tail.listNext = job;
    this.tail = job;
    this.count++;
  }

  /** Removes `job`, which the caller knows is in this list. */
  remove(job: Job): void {
    if (job.listPrev === null) this.head = job.listNext;
    else job.listPrev.listNext = job.listNext;
    if (job.listNext === null) this.tail = job.listPrev;
    else job.listNext.listPrev = job.listPrev;
    job.listPrev = null;
    job.listNext = null;
    this.count--;
  }

  /** Oldest first. */
  *values(): IterableIterator<Job> {
    for (let job = this.head; job !== null; job = job.listNext) yield job;
  }
}
