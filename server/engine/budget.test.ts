import { describe, expect, it } from 'vitest';
import { MemoryBudget, type MemoryUse } from './budget.js';

/** An engine's memory as the budget sees it: grows by what each admitted put takes. */
class Use implements MemoryUse {
  bodyBytes = 0;
  recordHeapBytes = 0;
}

const RECORD = 100;

/** Puts `bytes`-byte jobs through `budget` into `use` until one is refused; returns how many went in. */
function fill(budget: MemoryBudget, use: Use, bytes: number, max = 1_000_000): number {
  let n = 0;
  while (n < max && budget.hasRoomForJob(bytes)) {
    use.bodyBytes += bytes;
    use.recordHeapBytes += RECORD;
    n++;
  }
  return n;
}

describe('MemoryBudget', () => {
  it('admits puts up to the body limit exactly, though it does not count every put', () => {
    const use = new Use();
    const budget = new MemoryBudget(use, 10_000, 1_000_000_000, RECORD);
    expect(fill(budget, use, 7)).toBe(Math.floor(10_000 / 7));
    expect(use.bodyBytes).toBeLessThanOrEqual(10_000);
    expect(budget.hasRoomForJob(10_000 - use.bodyBytes + 1)).toBe(false);
    expect(budget.hasRoomForJob(10_000 - use.bodyBytes)).toBe(true);
  });

  it('admits puts up to the record limit exactly', () => {
    const use = new Use();
    const budget = new MemoryBudget(use, 1_000_000_000, 123_456, RECORD);
    expect(fill(budget, use, 1)).toBe(Math.floor(123_456 / RECORD));
  });

  it('keeps two engines that share the memory within one limit, whichever of them puts', () => {
    const a = new Use();
    const b = new Use();
    const budgetA = new MemoryBudget(a, 50_000, 1_000_000_000, RECORD);
    const budgetB = new MemoryBudget(b, 50_000, 1_000_000_000, RECORD);
    budgetA.share(b);
    budgetB.share(a);
    budgetB.poolWith(budgetA);
    // Interleaved puts: each engine's slack is the other's too.
    let admitted = 0;
    for (let i = 0; i < 20_000; i++) {
      const [budget, use] = i % 3 === 0 ? [budgetA, a] : [budgetB, b];
      if (!budget.hasRoomForJob(9)) continue;
      use.bodyBytes += 9;
      use.recordHeapBytes += RECORD;
      admitted++;
    }
    expect(admitted).toBe(Math.floor(50_000 / 9));
    expect(a.bodyBytes + b.bodyBytes).toBeLessThanOrEqual(50_000);
  });

  it('counts again after a tube takes record room', () => {
    const use = new Use();
    const budget = new MemoryBudget(use, 1_000_000_000, 1_000_000, RECORD);
    expect(budget.hasRoomForJob(1)).toBe(true); // leaves slack for about 2,500 records
    use.recordHeapBytes = 1_000_000 - RECORD + 1; // tubes took nearly all of it
    expect(budget.hasRoomForTube()).toBe(false);
    expect(budget.hasRoomForJob(1)).toBe(false);
  });
});
