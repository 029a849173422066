import { IndexedHeap } from './heap.js';
import { deadlineLess, setHeapIndex, type Job } from './job.js';
import { JobList } from './job-list.js';
import { OrderedSet } from './ordered-set.js';
import type { Tube } from './tube.js';

/** How the engine answers a session that was blocked in reserve. */
export interface SessionDelegate {
  reserved(job: Job): void;
  timedOut(): void;
  deadlineSoon(): void;
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
  /** When a blocked reserve gives up (epoch ms), or -1 to wait forever. */
  waitUntil = -1;
  /** When the engine must next look at this session (TTR, DEADLINE_SOON or reserve timeout); 0 for never. */
  tickAt = 0;
  tickIndex = -1;
  isProducer = false;
  isWorker = false;
  /** Who the front door says this is (a peer address), for the dashboard's connection list. */
  peer = '';
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
