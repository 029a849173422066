import os from 'node:os';
import v8 from 'node:v8';

const MiB = 1024 * 1024;

/** Heap kept free of job records for everything else: connections, the dashboard, GC room. */
const MIN_HEAP_RESERVE = 64 * MiB;
const HEAP_RESERVE_SHARE = 0.25;
/**
 * Share of the memory the heap does not take that bodies may fill by default. Slabs of small
 * bodies can hold as many dead bytes as live ones before compaction catches up, so bodies may
 * cost up to twice this: 2 x 0.4 leaves a fifth of the rest to the process and the OS.
 */
const BODY_SHARE = 0.4;
const MIN_BODY_BUDGET = 64 * MiB;
/**
 * Share of the memory the heap may be counted on for, whatever its limit: with
 * --max-old-space-size near or above the machine's memory, records are kept to half of it.
 */
const HEAP_SHARE_OF_MEMORY = 0.5;

/** What the engine may hold, in bytes: bodies off the heap, and job and tube records on it. */
export interface MemoryBudget {
  maxJobBytes: number;
  maxRecordHeapBytes: number;
}

/** What the budget is derived from; `machine` reads it off this process and machine. */
export interface MemoryFacts {
  /** v8.getHeapStatistics().heap_size_limit: the heap size at which V8 gives up. */
  heapLimit: number;
  /** Heap in use now, before any job (the server's own code and state). */
  heapUsed: number;
  /** Physical memory, or the cgroup's limit when that is lower. */
  memory: number;
}

export function machineFacts(): MemoryFacts {
  const heap = v8.getHeapStatistics();
  const total = os.totalmem();
  // constrainedMemory() is the cgroup limit; unconstrained, it reports a huge number (or 0).
  const constrained = process.constrainedMemory?.() ?? 0;
  return {
    heapLimit: heap.heap_size_limit,
    heapUsed: heap.used_heap_size,
    memory: constrained > 0 && constrained < total ? constrained : total,
  };
}

/**
 * The budgets: records may fill the heap up to its limit (at most half the machine's memory)
 * less a reserve (a quarter, at least 64 MiB) and what is in use at start; bodies may take
 * `maxJobBytes` if given (--max-job-bytes), else 40% of the memory the heap cannot take. At any heap size (NODE_OPTIONS
 * --max-old-space-size included) puts then get OUT_OF_MEMORY well before V8 or the machine runs out.
 */
export function memoryBudget(maxJobBytes: number | null, facts: MemoryFacts): MemoryBudget {
  const heap = Math.min(facts.heapLimit, facts.memory * HEAP_SHARE_OF_MEMORY);
  const reserve = Math.max(MIN_HEAP_RESERVE, heap * HEAP_RESERVE_SHARE);
  return {
    maxJobBytes: maxJobBytes ?? Math.max(MIN_BODY_BUDGET, Math.floor((facts.memory - heap) * BODY_SHARE)),
    maxRecordHeapBytes: Math.max(0, Math.floor(heap - reserve - facts.heapUsed)),
  };
}
