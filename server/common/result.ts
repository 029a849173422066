/** Why an operation a client asked for did not happen. */
export type FailureCode =
  | 'NOT_FOUND'
  | 'DRAINING'
  | 'OUT_OF_MEMORY'
  | 'INTERNAL_ERROR'
  | 'NOT_IGNORED'
  /** A body over the engine's `maxJobSize`. */
  | 'JOB_TOO_BIG'
  /** An edit of a job a worker holds (the dashboard's edit; the protocol never asks). */
  | 'JOB_RESERVED'
  /** A submit beyond its function's limit of queued jobs (NewJob.queueLimit: Gearman's `maxqueue`). */
  | 'QUEUE_FULL';

export type Result<T> = { ok: true; value: T } | { ok: false; code: FailureCode };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function fail<T>(code: FailureCode): Result<T> {
  return { ok: false, code };
}

/**
 * What a reserve produced, with the job as the layer hands it out (the engine's record, a door's
 * bytes). `waiting`: the client's delegate is told later.
 */
export type ReserveOutcome<J> =
  | { kind: 'reserved'; job: J }
  | { kind: 'deadline-soon' }
  | { kind: 'timed-out' }
  | { kind: 'waiting' };

// The outcomes without a job, made once: a worker that polls an empty queue (Gearman's GRAB_JOB) allocates nothing.
export const DEADLINE_SOON: ReserveOutcome<never> = Object.freeze({ kind: 'deadline-soon' });
export const TIMED_OUT: ReserveOutcome<never> = Object.freeze({ kind: 'timed-out' });
export const WAITING: ReserveOutcome<never> = Object.freeze({ kind: 'waiting' });
