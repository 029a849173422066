import type { Pending } from './operations.js';

/** Jobs moved per turn of the event loop by any bulk action (kick, clear, move, a client leaving). */
export const SLICE = 1024;

/** Waits one turn, so other clients are served between two slices. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs `step(max)` (which does up to `max` units of work and returns how many it did) until
 * `bound` units are done or a step does fewer than it was asked, yielding to I/O between
 * slices so a kick of millions of jobs never stalls other clients. Returns the total: a plain
 * number when one slice was enough (the common case: no promise), else a promise of it.
 * `afterSlice` runs after each deferred slice (to re-arm the scheduler).
 */
export function sliced(bound: number, step: (max: number) => number, afterSlice: () => void): Pending<number> {
  const first = Math.min(SLICE, bound);
  const done = step(first);
  if (done < first || done >= bound) return done;
  return (async () => {
    let total = done;
    for (;;) {
      await nextTurn();
      const want = Math.min(SLICE, bound - total);
      const n = step(want);
      total += n;
      afterSlice();
      if (n < want || total >= bound) return total;
    }
  })();
}
