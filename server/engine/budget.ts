import { TUBE_RECORD_HEAP_BYTES } from './record-costs.js';

/** What an engine holds in memory, as its budgets count it. */
export interface MemoryUse {
  /** Bytes of all job bodies. */
  readonly bodyBytes: number;
  /** What the job and tube records cost on the V8 heap (an estimate; see record-costs.ts). */
  readonly recordHeapBytes: number;
}

/**
 * An engine's two memory budgets: bytes of bodies (`--max-job-bytes`) and bytes of records on
 * the heap (derived from the heap limit, so the process never dies of heap exhaustion). Engines
 * in one process (beanstalkd's and Gearman's jobs) share the memory: each counts the others'.
 * A put, or a new tube, beyond either budget fails with OUT_OF_MEMORY.
 */
export class MemoryBudget {
  private readonly peers: MemoryUse[] = [];
  /** Room the engines may take without counting again (see `hasRoomForJob`); shared by the engines that share the memory. */
  private slack = new Slack();

  constructor(
    private readonly own: MemoryUse,
    private readonly maxJobBytes: number,
    private readonly maxRecordHeapBytes: number,
    /** What one more job costs in the record budget (bytes). */
    private readonly jobRecordBytes: number,
  ) {}

  /** Counts `peer`'s memory against these budgets too. */
  share(peer: MemoryUse): void {
    this.peers.push(peer);
    this.slack.clear();
  }

  /** Takes its room without counting from the same slack as `other` (an engine whose memory this one shares). */
  poolWith(other: MemoryBudget): void {
    this.slack = other.slack;
    this.slack.clear();
  }

  /**
   * True when one more job with a body of `bytes` fits both budgets. This runs for every put, so
   * the engines' memory is not summed each time: a count leaves a quarter of the room it found
   * as slack, shared by the engines, which each put takes from until it runs short. Near a limit
   * the slack is small and every put counts, so the limit is exact: a put is never let through
   * beyond it.
   */
  hasRoomForJob(bytes: number): boolean {
    const record = this.jobRecordBytes;
    const slack = this.slack;
    if (bytes <= slack.body && record <= slack.record) {
      slack.body -= bytes;
      slack.record -= record;
      return true;
    }
    let bodyBytes = this.own.bodyBytes;
    let recordBytes = this.own.recordHeapBytes;
    for (const peer of this.peers) {
      bodyBytes += peer.bodyBytes;
      recordBytes += peer.recordHeapBytes;
    }
    const bodyRoom = this.maxJobBytes - bodyBytes - bytes;
    const recordRoom = this.maxRecordHeapBytes - recordBytes - record;
    if (bodyRoom < 0 || recordRoom < 0) return false;
    slack.body = Math.floor(bodyRoom / 4);
    slack.record = Math.floor(recordRoom / 4);
    return true;
  }

  /** True when one more tube fits the record budget. */
  hasRoomForTube(): boolean {
    let recordBytes = this.own.recordHeapBytes;
    for (const peer of this.peers) recordBytes += peer.recordHeapBytes;
    // A tube takes record room the slack was counted from: every engine counts again at its next put.
    this.slack.clear();
    return recordBytes + TUBE_RECORD_HEAP_BYTES <= this.maxRecordHeapBytes;
  }
}

/** Bytes of bodies and of records that puts may take before the next count. */
class Slack {
  body = 0;
  record = 0;

  clear(): void {
    this.body = this.record = 0;
  }
}
