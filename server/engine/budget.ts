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
  }

  /** True when one more job with a body of `bytes` fits both budgets. */
  hasRoomForJob(bytes: number): boolean {
    // Plain sums, no object: this runs for every put.
    let bodyBytes = this.own.bodyBytes + bytes;
    let recordBytes = this.own.recordHeapBytes + this.jobRecordBytes;
    for (const peer of this.peers) {
      bodyBytes += peer.bodyBytes;
      recordBytes += peer.recordHeapBytes;
    }
    return bodyBytes <= this.maxJobBytes && recordBytes <= this.maxRecordHeapBytes;
  }

  /** True when one more tube fits the record budget. */
  hasRoomForTube(): boolean {
    let recordBytes = this.own.recordHeapBytes;
    for (const peer of this.peers) recordBytes += peer.recordHeapBytes;
    return recordBytes + TUBE_RECORD_HEAP_BYTES <= this.maxRecordHeapBytes;
  }
}
