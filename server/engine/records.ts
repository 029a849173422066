/*
 * The engine's records: a job, its tube and a session. They refer to one another (a job knows
 * its tube, a tube its waiting sessions, a session its tubes and reserved jobs), so they live in
 * one file rather than three files that import each other in a circle. The lists and heaps they
 * hold (JobList, ReadyQueue, IndexedHeap) are generic over their items and import none of them.
 */
import { BURY_CAUSES, type BuryCause } from '../../shared/bury-cause.js';
import type { JobBasics } from '../common/job-basics.js';
import type { JobCounts } from '../common/job-counts.js';
import type { JobState } from '../../shared/dto.js';
import { FAR, decodeCreated, encodeCreated, type TimeBase } from './time-base.js';
import { IndexedHeap, setHeapIndex } from './heap.js';
import { JobList } from './job-list.js';
import { OrderedSet } from '../common/ordered-set.js';
import { ReadyQueue } from './ready-queue.js';
import type { Rotation } from './rotation.js';
import type { TubeGate } from './tube-gate.js';
import { bodyView, type BodyHolder, type BodySlab } from './body-store.js';

/** `jobFile` of a job that is never journaled (PutRequest.transient). */
export const TRANSIENT_FILE = -1;

export { BURY_CAUSES, type BuryCause };
/** A cause's index in BURY_CAUSES: what Job.buryCause holds. */
export const BURY_CAUSE_CODE: Readonly<Record<BuryCause, number>> = { none: 0, bury: 1, 'dead-letter-release': 2, 'dead-letter-timeout': 3 };

// Where a job is (one name from the engine to the UI); `deleted` jobs are gone from every index.
export type { JobState };

/**
 * What happened to a job beyond being put, reserved and deleted: counters and marks that most
 * jobs never change. They live apart (Job.more) and are made on the first change, so that a job
 * that is only put, reserved and deleted carries one field for them instead of seven (48 bytes
 * less per job; a million queued jobs is a normal backlog). A value too large for its field in
 * Job (see LARGE) is kept here too, in an object of its own (`large`), so that the counters of
 * the many released or buried jobs carry no boxed numbers.
 */
class JobCounters {
  constructor(
    public timeouts = 0,
    public releases = 0,
    public buries = 0,
    public kicks = 0,
    public strikes = 0,
    public buryCause = 0,
    public buriedSeq = 0,
    public large: LargeValues | null = null,
  ) {}
}

/** Values too large (or too fine) for Job's small fields: durations in ms, times in epoch ms. */
class LargeValues {
  delayMs = 0;
  ttrMs = 0;
  createdAt = 0;
  deadlineAt = 0;
}

/** The counters of every job that has not changed any: read-only, shared. */
const UNCHANGED: Readonly<JobCounters> = Object.freeze(new JobCounters());

/** JobState by its code in `Job.place` (the low two bits). */
const STATES: readonly JobState[] = ['ready', 'reserved', 'delayed', 'buried'];
/**
 * A state's code (its index in STATES). Compared, not looked up in an object: a keyed load by a
 * string that varies is megamorphic, and this runs several times per job.
 */
export function stateCode(state: JobState): 0 | 1 | 2 | 3 {
  return state === 'ready' ? 0 : state === 'reserved' ? 1 : state === 'delayed' ? 2 : 3;
}
const STATE_BITS = 2;
const STATE_MASK = (1 << STATE_BITS) - 1;

/** Added to a priority (0 to 2^32 - 1) to keep it in the signed 32-bit range (Job.rank). */
const PRIORITY_BIAS = 2 ** 31;

/** `Job.deadline` of a job without one (not a value `fits` lets a real deadline take). */
const NO_TIME = 2 ** 30 - 1;
/** `Job.deadline` of a job held for ever (a Gearman worker's job): an infinite deadline. */
const NEVER = 2 ** 30 - 2;

/**
 * In a time or duration field of Job: the value did not fit in 31 bits (a delay, TTR or deadline
 * beyond 12 days, or a duration with a fraction of a millisecond; a creation time over 17 years
 * from its base) and is in `more`.
 */
const LARGE = FAR;

/** True when `n` can be stored as it is in one of Job's small fields: a 31-bit integer, not LARGE. */
function fits(n: number): boolean {
  return (n << 1) >> 1 === n && n !== LARGE;
}

/** `n` for one of Job's small fields: itself as a small integer, or LARGE (the caller keeps it in `more`). */
function inline(n: number): number {
  return fits(n) ? n | 0 : LARGE; // both sides 32-bit integers: V8 keeps the result unboxed
}

/**
 * A job and its counters. Times are epoch milliseconds; durations are milliseconds. The body's
 * bytes live in the engine's body store (`slab`, `bodySpan`).
 *
 * Why a plain object, made by `makeJob` from an object literal, with its fields read and written
 * through the functions below rather than a class's accessors: V8 allocates the objects of an
 * object literal whose objects outlive the young generation (a queue's backlog) straight into the
 * old generation (allocation-site pretenuring), but always allocates a class instance young and
 * copies it, once or twice, in the scavenges that follow. A stream of submits that are queued is
 * a stream of such copies: with class instances, about 300 scavenges per million submits, each
 * holding every client for most of a millisecond (BENCHMARKS.md, "job records as plain objects").
 *
 * Why the fields are shaped this way: a million queued jobs is a normal backlog, so each field
 * is 8 bytes times a million, and a number V8 cannot keep inline as a small integer (32 bits on
 * Node's 64-bit builds, which have no pointer compression; nor one with a fraction) costs 16
 * bytes more in a box of its own; worse, once one job's field holds such a number, V8 boxes that
 * field's value in every job made after. So every number here is a small integer: times are whole
 * milliseconds (an old creation time whole seconds) from the engine's TimeBase, reached through
 * the tube (epoch times are 41-bit and fractional); the priority is biased into the signed range
 * (beanstalkd's common 2^31 is not); the state shares a field with the binlog segment, and the
 * body's offset with its length (31 bits, see BodyHolder); a time or duration that does not fit
 * in 31 bits is kept in `more` (LARGE). Values computed from large numbers (times, the biased
 * priority, durations) are stored from `x | 0`: optimized code that has seen large numbers hands
 * over boxed ones even when they are small, while `x | 0` is always inline. The functions below
 * (`jobPriority`, `jobState`, `jobCreatedAt`...) give the usual units, so no caller sees the
 * packing; only they and the engine's lists and heaps touch the fields. Times are floored to the
 * millisecond: a deadline can come up to 1 ms early, which keeps `time-left` below the TTR right
 * after a reserve, as beanstalkd shows it.
 */
export interface Job extends BodyHolder {
  readonly id: number;
  tube: Tube;
  /** `file * 4 + state code`: the binlog segment holding the job's full record, and its state. */
  place: number;
  /** When the job becomes ready (delayed) or its TTR runs out (reserved): ms from the current time base; NO_TIME, NEVER or LARGE. */
  deadline: number;
  reserves: number;
  /** The rarer counters (JobCounters): UNCHANGED until one of them changes. */
  more: JobCounters;
  /** Position in the tube's ready or delay heap, or in the reserving session's heap. */
  heapIndex: number;
  /** Neighbours in the tube's ready run or buried list, or in the reserving session's list. */
  listPrev: Job | null;
  listNext: Job | null;
  slab: BodySlab;
  bodySpan: number;
  /** The priority minus PRIORITY_BIAS: compares like the priority (readyLess). */
  rank: number;
  /** From the base of the job's era (TimeBase.createdBase, encodeCreated), or LARGE. */
  created: number;
  /** ms, or LARGE. */
  delay: number;
  /** ms, or LARGE. */
  ttr: number;
}

/** The slab of a job made before its body is placed (the body store sets the real one). */
const NO_SLAB = undefined as unknown as BodySlab;

/** A new job, ready, without a body yet. One literal, so that V8 can pretenure a backlog's jobs (see Job). */
export function makeJob(id: number, tube: Tube, priority: number, delayMs: number, ttrMs: number, createdAt: number): Job {
  const job: Job = {
    id,
    tube,
    place: 0,
    deadline: NO_TIME,
    reserves: 0,
    more: UNCHANGED,
    heapIndex: -1,
    listPrev: null,
    listNext: null,
    slab: NO_SLAB,
    bodySpan: 0,
    rank: 0,
    created: 0,
    delay: 0,
    ttr: 0,
  };
  setJobPriority(job, priority);
  setJobDelayMs(job, delayMs);
  setJobTtrMs(job, ttrMs);
  setJobCreatedAt(job, createdAt);
  return job;
}

/** Tells a delayed or reserved job that the time base moved on from `from` (Engine): its deadline stays the same. */
export function rebaseDeadline(job: Job, from: number): void {
  const d = job.deadline;
  if (d !== NO_TIME && d !== LARGE && d !== NEVER) setJobDeadlineAt(job, d + from);
}

export function jobPriority(job: Job): number {
  return job.rank + PRIORITY_BIAS;
}
export function setJobPriority(job: Job, p: number): void {
  job.rank = (p - PRIORITY_BIAS) | 0; // a priority is below 2^32: no bits lost
}

export function jobDelayMs(job: Job): number {
  return job.delay !== LARGE ? job.delay : job.more.large!.delayMs;
}
export function setJobDelayMs(job: Job, ms: number): void {
  job.delay = inline(ms);
  if (job.delay === LARGE) largeOf(job).delayMs = ms;
}

export function jobTtrMs(job: Job): number {
  return job.ttr !== LARGE ? job.ttr : job.more.large!.ttrMs;
}
export function setJobTtrMs(job: Job, ms: number): void {
  job.ttr = inline(ms);
  if (job.ttr === LARGE) largeOf(job).ttrMs = ms;
}

export function jobCreatedAt(job: Job): number {
  return job.created !== LARGE ? decodeCreated(job.created, job.tube.timeBase.createdBase(job.id)) : job.more.large!.createdAt;
}

function setJobCreatedAt(job: Job, t: number): void {
  const created = encodeCreated(t, job.tube.timeBase.createdBase(job.id));
  if (created !== LARGE) {
    job.created = created | 0;
  } else {
    largeOf(job).createdAt = Math.floor(t);
    job.created = LARGE;
  }
}

/** Epoch ms when the job becomes ready (delayed) or its TTR runs out (reserved; Infinity if held for ever); 0 otherwise. */
export function jobDeadlineAt(job: Job): number {
  const d = job.deadline;
  if (d === NO_TIME) return 0;
  if (d === LARGE) return job.more.large!.deadlineAt;
  return d === NEVER ? Number.POSITIVE_INFINITY : d + job.tube.timeBase.ms;
}
export function setJobDeadlineAt(job: Job, t: number): void {
  if (t === 0) {
    job.deadline = NO_TIME;
  } else if (t === Number.POSITIVE_INFINITY) {
    job.deadline = NEVER;
  } else {
    const deadline = Math.floor(t) - job.tube.timeBase.ms;
    job.deadline = deadline !== NO_TIME && deadline !== NEVER ? inline(deadline) : LARGE;
    if (job.deadline === LARGE) largeOf(job).deadlineAt = Math.floor(t);
  }
}

export function jobState(job: Job): JobState {
  return STATES[job.place & STATE_MASK]!;
}
export function setJobState(job: Job, state: JobState): void {
  job.place = (job.place & ~STATE_MASK) | stateCode(state);
}

/** Binlog segment holding the job's full record (0 without persistence; TRANSIENT_FILE never). */
export function jobFile(job: Job): number {
  return job.place >> STATE_BITS;
}
export function setJobFile(job: Job, file: number): void {
  job.place = file * (STATE_MASK + 1) + (job.place & STATE_MASK);
}

/** Never journaled (PutRequest.transient): a Gearman foreground job. */
export function isTransient(job: Job): boolean {
  return jobFile(job) === TRANSIENT_FILE;
}

/** Sets the rarer counters at once (recovery): a job whose counters are all 0 keeps sharing UNCHANGED. */
export function setJobCounters(job: Job, c: Readonly<Pick<JobCounters, 'timeouts' | 'releases' | 'buries' | 'kicks' | 'strikes' | 'buryCause' | 'buriedSeq'>>): void {
  const none = c.timeouts === 0 && c.releases === 0 && c.buries === 0 && c.kicks === 0 && c.strikes === 0 && c.buryCause === 0 && c.buriedSeq === 0;
  if (none && job.more === UNCHANGED) return;
  job.more = new JobCounters(c.timeouts, c.releases, c.buries, c.kicks, c.strikes, c.buryCause, c.buriedSeq, job.more.large);
}

/** True while the job shares UNCHANGED (tests: recovery keeps the saving). */
export function countersShared(job: Job): boolean {
  return job.more === UNCHANGED;
}

function ownCounters(job: Job): JobCounters {
  if (job.more === UNCHANGED) job.more = new JobCounters();
  return job.more;
}

function largeOf(job: Job): LargeValues {
  const more = ownCounters(job);
  if (more.large === null) more.large = new LargeValues();
  return more.large;
}

// Each counter beside what changes it; only these functions write them (through `ownCounters`).

/** The rarer counters of a job, read-only: releases, timeouts, strikes, kicks, buries, buryCause, buriedSeq. */
export function jobCounters(job: Job): Readonly<JobCounters> {
  return job.more;
}

/** Counts a release (its strike is counted by `strike`). */
export function countRelease(job: Job): void {
  ownCounters(job).releases++;
}

/** Counts a reservation that ran out (its strike is counted by `strike`). */
export function countTimeout(job: Job): void {
  ownCounters(job).timeouts++;
}

/**
 * Counts a release or timeout against the dead-letter rule (releases plus timeouts since the job
 * was put or last kicked); returns the strikes so far.
 */
export function strike(job: Job): number {
  return ++ownCounters(job).strikes;
}

/** The job was kicked: counted, and a fresh start under the dead-letter rule. */
export function countKick(job: Job): void {
  const more = ownCounters(job);
  more.kicks++;
  more.strikes = 0;
  more.buryCause = 0;
}

/**
 * The job was buried (`cause`, a BURY_CAUSES index: why it was last buried, 0 until it is and
 * again once kicked), last of its tube's buried jobs as `seq` orders them (`buriedSeq` orders
 * buried jobs across restarts: set each time the job is buried or moved while buried).
 */
export function countBury(job: Job, cause: number, seq: number): void {
  const more = ownCounters(job);
  more.buryCause = cause;
  more.buries++;
  more.buriedSeq = seq;
}

/** The buried job went to the end of another tube's buried list (a move): `seq` orders it there. */
export function reburied(job: Job, seq: number): void {
  ownCounters(job).buriedSeq = seq;
}

/** A view of the body: it allocates, so hot paths copy from `slab` directly. */
export function jobBody(job: Job): Buffer {
  return bodyView(job);
}

/** `into` (a view reused for many jobs), given the job's six counters. */
export function copyJobCounts(into: JobCounts, job: Job): void {
  const more = job.more;
  into.reserves = job.reserves;
  into.timeouts = more.timeouts;
  into.releases = more.releases;
  into.buries = more.buries;
  into.kicks = more.kicks;
  into.strikes = more.strikes;
}

/** `into` (a view or an image reused for many jobs), made what every description of a job says (JobBasics). */
export function fillJobBasics(job: Job, into: JobBasics): void {
  into.id = job.id;
  into.tube = job.tube.name;
  into.state = jobState(job);
  into.priority = jobPriority(job);
  into.delayMs = jobDelayMs(job);
  into.ttrMs = jobTtrMs(job);
  into.createdAt = jobCreatedAt(job);
  into.deadlineAt = jobDeadlineAt(job);
  copyJobCounts(into, job);
}

/**
 * `into` (reused by the caller: a binlog writes a record per change), made what a binlog record
 * stores of the job, but its body, which only a JOB record carries (`jobImageOf` has it).
 */
export function fillJobImage(job: Job, into: JobImage): JobImage {
  fillJobBasics(job, into);
  into.buriedSeq = job.more.buriedSeq;
  into.buryCause = job.more.buryCause;
  return into;
}

/** A job's image of its own, body included. */
export function jobImageOf(job: Job): JobImage {
  return fillJobImage(job, newJobImage(jobBody(job)));
}

/** An image to fill (fillJobImage). */
export function newJobImage(body: Buffer): JobImage {
  return { id: 0, tube: '', state: 'ready', priority: 0, delayMs: 0, ttrMs: 0, createdAt: 0, deadlineAt: 0, reserves: 0, timeouts: 0, releases: 0, buries: 0, kicks: 0, strikes: 0, buriedSeq: 0, buryCause: 0, body };
}

/**
 * A job as a binlog stores it and recovery hands it back: every field that survives a restart.
 * A reserved job's image says `ready` (a reservation does not outlive the server).
 */
export interface JobImage extends JobBasics {
  /** Epoch ms when a delayed job becomes ready; 0 in other states. */
  deadlineAt: number;
  buriedSeq: number;
  /** A BURY_CAUSES index. */
  buryCause: number;
  body: Buffer;
}

/** Delayed and reserved order: deadline, then id. */
export function deadlineLess(a: Job, b: Job): boolean {
  // Each deadline read once: it is decoded from the job's fields, and a Gearman worker's jobs,
  // held for ever, all tie and are ordered by id.
  const da = jobDeadlineAt(a);
  const db = jobDeadlineAt(b);
  return da < db || (da === db && a.id < b.id);
}

let tubesMade = 0;

/** A named queue: its ready queue, delay heap, buried FIFO and the sessions using or watching it. */
export class Tube {
  /** Tells apart two tubes of the same name, one removed and one made later. */
  readonly serial = ++tubesMade;
  readonly ready = new ReadyQueue<Job>();
  readonly delayed = new IndexedHeap<Job>(deadlineLess, setHeapIndex);
  /** Buried jobs, oldest first. */
  readonly buried = new JobList<Job>();
  /** Sessions blocked in reserve that watch this tube (narrow ones: see engine.ts, WIDE_SESSION_TUBES). */
  readonly waiting = new OrderedSet<Session>();
  /** Wide sessions that watch this tube, waiting or not, and whose turn is next among them. */
  readonly wideWatchers = new OrderedSet<Session>();
  wideCursor = 0;
  /** In the engine's list of tubes to look at for waiting wide sessions. */
  wideNewsQueued = false;

  urgent = 0;
  reserved = 0;
  totalJobs = 0;
  using = 0;
  watching = 0;
  cmdDelete = 0;
  cmdPause = 0;
  /** The dead-letter limit in force here: the tube's own setting, or the server's (0: off). */
  deadLetterAfter = 0;
  /** Length of the current pause in ms (0 when not paused) and when it ends (epoch ms). */
  pauseMs = 0;
  unpauseAt = 0;
  /** The tube's flow policy and its live state (policy-gates.ts); null: no policy, no cost. */
  gate: TubeGate | null = null;
  /** The policy holds reserves back now (its concurrency cap is full or its rate spent). */
  gated = false;
  /** Gone from the registry (unused): a later use of its name makes a new tube. */
  removed = false;

  /**
   * How many times a job entered or left each state here (ready, reserved, delayed, buried), so
   * an observer that polls can tell which lists changed, even when their sizes did not.
   */
  readonly stateChanges: [number, number, number, number] = [0, 0, 0, 0];

  /** Position in the engine's heap of tubes that have both waiters and ready jobs. */
  awaitedIndex = -1;
  /** Position in the engine's heap of paused tubes. */
  pauseIndex = -1;
  /** Position in the engine's heap of tubes holding delayed jobs. */
  delayingIndex = -1;

  constructor(
    readonly name: string,
    /** The engine's time base, which its jobs' times are relative to (Job). */
    readonly timeBase: TimeBase,
  ) {}

  get paused(): boolean {
    return this.pauseMs > 0;
  }

  /** No reserve may take a job from here now: paused, or held back by its policy. */
  get closed(): boolean {
    return this.pauseMs > 0 || this.gated;
  }

  /** Sessions blocked in reserve that watch this tube (stats-tube's current-waiting). */
  get waitingSessions(): number {
    let n = this.waiting.size;
    for (const session of this.wideWatchers.values()) if (session.waiting) n++;
    return n;
  }

  /** Jobs of every state that belong to this tube. */
  get jobCount(): number {
    return this.ready.size + this.delayed.size + this.buried.size + this.reserved;
  }

  /** Counts a job entering or leaving `state` (see stateChanges). */
  touchState(state: JobState): void {
    this.stateChanges[stateCode(state)]++;
  }

  firstBuried(): Job | undefined {
    return this.buried.first();
  }
}


/** How the engine tells a session what it waited for. */
export interface SessionDelegate {
  /** A blocked reserve got this job. */
  reserved(job: Job): void;
  /** A blocked reserve ran out of time (or the peer half-closed). */
  timedOut(): void;
  /** A blocked reserve ends because a held job is about to run out of TTR. */
  deadlineSoon(): void;
  /**
   * A session that asked to be woken (`Engine.sleep`) may now take a job: one is ready in a
   * tube it watches. No job is reserved for it (Gearman's NOOP to a worker in PRE_SLEEP).
   */
  woken(): void;
  /** An operator closes this connection (the dashboard): the front door drops it. */
  disconnect?(): void;
}

/**
 * One client of the engine (a protocol connection, later a Gearman worker): the tube it uses,
 * the tubes it watches, the jobs it holds and whether it is blocked in reserve.
 */
export class Session {
  used!: Tube;
  readonly watched = new OrderedSet<Tube>();
  /** Reserved jobs in reservation order (disconnect releases them in this order). */
  readonly reservedJobs = new JobList<Job>();
  /** The same jobs by TTR deadline. */
  readonly reservedByDeadline = new IndexedHeap<Job>(deadlineLess, setHeapIndex);
  waiting = false;
  /** Watches more than WIDE_SESSION_TUBES tubes: listed by each as a wide watcher instead of joining their waiting lists (engine.ts). */
  wide = false;
  /** May watch no tube at all (a Gearman worker before its first CAN_DO). */
  mayWatchNothing = false;
  /** Null: a reserve takes the best job of all watched tubes; else the first of these with one (round robin). */
  rotation: Rotation<Tube> | null = null;
  /** Waiting only to be woken (`Engine.sleep`), not for a job. */
  wakeOnly = false;
  /**
   * How long a reservation lasts, in ms, overriding the job's TTR: -1 uses the job's TTR,
   * Infinity holds the job until the session lets it go or ends (Gearman's workers).
   */
  holdMs = -1;
  /** When a blocked reserve gives up (epoch ms), or -1 to wait forever. */
  waitUntil = -1;
  /** When the engine must next look at this session (TTR, DEADLINE_SOON or reserve timeout); 0 for never. */
  tickAt = 0;
  tickIndex = -1;
  isProducer = false;
  isWorker = false;
  /** Who the front door says this is (a peer address), for the dashboard's connection list. */
  peer = '';
  /** Who its client certificate says it is (subject CN, mutual TLS), for the dashboard; null: none. */
  identity: string | null = null;
  /** When it connected, and its last command and when (epoch ms; set by its front door). */
  openedAt = 0;
  lastCommandAt = 0;
  lastCommand = '';
  /** The peer will send nothing more: a blocking reserve times out at once. */
  halfClosed = false;
  closed = false;

  constructor(
    readonly id: number,
    readonly delegate: SessionDelegate,
  ) {}

  soonestReserved(): Job | undefined {
    return this.reservedByDeadline.peek();
  }
}
