/**
 * What the engine's records cost on the V8 heap, in bytes: the numbers the record budget
 * (`EngineOptions.maxRecordHeapBytes`) counts with. Measured with `v8.getHeapStatistics()`
 * around a million puts on Node 20 (a job with its index entries: about 200 bytes ready, 240
 * delayed, and 80 more once it has been released, buried, kicked or timed out (Job.more); a
 * tube with its heaps and lists: about 800 bytes plus its name), then rounded up, since a few
 * jobs in transit (reserved, in a session's heap) and the slack of growing arrays cost a
 * little more.
 */
export const JOB_RECORD_HEAP_BYTES = 320;
export const TUBE_RECORD_HEAP_BYTES = 1280;
