import type { Job } from './job.js';

/**
 * Where the engine records changes that must survive a restart. Each method returns false when
 * the record cannot be written; the engine then leaves its state unchanged and reports failure.
 */
export interface Journal {
  /** A new job, with its full record. */
  put(job: Job): boolean;
  /** A job's state or counters changed (release with delay, bury, kick). */
  update(job: Job): boolean;
  /** The job is gone. */
  delete(job: Job): boolean;
}

/** No persistence: every write succeeds at once. */
export const nullJournal: Journal = {
  put: () => true,
  update: () => true,
  delete: () => true,
};
