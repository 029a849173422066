import { IndexedHeap } from './heap.js';
import { deadlineLess, setHeapIndex, type Job, type JobState } from './job.js';
import { JobList } from './job-list.js';
import { OrderedSet } from '../common/ordered-set.js';
import { ReadyQueue } from './ready-queue.js';
import type { Session } from './session.js';
import type { TimeBase } from './time-base.js';
import type { TubeGate } from './tube-gate.js';

let tubesMade = 0;

/** A named queue: its ready queue, delay heap, buried FIFO and the sessions using or watching it. */
export class Tube {
  /** Tells apart two tubes of the same name, one removed and one made later. */
  readonly serial = ++tubesMade;
  readonly ready = new ReadyQueue();
  readonly delayed = new IndexedHeap<Job>(deadlineLess, setHeapIndex);
  /** Buried jobs, oldest first. */
  readonly buried = new JobList();
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
    this.stateChanges[STATE_INDEX[state]]++;
  }

  firstBuried(): Job | undefined {
    return this.buried.first();
  }
}

/** Index of each state in `Tube.stateChanges`. */
export const STATE_INDEX: Readonly<Record<JobState, 0 | 1 | 2 | 3>> = { ready: 0, reserved: 1, delayed: 2, buried: 3 };
