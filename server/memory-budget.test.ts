import { describe, expect, it } from 'vitest';
import { machineFacts, memoryBudget } from './memory-budget.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe('memoryBudget', () => {
  it('leaves a quarter of a large heap, and what is in use at start, free of job records', () => {
    const b = memoryBudget(null, { heapLimit: 4 * GiB, heapUsed: 10 * MiB, memory: 24 * GiB });
    expect(b.maxRecordHeapBytes).toBe(3 * GiB - 10 * MiB);
    // Bodies: 40% of what the heap cannot take.
    expect(b.maxJobBytes).toBe(Math.floor(20 * GiB * 0.4));
  });

  it('keeps at least 64 MiB of a small heap free (--max-old-space-size=64 gives a 112 MiB limit)', () => {
    const b = memoryBudget(null, { heapLimit: 112 * MiB, heapUsed: 5 * MiB, memory: 24 * GiB });
    expect(b.maxRecordHeapBytes).toBe(43 * MiB);
    expect(memoryBudget(null, { heapLimit: 60 * MiB, heapUsed: 5 * MiB, memory: GiB }).maxRecordHeapBytes).toBe(0);
  });

  it('counts on at most half the memory for the heap, whatever its limit (--max-old-space-size above the memory)', () => {
    const b = memoryBudget(null, { heapLimit: 32 * GiB, heapUsed: 0, memory: 16 * GiB });
    expect(b.maxRecordHeapBytes).toBe(6 * GiB);
    expect(b.maxJobBytes).toBe(Math.floor(8 * GiB * 0.4));
  });

  it('takes --max-job-bytes as given, and never goes below 64 MiB of bodies by default', () => {
    expect(memoryBudget(1000, { heapLimit: 4 * GiB, heapUsed: 0, memory: GiB }).maxJobBytes).toBe(1000);
    expect(memoryBudget(null, { heapLimit: 4 * GiB, heapUsed: 0, memory: 128 * MiB }).maxJobBytes).toBe(64 * MiB);
  });

  it('reads the heap limit, heap use and memory of this process', () => {
    const facts = machineFacts();
    expect(facts.heapLimit).toBeGreaterThan(facts.heapUsed);
    expect(facts.heapUsed).toBeGreaterThan(0);
    expect(facts.memory).toBeGreaterThan(0);
  });
});
