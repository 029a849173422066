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
 * A job and its counters. Times are epoch milliseconds; durations are milliseconds. The body's
 * bytes live in the engine's body store (`slab`, `bodyOffset`, `bodyLength`).
 */
export class Job implements BodyHolder {
  state: JobState = 'ready';
  /** When the job becomes ready (delayed) or its TTR runs out (reserved); 0 otherwise. */
  deadlineAt = 0;
  reserves = 0;
  timeouts = 0;
  releases = 0;
  buries = 0;
  kicks = 0;
  /** Releases plus timeouts since the job was put or last kicked: what the dead-letter rule counts. */
  strikes = 0;
  /** Why it was last buried, as a BURY_CAUSES index (0 until it is buried). */
  buryCause = 0;
  /** Orders buried jobs across restarts: set from a counter each time the job is buried. */
  buriedSeq = 0;
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
