import type { Job } from './records.js';
import type { TubePolicy } from '../../shared/policy.js';

/** A tube's own settings, which outlive the tube itself (kept in the binlog). */
export interface TubeSettings {
  /** Releases plus timeouts after which a job is buried instead (0: never, for this tube). */
  deadLetterAfter: number;
}

/**
 * Where the engine records changes that must survive a restart. The engine asks before it
 * changes anything: a false answer means the record cannot be written (no space, a failing
 * disk), and the engine then leaves its state as it was and reports the failure.
 */
export interface Journal {
  /** A new job, with its full record (state and deadline already set). False: the put fails. */
  put(job: Job): boolean;
  /** True when `count` state records can be written now; each is then written by `update`. */
  canUpdate(count: number): boolean;
  /** The job's state or counters changed; room was confirmed by `canUpdate`. */
  update(job: Job): void;
  /** The job is about to go. False: it cannot be recorded, so the job stays. */
  delete(job: Job): boolean;
  /** True when a full record with a tube name and body of these lengths can be written now. */
  canRewrite(tubeNameBytes: number, bodyBytes: number): boolean;
  /**
   * The job's full record again, after an edit or a move (room confirmed by canRewrite); the
   * lengths are those of the record it replaces.
   */
  rewrite(job: Job, oldTubeNameBytes: number, oldBodyBytes: number): void;
  /** A tube's settings changed (null: cleared). False: they cannot be recorded, so they stay as they were. */
  setTubeSettings(tube: string, settings: TubeSettings | null): boolean;
  /** A tube's policy changed (null: cleared). False: it cannot be recorded, so it stays as it was. */
  setTubePolicy(tube: string, policy: TubePolicy | null): boolean;
}

const recorded = (): boolean => true;
const nothingToDo = (): void => undefined;

/** No persistence: every write succeeds at once. */
export const nullJournal: Journal = {
  put: recorded,
  canUpdate: recorded,
  update: nothingToDo,
  delete: recorded,
  canRewrite: recorded,
  rewrite: nothingToDo,
  setTubeSettings: recorded,
  setTubePolicy: recorded,
};

/**
 * How far records have got: a front door holds back a reply until every record appended
 * before it is durable (written, or synced when the fsync policy asks), so no client is told
 * of a change that a crash could lose.
 */
export interface Durability {
  /** Records appended so far (a sequence number). */
  readonly appendedSeq: number;
  /** Records durable so far; equal to appendedSeq when nothing is in flight. */
  readonly durableSeq: number;
  /** Calls `fn` once durableSeq reaches `seq`. */
  whenDurable(seq: number, fn: () => void): void;
}

/** Without persistence every record is durable at once. */
export const immediateDurability: Durability = {
  appendedSeq: 0,
  durableSeq: 0,
  whenDurable: (_seq, fn) => fn(),
};
