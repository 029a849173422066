// What the engine is made with, and what callers ask of it: options, a put, a kick, an edit.
import type { Clock } from './clock.js';
import type { Journal } from './journal.js';
import type { Session, Tube } from './records.js';

/** The engine's clock, journal and limits. */
export interface EngineOptions {
  clock: Clock;
  journal?: Journal;
  /** Largest body in bytes (`-z`); a put or edit beyond it fails with JOB_TOO_BIG. */
  maxJobSize?: number;
  /**
   * What one job costs on the heap in the record budget (default JOB_RECORD_HEAP_BYTES); a
   * front door that keeps state of its own per job (Gearman's unique ids and waiting clients)
   * says how much more.
   */
  jobRecordBytes?: number;
  /** Budget in bytes for all job bodies together; a put beyond it fails with OUT_OF_MEMORY. */
  maxJobBytes?: number;
  /**
   * Budget in bytes for the engine's job and tube records on the V8 heap, as counted by
   * `recordHeapBytes`; a put (or a new tube) beyond it fails with OUT_OF_MEMORY. Its owner
   * derives it from the heap limit, so the process never dies of heap exhaustion.
   */
  maxRecordHeapBytes?: number;
  /**
   * The dead-letter rule (`--dead-letter-after N`): the N-th release or TTR timeout of a job since
   * it was put or last kicked buries it instead of making it ready again. 0 (the default): off.
   * A tube's own setting (setTubeSettings) overrides it.
   */
  deadLetterAfter?: number;
  /** Events in the shared job history ring (DEFAULT_HISTORY_EVENTS; 0: no history). */
  historyEvents?: number;
  /**
   * Gearman's job retries (`--gearman-job-retries N`): a reserved job whose holder disconnects,
   * or whose hold runs out, for the N-th time is dropped (its watchers are told it ended) instead
   * of made ready again. Every reserve of such a job ends in a result or a failure, so the N-th
   * failure is the one at its N-th reserve. 0 (the default): retried for ever.
   */
  dropAfterFailures?: number;
  /** Watched tubes beyond which a session is wide (WIDE_SESSION_TUBES; tests lower it). */
  wideSessionTubes?: number;
  /** A number in [0, 1) for the timeout backoff's jitter (Math.random; tests pass their own). */
  random?: () => number;
}

/** What a put needs; durations in milliseconds. */
export interface PutRequest {
  tube: Tube;
  priority: number;
  delayMs: number;
  ttrMs: number;
  body: Buffer;
  /**
   * True when the caller gives up `body`'s memory (a buffer it assembled for this job alone), so
   * the store may keep it instead of copying it. False for a view of shared memory.
   */
  bodyOwned?: boolean;
  /** An id taken earlier with `allocateJobId` (the protocol takes it before the body arrives). */
  id?: number;
  /** The client putting it, for the job's history (none: the dashboard). */
  by?: Session;
  /**
   * Kept in memory only, never journaled: a job that cannot outlive its submitter (a Gearman
   * foreground job), so a restart must not bring it back.
   */
  transient?: boolean;
}

export type KickKind = 'buried' | 'delayed';

/** What an operator may change in a job that no worker holds; durations in milliseconds. */
export interface JobEdit {
  body?: Buffer;
  priority?: number;
  ttrMs?: number;
  /** Ready or delayed jobs become delayed by this much (0: ready now); a buried job keeps it for later. */
  delayMs?: number;
  /** Move to this tube (created if needed), keeping id, state, priority and counters. */
  tube?: string;
}

/** What an edit changed besides the tube, for the job's history: "body, priority" (empty for a move alone). */
export function editedFields(edit: JobEdit, moving: boolean): string {
  const fields: string[] = [];
  if (edit.body !== undefined) fields.push('body');
  if (edit.priority !== undefined) fields.push('priority');
  if (edit.ttrMs !== undefined) fields.push('ttr');
  if (edit.delayMs !== undefined) fields.push('delay');
  return fields.length === 0 && !moving ? 'nothing' : fields.join(', ');
}
