import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OrderedSet } from './ordered-set.js';

function setOf(...items: number[]): OrderedSet<number> {
  const set = new OrderedSet<number>();
  for (const x of items) set.add(x);
  return set;
}

function takeAll(set: OrderedSet<number>): number[] {
  const out: number[] = [];
  for (let x = set.take(); x !== undefined; x = set.take()) out.push(x);
  return out;
}

/**
 * A literal transcription of beanstalkd's ms.c (linear search, swap-remove, round-robin take
 * with `last` kept across calls and reset by ms_clear), used as the model.
 */
class BeanstalkdMs {
  items: number[] = [];
  last = 0;

  append(x: number): void {
    this.items.push(x);
  }

  private delete(i: number): void {
    const last = this.items.pop()!;
    if (i < this.items.length) this.items[i] = last;
  }

  remove(x: number): boolean {
    const i = this.items.indexOf(x);
    if (i < 0) return false;
    this.delete(i);
    return true;
  }

  take(): number | undefined {
    if (this.items.length === 0) return undefined;
    this.last = this.last % this.items.length;
    const x = this.items[this.last]!;
    this.delete(this.last);
    this.last++;
    return x;
  }

  /** ms_clear: `while (ms_remove(a, a->items[0]));` and returns the removal order. */
  clear(): number[] {
    const order: number[] = [];
    while (this.items.length > 0) {
      const x = this.items[0]!;
      this.remove(x);
      order.push(x);
    }
    return order;
  }
}

describe('OrderedSet', () => {
  it('keeps insertion order and ignores duplicates', () => {
    const set = new OrderedSet<string>();
    expect(set.size).toBe(0);
    expect(set.add('a')).toBe(true);
    expect(set.add('b')).toBe(true);
    expect(set.add('a')).toBe(false);
    expect(set.add('c')).toBe(true);
    expect(set.values()).toEqual(['a', 'b', 'c']);
    expect(set.size).toBe(3);
    expect(set.has('b')).toBe(true);
    expect(set.has('z')).toBe(false);
  });

  it('fills a removed slot with the last item (swap-remove)', () => {
    const set = setOf(1, 2, 3, 4);
    expect(set.delete(2)).toBe(true);
    expect(set.values()).toEqual([1, 4, 3]);
    expect(set.has(2)).toBe(false);
    // the moved item's index is kept right: it can be found and removed again
    expect(set.delete(4)).toBe(true);
    expect(set.values()).toEqual([1, 3]);
  });

  it('removes the last item without moving anything', () => {
    const set = setOf(1, 2, 3);
    expect(set.delete(3)).toBe(true);
    expect(set.values()).toEqual([1, 2]);
  });

  it('returns false when deleting an item that is not there', () => {
    const set = setOf(1, 2);
    expect(set.delete(9)).toBe(false);
    expect(set.values()).toEqual([1, 2]);
  });

  it('take on an empty set gives undefined', () => {
    expect(new OrderedSet<number>().take()).toBeUndefined();
    expect(new OrderedSet<number>().shift()).toBeUndefined();
  });

  it('takes two items FIFO (ms_take test)', () => {
    expect(takeAll(setOf(1, 2))).toEqual([1, 2]);
  });

  it('takes 1..6 in the order 1, 2, 3, 6, 5, 4 (ms_take_sequence)', () => {
    expect(takeAll(setOf(1, 2, 3, 4, 5, 6))).toEqual([1, 2, 3, 6, 5, 4]);
  });

  it('takes 4 items in the order 1, 2, 4, 3 (the waiter order beanstalkd shows)', () => {
    expect(takeAll(setOf(1, 2, 3, 4))).toEqual([1, 2, 4, 3]);
  });

  it('keeps its round-robin position across takes when items are added in between', () => {
    const set = setOf(1, 2, 3);
    expect(set.take()).toBe(1); // [3, 2], next position 1
    set.add(4); // [3, 2, 4]
    expect(set.take()).toBe(2); // [3, 4], next position 2
    expect(set.take()).toBe(3); // position 2 % 2 = 0
    expect(set.take()).toBe(4);
    expect(set.take()).toBeUndefined();
  });

  it('shift removes the first item each time (ms_clear order: first, then the last moved up)', () => {
    const set = setOf(1, 2, 3, 4);
    const order: number[] = [];
    for (let x = set.shift(); x !== undefined; x = set.shift()) order.push(x);
    expect(order).toEqual([1, 4, 3, 2]);
    expect(set.size).toBe(0);
  });

  it('clear empties it', () => {
    const set = setOf(1, 2, 3);
    set.clear();
    expect(set.size).toBe(0);
    expect(set.has(1)).toBe(false);
    expect(set.add(1)).toBe(true);
    expect(set.values()).toEqual([1]);
  });

  it('matches beanstalkd ms.c under random add, delete, take and shift, below and above the linear-search size', () => {
    type Op = { op: 'add' | 'delete'; x: number } | { op: 'take' } | { op: 'shift' };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('add' as const), x: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ op: fc.constant('delete' as const), x: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ op: fc.constant('take' as const) }),
      fc.record({ op: fc.constant('shift' as const) }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const set = new OrderedSet<number>();
        const ms = new BeanstalkdMs();
        for (const o of ops) {
          switch (o.op) {
            case 'add': {
              // beanstalkd's callers check ms_contains before ms_append
              const added = !ms.items.includes(o.x);
              if (added) ms.append(o.x);
              expect(set.add(o.x)).toBe(added);
              break;
            }
            case 'delete':
              expect(set.delete(o.x)).toBe(ms.remove(o.x));
              break;
            case 'take':
              expect(set.take()).toBe(ms.take());
              break;
            case 'shift': {
              const first = ms.items[0];
              if (first !== undefined) ms.remove(first);
              expect(set.shift()).toBe(first);
              break;
            }
          }
          expect(set.values()).toEqual(ms.items);
          for (const x of ms.items) expect(set.has(x)).toBe(true);
        }
        expect([...set.values()]).toEqual(ms.items);
      }),
      { numRuns: 500 },
    );
  });

  it('clears in the same order as beanstalkd (repeatedly removing the first item)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 0, max: 1000 }), { maxLength: 30 }), (xs) => {
        const set = new OrderedSet<number>();
        const ms = new BeanstalkdMs();
        for (const x of xs) {
          set.add(x);
          ms.append(x);
        }
        const order: number[] = [];
        for (let x = set.shift(); x !== undefined; x = set.shift()) order.push(x);
        expect(order).toEqual(ms.clear());
      }),
    );
  });
});
