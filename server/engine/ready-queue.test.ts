import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Job, Tube, makeJob } from './records.js';
import { readyLess } from './ready-queue.js';
import { ReadyQueue } from './ready-queue.js';
import { TimeBase } from './time-base.js';

const tube = new Tube('t', new TimeBase(0));
const byOrder = (a: Job, b: Job): number => (readyLess(a, b) ? -1 : readyLess(b, a) ? 1 : 0);

/** An operation on the queue: put a new job, put back one taken earlier (a release), take the first, or remove any. */
type Op = { kind: 'put'; priority: number } | { kind: 'putBack'; pick: number } | { kind: 'take' } | { kind: 'remove'; pick: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('put' as const), priority: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('putBack' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'take' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
);

describe('ReadyQueue', () => {
  it('keeps (priority, id) order through any mix of in-order puts, releases and removals', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), fc.boolean(), (ops, samePriority) => {
        const queue = new ReadyQueue<Job>();
        const model: Job[] = [];
        const out: Job[] = [];
        let nextId = 1;
        for (const o of ops) {
          if (o.kind === 'put') {
            const job = makeJob(nextId++, tube, samePriority ? 0 : o.priority, 0, 1000, 0);
            queue.push(job);
            model.push(job);
          } else if (o.kind === 'putBack' && out.length > 0) {
            const job = out.splice(o.pick % out.length, 1)[0]!;
            queue.push(job);
            model.push(job);
          } else if (o.kind === 'take') {
            model.sort(byOrder);
            const first = queue.peek();
            expect(first).toBe(model[0]);
            if (first !== undefined) {
              queue.remove(first);
              out.push(model.shift()!);
            }
          } else if (o.kind === 'remove' && model.length > 0) {
            const job = model.splice(o.pick % model.length, 1)[0]!;
            queue.remove(job);
            out.push(job);
          }
          expect(queue.size).toBe(model.length);
          expect(queue.runIsSorted()).toBe(true);
        }
        model.sort(byOrder);
        expect(queue.ordered(1e9)).toEqual(model);
        const cut = model[Math.floor(model.length / 2)];
        if (cut !== undefined) {
          expect(queue.ordered(5, (j) => !readyLess(cut, j))).toEqual(model.filter((j) => readyLess(cut, j)).slice(0, 5));
        }
        const seen: Job[] = [];
        queue.forEach((j) => seen.push(j));
        expect(seen.sort(byOrder)).toEqual(model);
      }),
      { numRuns: 300 },
    );
  });

  it('takes in-order jobs from the run without touching the heap', () => {
    const queue = new ReadyQueue<Job>();
    const jobs = Array.from({ length: 1000 }, (_, i) => makeJob(i + 1, tube, 5, 0, 1000, 0));
    for (const job of jobs) queue.push(job);
    // A job in the run is marked as such (not a heap position).
    expect(jobs.every((j) => j.heapIndex === -2)).toBe(true);
    const urgent = makeJob(2000, tube, 1, 0, 1000, 0);
    queue.push(urgent);
    expect(urgent.heapIndex).toBe(0);
    expect(queue.peek()).toBe(urgent);
    queue.remove(urgent);
    for (const job of jobs) {
      expect(queue.peek()).toBe(job);
      queue.remove(job);
    }
    expect(queue.size).toBe(0);
    expect(queue.peek()).toBeUndefined();
  });
});
