import { IndexedHeap } from './heap.js';
import { deadlineLess, readyLess, setHeapIndex, type Job } from './job.js';
import { JobList } from './job-list.js';
import { OrderedSet } from './ordered-set.js';
import type { Session } from './session.js';

/** A named queue: its ready heap, delay heap, buried FIFO and the sessions using or watching it. */
export class Tube {
  readonly ready = new IndexedHeap<Job>(readyLess, setHeapIndex);
  readonly delayed = new IndexedHeap<Job>(deadlineLess, setHeapIndex);
  /** Buried jobs, oldest first. */
  readonly buried = new JobList();
  /** Sessions blocked in reserve that watch this tube. */
  readonly waiting = new OrderedSet<Session>();

  urgent = 0;
  reserved = 0;
  totalJobs = 0;
  using = 0;
  watching = 0;
  cmdDelete = 0;
  cmdPause = 0;
  /** Length of the current pause in ms (0 when not paused) and when it ends (epoch ms). */
  pauseMs = 0;
  unpauseAt = 0;

  /** Position in the engine's heap of tubes that have both waiters and ready jobs. */
  awaitedIndex = -1;
  /** Position in the engine's heap of paused tubes. */
  pauseIndex = -1;

  constructor(readonly name: string) {}

  get paused(): boolean {
    return this.pauseMs > 0;
  }

  /** Jobs of every state that belong to this tube. */
  get jobCount(): number {
    return this.ready.size + this.delayed.size + this.buried.size + this.reserved;
  }

  firstBuried(): Job | undefined {
    return this.buried.first();
  }
}
