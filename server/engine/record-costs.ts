/**
 * What the engine's records cost on the V8 heap, in bytes: the numbers the record budget
 * (`EngineOptions.maxRecordHeapBytes`) counts with. Measured with `v8.getHeapStatistics()`
 * around a million puts on Node 20 (a job with its index entry: about 152 bytes, delayed or
 * ready alike; about 90 more once it has been released, buried, kicked or timed out (Job.more),
 * and 60 to 120 more for a time or duration too large for its fields; a tube with its heaps and
 * lists: about 800 bytes plus its name), then rounded up generously, since jobs in transit
 * (reserved, in a session's heap and list) and the slack of growing arrays
 * cost more.
 */
export const JOB_RECORD_HEAP_BYTES = 320;
export const TUBE_RECORD_HEAP_BYTES = 1280;
