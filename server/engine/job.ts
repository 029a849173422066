import { BURY_CAUSES, type BuryCause } from '../../shared/bury-cause.js';
import type { Tube } from './tube.js';
import type { Session } from './session.js';
import { bodyView, type BodyHolder, type BodySlab } from './body-store.js';

/** `Job.file` of a job that is never journaled (PutRequest.transient). */
export const TRANSIENT_FILE = -1;

export { BURY_CAUSES, type BuryCause };
/** A cause's index in BURY_CAUSES: what Job.buryCause holds. */
export const BURY_CAUSE_CODE: Readonly<Record<BuryCause, number>> = { none: 0, bury: 1, 'dead-letter-release': 2, 'dead-letter-timeout': 3 };

/** Where a job is. `deleted` jobs are gone from every index. */
export type JobState = 'ready' | 'reserved' | 'delayed' | 'buried';

/**
 * What happened to a job beyond being put, reserved and deleted: counters and marks that most
 * jobs never change. They live apart (Job.more) and are made on the first change, so that a job
 * that is only put, reserved and deleted carries one field for them instead of seven (48 bytes
 * less per job; a million queued jobs is a normal backlog).
 */
class JobCounters {
  timeouts = 0;
  releases = 0;
  buries = 0;
  kicks = 0;
  strikes = 0;
  buryCause = 0;
  buriedSeq = 0;
}

/** The counters of every job that has not changed any: read-only, shared. */
const UNCHANGED: Readonly<JobCounters> = Object.freeze(new JobCounters());

/**
 * A job and its counters. Times are epoch milliseconds; durations are milliseconds. The body's
 * bytes live in the engine's body store (`slab`, `bodyOffset`, `bodyLength`).
 */
export class Job implements BodyHolder {
  state: JobState = 'ready';
  /** When the job becomes ready (delayed) or its TTR runs out (reserved); 0 otherwise. */
  deadlineAt = 0;
  reserves = 0;
  /** The rarer counters (JobCounters): UNCHANGED until one of them changes. */
  private more: JobCounters = UNCHANGED;
  /** Binlog segment holding the job's full record (0 without persistence; TRANSIENT_FILE never). */
  file = 0;
  reservedBy: Session | null = null;
  /** Position in the tube's ready or delay heap, or in the reserving session's heap. */
  heapIndex = -1;
  /** Position in the engine's global delay heap. */
  delayIndex = -1;
  /** Neighbours in the tube's buried list, or in the reserving session's list. */
  listPrev: Job | null = null;
  listNext: Job | null = null;
  slab!: BodySlab;
  bodyOffset = 0;
  bodyLength = 0;

  constructor(
    readonly id: number,
    public tube: Tube,
    public priority: number,
    public delayMs: number,
    public ttrMs: number,
    readonly createdAt: number,
  ) {}

  /** Sets the rarer counters at once (recovery): a job whose counters are all 0 keeps sharing UNCHANGED. */
  setCounters(c: Readonly<JobCounters>): void {
    const none = c.timeouts === 0 && c.releases === 0 && c.buries === 0 && c.kicks === 0 && c.strikes === 0 && c.buryCause === 0 && c.buriedSeq === 0;
    if (none && this.more === UNCHANGED) return;
    const more = this.own();
    more.timeouts = c.timeouts;
    more.releases = c.releases;
    more.buries = c.buries;
    more.kicks = c.kicks;
    more.strikes = c.strikes;
    more.buryCause = c.buryCause;
    more.buriedSeq = c.buriedSeq;
  }

  /** True while the job shares UNCHANGED (tests: recovery keeps the saving). */
  get countersShared(): boolean {
    return this.more === UNCHANGED;
  }

  private own(): JobCounters {
    if (this.more === UNCHANGED) this.more = new JobCounters();
    return this.more;
  }

  get timeouts(): number {
    return this.more.timeouts;
  }
  set timeouts(n: number) {
    this.own().timeouts = n;
  }
  get releases(): number {
    return this.more.releases;
  }
  set releases(n: number) {
    this.own().releases = n;
  }
  get buries(): number {
    return this.more.buries;
  }
  set buries(n: number) {
    this.own().buries = n;
  }
  get kicks(): number {
    return this.more.kicks;
  }
  set kicks(n: number) {
    this.own().kicks = n;
  }
  /** Releases plus timeouts since the job was put or last kicked: what the dead-letter rule counts. */
  get strikes(): number {
    return this.more.strikes;
  }
  set strikes(n: number) {
    this.own().strikes = n;
  }
  /** Why it was last buried, as a BURY_CAUSES index (0 until it is buried). */
  get buryCause(): number {
    return this.more.buryCause;
  }
  set buryCause(n: number) {
    this.own().buryCause = n;
  }
  /** Orders buried jobs across restarts: set from a counter each time the job is buried. */
  get buriedSeq(): number {
    return this.more.buriedSeq;
  }
  set buriedSeq(n: number) {
    this.own().buriedSeq = n;
  }

  /** The name of the job's tube (a Gearman function). */
  get tubeName(): string {
    return this.tube.name;
  }

  /** The buffer holding the body, at `bodyOffset` (read-only to everyone but the body store). */
  get bodyBuf(): Buffer {
    return this.slab.buf;
  }

  /** A view of the body: it allocates, so hot paths copy from `slab` directly. */
  get body(): Buffer {
    return bodyView(this);
  }
}

/**
 * A job as a binlog stores it and recovery hands it back: every field that survives a restart.
 * A reserved job's image says `ready` (a reservation does not outlive the server).
 */
export interface JobImage {
  id: number;
  tube: string;
  state: JobState;
  priority: number;
  delayMs: number;
  ttrMs: number;
  createdAt: number;
  /** Epoch ms when a delayed job becomes ready; 0 in other states. */
  deadlineAt: number;
  buriedSeq: number;
  reserves: number;
  timeouts: number;
  releases: number;
  buries: number;
  kicks: number;
  strikes: number;
  /** A BURY_CAUSES index. */
  buryCause: number;
  body: Buffer;
}

/** Ready order: priority, then id. */
export function readyLess(a: Job, b: Job): boolean {
  return a.priority < b.priority || (a.priority === b.priority && a.id < b.id);
}

/** Delayed and reserved order: deadline, then id. */
export function deadlineLess(a: Job, b: Job): boolean {
  return a.deadlineAt < b.deadlineAt || (a.deadlineAt === b.deadlineAt && a.id < b.id);
}

export function setHeapIndex(job: Job, index: number): void {
  job.heapIndex = index;
}

export function setDelayIndex(job: Job, index: number): void {
  job.delayIndex = index;
}
