import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IndexedHeap } from './heap.js';

interface Item {
  key: number;
  id: number;
  index: number;
}

const less = (a: Item, b: Item): boolean => a.key < b.key || (a.key === b.key && a.id < b.id);

function makeHeap(): IndexedHeap<Item> {
  return new IndexedHeap<Item>(less, (item, index) => (item.index = index));
}

let nextId = 1;
function item(key: number): Item {
  return { key, id: nextId++, index: -2 };
}

function drain(heap: IndexedHeap<Item>): Item[] {
  const out: Item[] = [];
  for (let x = heap.pop(); x !== undefined; x = heap.pop()) out.push(x);
  return out;
}

/** Every item's recorded index is its real position, and every parent is not greater than its children. */
function expectValid(heap: IndexedHeap<Item>): void {
  for (let i = 0; i < heap.size; i++) {
    const x = heap.at(i)!;
    expect(x.index).toBe(i);
    if (i > 0) expect(less(x, heap.at((i - 1) >> 1)!)).toBe(false);
  }
}

const byKeyThenId = (a: Item, b: Item): number => a.key - b.key || a.id - b.id;

describe('IndexedHeap', () => {
  it('is empty at first', () => {
    const heap = makeHeap();
    expect(heap.size).toBe(0);
    expect(heap.peek()).toBeUndefined();
    expect(heap.pop()).toBeUndefined();
    expect(heap.at(0)).toBeUndefined();
  });

  it('pops in (key, id) order whatever the push order', () => {
    const heap = makeHeap();
    const items = [5, 3, 9, 1, 3, 7, 0, 5, 5, 2].map(item);
    for (const x of items) heap.push(x);
    expectValid(heap);
    expect(heap.size).toBe(10);
    expect(heap.peek()!.key).toBe(0);
    expect(drain(heap)).toEqual([...items].sort(byKeyThenId));
    expect(heap.size).toBe(0);
  });

  it('breaks ties by the second key (FIFO by id within one priority)', () => {
    const heap = makeHeap();
    const items = [item(7), item(7), item(7), item(7)];
    for (const x of [items[2]!, items[0]!, items[3]!, items[1]!]) heap.push(x);
    expect(drain(heap).map((x) => x.id)).toEqual(items.map((x) => x.id));
  });

  it('marks an item -1 once it leaves the heap', () => {
    const heap = makeHeap();
    const a = item(1);
    const b = item(2);
    heap.push(a);
    heap.push(b);
    expect(heap.pop()).toBe(a);
    expect(a.index).toBe(-1);
    expect(b.index).toBe(0);
    expect(heap.removeAt(b.index)).toBe(b);
    expect(b.index).toBe(-1);
    expect(heap.size).toBe(0);
  });

  it('removes any item by its recorded index: root, middle and last', () => {
    const heap = makeHeap();
    const items = Array.from({ length: 15 }, (_, i) => item(i));
    for (const x of [...items].reverse()) heap.push(x);
    const last = heap.at(heap.size - 1)!;
    expect(heap.removeAt(last.index)).toBe(last);
    expectValid(heap);
    const root = heap.peek()!;
    expect(heap.removeAt(root.index)).toBe(root);
    expectValid(heap);
    const middle = items[7]!;
    expect(heap.removeAt(middle.index)).toBe(middle);
    expectValid(heap);
    const rest = items.filter((x) => x !== last && x !== root && x !== middle);
    expect(drain(heap)).toEqual(rest);
  });

  it('moves the last item up when it replaces a removed item in another subtree', () => {
    // Pushed in this order the array is exactly this layout. The hole (21, index 9) is in the
    // left subtree under 20; the last item (5, index 11) comes from the right subtree and is
    // smaller than 20, so it has to sift up, not down.
    const heap = makeHeap();
    const keys = [0, 1, 2, 10, 20, 3, 4, 11, 12, 21, 22, 5];
    const items = keys.map(item);
    for (const x of items) heap.push(x);
    expect(items.map((x) => x.index)).toEqual(keys.map((_, i) => i));
    const victim = items[9]!;
    const last = items[11]!;
    heap.removeAt(victim.index);
    expectValid(heap);
    expect(last.index).toBe(4);
    expect(drain(heap).map((x) => x.key)).toEqual(keys.filter((k) => k !== 21).sort((a, b) => a - b));
  });

  it('restores order after a key goes down or up (update)', () => {
    const heap = makeHeap();
    const items = [10, 20, 30, 40, 50, 60].map(item);
    for (const x of items) heap.push(x);
    const x50 = items[4]!;
    x50.key = 5;
    heap.update(x50.index);
    expectValid(heap);
    expect(heap.peek()).toBe(x50);
    const x10 = items[0]!;
    x10.key = 55;
    heap.update(x10.index);
    expectValid(heap);
    expect(drain(heap).map((x) => x.key)).toEqual([5, 20, 30, 40, 55, 60]);
  });

  it('visits every item with forEach', () => {
    const heap = makeHeap();
    const items = [4, 2, 8, 6].map(item);
    for (const x of items) heap.push(x);
    const seen: Item[] = [];
    heap.forEach((x) => seen.push(x));
    expect(seen.sort(byKeyThenId)).toEqual([...items].sort(byKeyThenId));
  });

  it('sorts 100,000 items', () => {
    const heap = makeHeap();
    let seed = 12345;
    const items: Item[] = [];
    for (let i = 0; i < 100_000; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      items.push(item(seed % 1000));
    }
    for (const x of items) heap.push(x);
    const out = drain(heap);
    expect(out.length).toBe(items.length);
    let outOfOrder = 0;
    for (let i = 1; i < out.length; i++) if (less(out[i]!, out[i - 1]!)) outOfOrder++;
    expect(outOfOrder).toBe(0);
  });

  it('agrees with a sorted-array model under random push, pop, removeAt and update', () => {
    type Op =
      | { op: 'push'; key: number }
      | { op: 'pop' }
      | { op: 'remove'; pick: number }
      | { op: 'rekey'; pick: number; key: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('push' as const), key: fc.integer({ min: 0, max: 20 }) }),
      fc.record({ op: fc.constant('pop' as const) }),
      fc.record({ op: fc.constant('remove' as const), pick: fc.nat() }),
      fc.record({ op: fc.constant('rekey' as const), pick: fc.nat(), key: fc.integer({ min: 0, max: 20 }) }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const heap = makeHeap();
        let model: Item[] = [];
        for (const o of ops) {
          if (o.op === 'push') {
            const x = item(o.key);
            heap.push(x);
            model.push(x);
          } else if (o.op === 'pop') {
            model.sort(byKeyThenId);
            expect(heap.pop()).toBe(model.shift());
          } else if (model.length > 0) {
            const x = model[o.pick % model.length]!;
            if (o.op === 'remove') {
              expect(heap.removeAt(x.index)).toBe(x);
              expect(x.index).toBe(-1);
              model = model.filter((y) => y !== x);
            } else {
              x.key = o.key;
              heap.update(x.index);
            }
          }
          expectValid(heap);
          expect(heap.size).toBe(model.length);
          model.sort(byKeyThenId);
          expect(heap.peek()).toBe(model[0]);
        }
        expect(drain(heap)).toEqual(model);
      }),
      { numRuns: 300 },
    );
  });
});
