import { IndexedHeap } from './heap.js';
import { deadlineLess, setHeapIndex, type Job } from './job.js';
import { JobList } from './job-list.js';
import { OrderedSet } from '../common/ordered-set.js';
import type { Rotation } from './rotation.js';
import type { Tube } from './tube.js';

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
  readonly reservedJobs = new JobList();
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
