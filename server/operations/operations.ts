/**
 * The operations every front door calls (beanstalk, admin API, metrics, Gearman): plain values
 * in (tube names, milliseconds, byte buffers), plain snapshots out, never the store's live
 * objects. Whatever is a rule and not wire syntax lives behind this interface: the TTR floor,
 * the job-size limit, tube lifecycle, bulk work done in slices.
 *
 * A store that answers asynchronously (a database) returns promises; the in-memory store
 * returns values and creates none. A door handles both with `isPending` and keeps its replies
 * in command order either way.
 */
import type { TubePolicy, TubePolicyState } from '../../shared/policy.js';
import type { BuryCause } from '../../shared/bury-cause.js';
import type { JobState } from '../../shared/dto.js';
import type { HistoryActor, JobHistoryDto } from '../../shared/history.js';
import type { Durability, TubeSettings } from '../engine/journal.js';
import type { JobBasics } from '../common/job-basics.js';
import type { JobPage } from '../common/job-page.js';
import type { FailureCode, ReserveOutcome, Result } from '../common/result.js';
import type { CountedCommand } from '../engine/stats.js';
import type { JobUpdate, JobWatcher } from '../engine/watchers.js';

export type { BuryCause, Durability, JobPage, JobState, FailureCode, ReserveOutcome, Result, JobUpdate, JobWatcher, TubeSettings };

/** A value now, or later when the store is asynchronous. */
export type Pending<T> = T | Promise<T>;

/** True when the store answered with a promise (only an asynchronous store does). */
export function isPending<T>(value: Pending<T>): value is Promise<T> {
  return value instanceof Promise;
}

/** `fn(value)` now, or once the promise settles: code that must not wait when the store does not. */
export function whenReady<T, R>(value: Pending<T>, fn: (value: T) => Pending<R>): Pending<R> {
  return isPending(value) ? value.then(fn) : fn(value);
}

/** The states a bulk action (kick, clear, move) can act on. */
export type QueuedState = 'ready' | 'delayed' | 'buried';

/**
 * A job's id and where its body's bytes are: `bodyBuf[bodyOffset, bodyOffset + bodyLength)`.
 * Valid until the next operation: a door copies the bytes into its reply at once. (The
 * in-memory store hands its job record behind this read-only shape, so a reply costs no
 * allocation; a door must not rely on anything else about it.)
 */
export interface JobBytes {
  readonly id: number;
  /** The job's tube (a Gearman function). */
  readonly tubeName: string;
  readonly bodyBuf: Buffer;
  readonly bodyOffset: number;
  readonly bodyLength: number;
  /**
   * Kept in memory only (NewJob.transient): a Gearman foreground job. Said by the in-memory
   * store, from its job record; a cluster's registry asks its database instead.
   */
  readonly transient?: boolean;
}

/**
 * What a put or a submit answers with: the new job's id. A store answers with whatever record it
 * has that says it (the engine's job record, a cluster's JobBytes): no object made to answer.
 */
export interface MadeJob {
  readonly id: number;
}

/** A tube's name (the in-memory store answers with its tube record behind this read-only shape). */
export interface TubeName {
  readonly name: string;
}

/** Everything about a job except its body. Times are epoch ms; durations ms. */
export interface JobView extends JobBasics {
  /** When a delay ends or a reservation runs out (epoch ms; Infinity: held without a TTR); 0 otherwise. */
  deadlineAt: number;
  /** Binlog segment holding the job (0 without persistence, -1 for a transient job). */
  file: number;
  /** The connection holding it (0 unless reserved, or held through another cluster node). */
  reservedBy: number;
  /** Cluster mode: the node whose client holds it (0 unless reserved; always 0 in memory). */
  holderNode: number;
  /** Kept in memory only (NewJob.transient): a Gearman foreground job. */
  transient: boolean;
  /** Why it is buried (meaningful while it is). */
  buryCause: BuryCause;
  bodyLength: number;
  /**
   * Changes whenever the body is replaced (and may change when the store moves it): a watcher
   * compares it to tell a new body without reading the bytes.
   */
  bodyStamp: number;
}

/** A job with its body (a view: read it before the next operation). */
export interface JobSnapshot extends JobView {
  body: Buffer;
}

/** A tube's counts. */
export interface TubeCounts {
  name: string;
  /** Differs between a tube and one of the same name made after it was removed. */
  serial: number;
  /** Ready jobs with priority below URGENT_BELOW. */
  urgent: number;
  ready: number;
  reserved: number;
  delayed: number;
  buried: number;
  /** Jobs ever put into this tube. */
  totalJobs: number;
  using: number;
  watching: number;
  /** Sessions blocked in reserve that watch it. */
  waiting: number;
  /** Deletes and pauses done in this tube. */
  deletes: number;
  pauses: number;
  /** Length of the current pause in ms (0: not paused) and when it ends (epoch ms). */
  pauseMs: number;
  unpauseAt: number;
  /** How many times a job entered or left each state here (ready, reserved, delayed, buried). */
  stateChanges: readonly [number, number, number, number];
  /** When the ready job a worker would get next was put (epoch ms; 0: none ready): how long the queue's head has waited. */
  nextReadyCreatedAt: number;
  /** The dead-letter limit in force here (0: off): the tube's own setting or the server's. */
  deadLetterAfter: number;
  /** The tube's own settings; null when the server's apply. */
  ownSettings: TubeSettings | null;
  /** The tube's policy and what it does now; null: none. */
  policy: TubePolicyState | null;
}

/** What the attention list needs of a tube beyond its counts (readyAges). */
export interface TubeAges {
  /** Epoch ms; Infinity when no job is ready. */
  oldestReadyCreatedAt: number;
  nearTtr: number;
}

/** A tube's settings, which exist whether or not the tube does. */
export interface TubeSettingsView {
  tube: string;
  /** In force: `own` if set, else the server's `--dead-letter-after` (0: off). */
  deadLetterAfter: number;
  own: TubeSettings | null;
  serverDefault: TubeSettings;
}

/** A tube's policy, which exists whether or not the tube does, and its live state while the tube exists. */
export interface TubePolicyView {
  tube: string;
  policy: TubePolicy | null;
  /** Null when the tube has no policy or does not exist now. */
  state: TubePolicyState | null;
}

/** What a release did: the job is ready (or delayed) again, or the dead-letter rule buried it. */
export type ReleaseOutcome = 'released' | 'buried';

/** Commands counted for `stats`, by beanstalkd's names and in its order (stats.ts). */
export { COUNTED_COMMANDS } from '../engine/stats.js';
export type { CountedCommand } from '../engine/stats.js';

/** The server's job, tube and connection counts. */
export interface ServerCounts {
  urgent: number;
  ready: number;
  reserved: number;
  delayed: number;
  buried: number;
  /** Reservations whose TTR ran out. */
  jobTimeouts: number;
  /** Jobs put since start. */
  totalJobs: number;
  tubes: number;
  currentConnections: number;
  totalConnections: number;
  producers: number;
  workers: number;
  waiting: number;
  draining: boolean;
  /** When the server started (epoch ms). */
  startedAt: number;
  /** Largest body a job may have (bytes). */
  maxJobSize: number;
  /** Operations served, by name. */
  operations: Readonly<Record<CountedCommand, number>>;
}

/** One client session, as the dashboard's connection list shows it. */
export interface SessionView {
  id: number;
  peer: string;
  /** Who its client certificate says it is (subject CN, mutual TLS); null: no certificate. */
  identity: string | null;
  /** Epoch ms: when it connected, and its last command. */
  openedAt: number;
  lastCommandAt: number;
  lastCommand: string;
  /** The jobs it holds and when each runs out (epoch ms; Infinity: held without a TTR). */
  holding: { id: number; tube: string; deadlineAt: number }[];
  producer: boolean;
  worker: boolean;
  waiting: boolean;
  using: string;
  watching: string[];
  reserved: number[];
}

/**
 * A walk over every job that may span many turns of the event loop (a search): jobs added
 * meanwhile may or may not be visited, jobs removed before their turn are not, none twice.
 */
export interface JobScan {
  /**
   * Visits up to `max` more jobs (fewer when `visit` answers false: the slice ends there); answers
   * true once every job has been visited. `view` is reused and `body` is a view of the store's
   * memory: read both during the call.
   */
  next(max: number, visit: (view: JobView, body: Buffer) => boolean): Pending<boolean>;
}


/**
 * What a new job needs; durations in ms. The TTR floor is applied behind this interface. A
 * store reads it before the call returns: the caller may reuse the object and its body's memory.
 */
export interface NewJob {
  priority: number;
  delayMs: number;
  ttrMs: number;
  body: Buffer;
  /**
   * True when the caller gives up `body`'s memory (a buffer it assembled for this job alone), so
   * the store may keep it instead of copying it. False for a view of shared memory.
   */
  bodyOwned?: boolean;
  /** Kept in memory only, never journaled (a Gearman foreground job dies with its clients). */
  transient?: boolean;
  /**
   * A Gearman submit's unique id (empty: none). The in-memory store ignores it (the door's
   * registry coalesces); a cluster's store coalesces on it, across nodes.
   */
  unique?: Buffer;
  /**
   * Refuse the job (QUEUE_FULL) when its tube already holds this many queued (ready and delayed)
   * jobs: Gearman's `maxqueue`. Checked and added as one step, also across a cluster's nodes.
   */
  queueLimit?: number;
}

/** What an operator may change in a job no worker holds; durations in ms. */
export interface JobChange {
  body?: Buffer;
  priority?: number;
  ttrMs?: number;
  /** Ready or delayed jobs become delayed by this much (0: ready now); a buried job keeps it for later. */
  delayMs?: number;
  /** Move to this tube (created if needed), keeping id, state, priority and counters. */
  tube?: string;
  /** After the change, kick the job if it is buried or delayed. */
  kick?: boolean;
}


export interface ConnectOptions {
  watchNothing?: boolean;
  /** The client certificate's subject CN of a mutual-TLS client (see tls/peer-identity.ts); null or absent: none. */
  identity?: string | null;
  /** A reserve takes the watched tubes in turn (Rotation), not the best job of them all. */
  roundRobin?: boolean;
}

/** How a client is told what it waited for (a front door's connection implements it). */
export interface ClientDelegate {
  /** A blocked reserve got this job. */
  reserved(job: JobBytes): void;
  timedOut(): void;
  deadlineSoon(): void;
  /** After `sleep`: a job this client may take is ready (no job is reserved for it). */
  woken(): void;
  /** An operator closes the connection: drop it (its jobs go back as on any disconnect). */
  disconnect(): void;
}

/** One connected client's operations: its tube, its watch list and the jobs it holds. */
export interface ClientOperations {
  readonly id: number;
  /** The tube it puts into. */
  usedTube(): string;
  watchedTubes(): string[];
  watchedCount(): number;
  /** Fails with OUT_OF_MEMORY when a new tube would not fit. Answers with the tube's name. */
  use(tube: string): Pending<Result<TubeName>>;
  /** Returns how many tubes are watched. */
  watch(tube: string): Pending<Result<number>>;
  /** NOT_IGNORED for the last watched tube. */
  ignore(tube: string): Pending<Result<number>>;
  /**
   * Before a body of `bytes` is read: marks the client a producer and takes the job's id;
   * OUT_OF_MEMORY when the job would not fit. (JOB_TOO_BIG is `Operations.isTooBig`, which a
   * protocol may need to answer before other checks.)
   */
  admitPut(bytes: number): Result<number>;
  /** Puts into the used tube under the id `admitPut` gave; answers with the job's id. */
  put(id: number, job: NewJob): Pending<Result<MadeJob>>;
  /**
   * Puts into `tube` (created if needed, and dropped again if the put fails) without changing
   * the used tube: a Gearman submit names its function in every packet. JOB_TOO_BIG, DRAINING,
   * OUT_OF_MEMORY.
   */
  submit(tube: string, job: NewJob): Pending<Result<MadeJob>>;
  /** `timeoutMs` null waits for ever. */
  reserve(timeoutMs: number | null): Pending<ReserveOutcome<JobBytes>>;
  reserveJob(id: number): Pending<Result<JobBytes>>;
  delete(id: number): Pending<Result<void>>;
  release(id: number, priority: number, delayMs: number): Pending<Result<ReleaseOutcome>>;
  bury(id: number, priority: number): Pending<Result<void>>;
  touch(id: number): Pending<Result<void>>;
  peekReady(): Pending<JobBytes | undefined>;
  peekDelayed(): Pending<JobBytes | undefined>;
  peekBuried(): Pending<JobBytes | undefined>;
  /** Kicks up to `bound` buried jobs of the used tube, or delayed ones when none is buried; in slices. */
  kick(bound: number): Pending<number>;
  /**
   * Asks for `delegate.woken()` once a job is ready in a watched tube; true (and no wait) when
   * one is ready now. A reserve cancels the wait.
   */
  sleep(): Pending<boolean>;
  /** How long reservations last from now on (ms): -1 the job's TTR, Infinity until released. */
  setHold(holdMs: number): void;
  /** Makes a job this client holds run out `holdMs` from now (Gearman's CAN_DO_TIMEOUT). */
  hold(id: number, holdMs: number): Pending<Result<void>>;
  /** True when this client holds job `id`. */
  holds(id: number): Pending<boolean>;
  /** The peer sends nothing more: a blocked reserve gives up. */
  halfClose(): void;
  /** Its last command and when it came (epoch ms), for the dashboard (a wire word such as `reserve` or `GRAB_JOB`). */
  noteCommand(name: string, at: number): void;
  /** Ends the client: its reserved jobs go back to ready (in slices), its tubes are let go. */
  close(): Pending<void>;
}

/**
 * The store's roles, one interface each, so that each door declares what it uses (the beanstalkd
 * and Gearman doors, the dashboard, the Gearman registry); a store implements them all
 * (`Operations`). Methods on a door's hot path answer `Pending<T>` (a value from the in-memory
 * store, a promise from a database); the dashboard's reads and changes are off that path and
 * may simply be awaited.
 */

/** What every door's connection plumbing needs: durable replies, and a word after each batch of work. */
export interface StoreActivity {
  /** Replies wait until records made before them are durable. */
  readonly durability: Durability;
  /**
   * A door calls this after it has handled a batch of its clients' requests (one read), so the
   * store re-arms what it times (the in-memory store's scheduler; a database store times its own).
   */
  onActivity(): void;
}

/** The store's limits, clock and drain state. */
export interface StoreInfo extends StoreActivity {
  readonly maxJobSize: number;
  /** True when a body of `bytes` is over the largest job size (`-z`). */
  isTooBig(bytes: number): boolean;
  /** True once the server drains: puts fail with DRAINING. */
  readonly draining: boolean;
  /** Calls `fn` when the server starts draining; returns a function that stops it. */
  onDraining(fn: () => void): () => void;
  /** The store's clock (epoch ms). */
  now(): number;
}

/** The connected clients: a door connects each of its own; the dashboard lists and closes them. */
export interface Sessions {
  /**
   * A new client; `peer` says who it is (an address) in the dashboard's connection list. It uses
   * and watches the default tube, or with `watchNothing` watches no tube until it asks (and may
   * ignore its last one).
   */
  connect(delegate: ClientDelegate, peer: string, options?: ConnectOptions): ClientOperations;

  sessions(): Pending<SessionView[]>;
  /** Closes connection `id` (the dashboard's "close connection"): NOT_FOUND when there is none. */
  closeConnection(id: number): Pending<Result<void>>;
}

/** Jobs and tubes as snapshots: the protocols' peeks and stats, the dashboard's lists and searches. */
export interface JobReads {
  peek(id: number): Pending<JobBytes | undefined>;
  job(id: number): Pending<JobSnapshot | undefined>;
  /** What happened to job `id` lately (also after it is gone), from the shared history ring. */
  jobHistory(id: number): Pending<JobHistoryDto>;
  /**
   * Calls `visit` with each of the jobs `ids` (undefined for one that is gone). The view passed
   * is reused between calls: copy what you keep. Lets a watcher of many jobs compare them
   * without a snapshot per job.
   */
  visitJobs(ids: Iterable<number>, visit: (id: number, view: JobView | undefined) => void): Pending<void>;
  /**
   * Calls `visit` with every job once, in no particular order (one pass, for listings of all
   * jobs and for rebuilding indexes after a restart). The snapshot's body is a view: read it
   * during the call.
   */
  eachJob(visit: (job: JobSnapshot) => void): Pending<void>;
  /** Starts a walk over every job, a slice at a time (a search). */
  scanJobs(): JobScan;
  /**
   * Per tube, when its oldest ready job was put, and how many reservations have less than
   * `nearShare` of their TTR left (the attention list). A database answers from its indexes; the
   * in-memory store walks its jobs in slices.
   */
  readyAges(nearShare: number): Promise<Map<string, TubeAges>>;
  tube(name: string): Pending<TubeCounts | undefined>;
  /**
   * Every tube, in list-tubes order. A store may answer with counts a moment old (a cluster
   * reads every tube's at most once a second for the dashboard); `fresh` asks for counts as of
   * now, as a protocol's answer must be.
   */
  tubes(fresh?: boolean): Pending<TubeCounts[]>;
  tubeNames(): Pending<string[]>;
  serverCounts(): Pending<ServerCounts>;
  /**
   * A page of `tube`'s jobs in `state`, in queue order; `cursor` from the previous page.
   * Undefined when there is no such tube.
   */
  listJobs(tube: string, state: JobState, limit: number, cursor: string | null): Pending<JobPage<JobSnapshot> | undefined>;
  /** The id of the job after `id` in its tube's list for its state (the next one to triage), or null. */
  nextInList(id: number): Pending<number | null>;
  tubeSettings(tube: string): Pending<TubeSettingsView>;
  tubePolicy(tube: string): Pending<TubePolicyView>;
}

/** The server-wide `stats` counters of commands. */
export interface Counters {
  /**
   * Counts a command for `stats`. A door counts the commands of its clients (which beanstalkd
   * counts even when they fail before any operation); the server-wide changes below count
   * themselves, whichever door asks for them.
   */
  count(operation: CountedCommand): void;
}

/** Changes to jobs and tubes that are not one client's own: the dashboard's, and beanstalkd's kick-job and pause-tube. */
export interface AdminChanges {
  /** Puts into `tube`, created if needed (and dropped again if the put fails). Counts `put`. */
  put(tube: string, job: NewJob): Pending<Result<JobSnapshot>>;
  /**
   * Deletes a job no worker holds: JOB_RESERVED when one does. Counts `delete`. `by` (here and
   * below): the dashboard user behind the change, said in the job's history (a cluster's history
   * does not keep it yet).
   */
  delete(id: number, by?: HistoryActor): Pending<Result<void>>;
  /** Counts `kick-job`. */
  kickJob(id: number, by?: HistoryActor): Pending<Result<JobSnapshot>>;
  /** Kicks up to `bound` jobs of `tube` (buried ones, or delayed when none is buried), in slices. Counts `kick`. */
  kick(tube: string, bound: number, by?: HistoryActor): Pending<Result<number>>;
  /** Counts `pause-tube`. */
  pauseTube(tube: string, delayMs: number): Pending<Result<TubeCounts>>;
  /** Sets (null: clears) a tube's own settings, recorded in the binlog; the tube need not exist. */
  setTubeSettings(tube: string, settings: TubeSettings | null): Pending<Result<TubeSettingsView>>;
  /** Sets (null: clears) a tube's policy, recorded in the binlog (cluster: its table); the tube need not exist. */
  setTubePolicy(tube: string, policy: TubePolicy | null): Pending<Result<TubePolicyView>>;
  /** Counts `kick-job` when it kicks. */
  editJob(id: number, change: JobChange, by?: HistoryActor): Pending<Result<JobSnapshot>>;
  /** Deletes every job of `tube` in `state`, in slices; returns how many went. Counts a `delete` each. */
  clear(tube: string, state: QueuedState, by?: HistoryActor): Pending<Result<number>>;
  /** Moves up to `limit` jobs of `tube` in `state` to tube `to`, keeping ids and counters; in slices. */
  move(tube: string, state: QueuedState, to: string, limit: number, by?: HistoryActor): Pending<Result<number>>;
}

/** News of a job for whoever waits on it (Gearman's clients and the dashboard's job page). */
export interface JobNews {
  /** How many watchers job `id` has (clients waiting on it and any door's own). */
  watcherCount(id: number): number;
  /** Tells `watcher` of job `id`'s updates until it is deleted; false when there is no such job. */
  attachWatcher(id: number, watcher: JobWatcher): boolean;
  /** Returns how many watchers remain. */
  detachWatcher(id: number, watcher: JobWatcher): number;
  /** Passes `update` to every watcher of job `id`; returns how many got it. */
  report(id: number, update: JobUpdate): number;
}

/** Every role: what a store (in memory, or the cluster's database) implements. */
export interface Operations extends StoreInfo, Sessions, JobReads, Counters, AdminChanges, JobNews {}
