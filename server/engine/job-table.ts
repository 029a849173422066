import { BodyStore } from './body-store.js';
import type { Job } from './records.js';
import { JobIndex } from './job-index.js';

/** Jobs looked at per put while bodies are being compacted. */
const COMPACTION_STEPS = 8;

/**
 * Every job by id, with the store of their bodies and the next id to hand out. A put places the
 * body and runs a few steps of compaction while the store holds more dead than live bytes.
 */
export class JobTable {
  private readonly byId = new JobIndex();
  readonly bodies = new BodyStore();
  /** Walks the jobs while the body store is being compacted (null when it is not). */
  private compacting: IterableIterator<Job> | null = null;
  private next = 1;

  get(id: number): Job | undefined {
    return this.byId.get(id);
  }

  add(job: Job): void {
    this.byId.set(job.id, job);
  }

  /** Forgets `job` and frees its body. */
  remove(job: Job): void {
    this.byId.delete(job.id);
    this.bodies.release(job);
  }

  values(): IterableIterator<Job> {
    return this.byId.values();
  }

  get size(): number {
    return this.byId.size;
  }

  /** The id the next put will get. */
  get nextId(): number {
    return this.next;
  }

  /** Takes the next job id. */
  allocateId(): number {
    return this.next++;
  }

  /** Later ids are above `id` (recovery). */
  raiseNextId(id: number): void {
    if (id > this.next) this.next = id;
  }

  /**
   * A few steps of body compaction, run by each put while the store holds more dead than live
   * bytes: live bodies in mostly dead slabs move to the current slab, so a few long-lived jobs
   * cannot pin many slabs. One pass over the jobs per trigger; amortised O(1) per put.
   */
  compactSome(): void {
    if (this.compacting === null) {
      if (!this.bodies.needsCompaction) return;
      this.compacting = this.byId.values();
    }
    for (let n = 0; n < COMPACTION_STEPS; n++) {
      const next = this.compacting.next();
      if (next.done === true) {
        this.compacting = null;
        return;
      }
      if (this.bodies.isSparse(next.value)) this.bodies.move(next.value);
    }
  }
}
