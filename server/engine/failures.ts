import { BURY_CAUSE_CODE, type Job, type JobState, strike } from './records.js';
import type { JobHistory } from './history.js';
import type { Journal } from './journal.js';
import type { JobQueues } from './queues.js';

/** What the failure rules need of the engine: a job's journal, and dropping a job. */
export interface FailureHost {
  journalOf(job: Job): Journal;
  /** Deletes `job` (journaled already), telling its watchers. */
  drop(job: Job, from: JobState): void;
}

/**
 * What a failed reservation leads to: the dead-letter rule (`--dead-letter-after`, or a tube's
 * own setting) buries a job at its N-th release or timeout; Gearman's retry limit
 * (`--gearman-job-retries`) drops a job whose holder failed it N times.
 */
export class FailureRules {
  constructor(
    private readonly host: FailureHost,
    private readonly queues: JobQueues,
    private readonly history: JobHistory,
    /** 0: retried for ever. */
    private readonly dropAfterFailures: number,
  ) {}

  /**
   * Counts a release or a timeout against the dead-letter rule; true when it reaches the tube's
   * limit, so the job is to be buried instead of made ready.
   */
  strike(job: Job): boolean {
    const strikes = strike(job);
    const limit = job.tube.deadLetterAfter;
    return limit > 0 && strikes >= limit;
  }

  /**
   * A job that just left its holder (`why`) has failed as often as dropAfterFailures allows: it
   * is dropped (true). A drop the journal cannot record leaves the job to be made ready (false).
   */
  failedTooOften(job: Job, now: number, why: 'disconnect' | 'timeout'): boolean {
    if (this.dropAfterFailures === 0 || job.reserves < this.dropAfterFailures) return false;
    if (!this.host.journalOf(job).delete(job)) return false;
    this.history.record(job.id, now, 'retries-exhausted', 0, '', `${job.reserves} ${why}`);
    this.host.drop(job, 'reserved');
    return true;
  }

  /** The dead-letter rule buries a reserved job at its release or timeout. */
  deadLetter(job: Job, now: number, at: 'release' | 'timeout'): void {
    this.history.record(job.id, now, 'dead-letter', 0, '', at);
    this.queues.bury(job, 'reserved', BURY_CAUSE_CODE[at === 'release' ? 'dead-letter-release' : 'dead-letter-timeout']);
  }
}
