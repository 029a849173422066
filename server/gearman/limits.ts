/** Gearman's limits, one place for the door, the stores and the composition root. */

/** Longest function name taken (gearmand takes 512; a binlog record keeps up to 255 bytes). */
export const MAX_FUNCTION_BYTES = 255;
/** Longest unique id (gearmand's GEARMAN_MAX_UNIQUE_SIZE). */
export const MAX_UNIQUE_BYTES = 64;
/** Functions one connection may register: a worker's GRAB and PRE_SLEEP cost grows with them. */
export const MAX_FUNCTIONS_PER_WORKER = 10_000;
/**
 * What a Gearman job costs on the heap in the record budget: the engine's record, plus the
 * door's unique-id key, its index entries and a waiting client's watcher set.
 */
export const GEARMAN_JOB_RECORD_BYTES = 1024;
