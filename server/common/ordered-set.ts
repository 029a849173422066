/**
 * An unordered set with beanstalkd's `ms` semantics, which decide observable orders:
 * removal swaps the last item into the hole (list-tubes order after a tube goes away),
 * and `take` is round-robin over that array (the order in which waiting clients are served).
 * Small sets (a tube's few waiting workers) find items by a linear search, which is several
 * times cheaper than a hash map: a worker watching 10,000 tubes joins and leaves 10,000 of them
 * per blocking reserve. Past LINEAR_MAX items an index map makes membership and removal O(1).
 */
/** Sizes up to which membership is a linear search. */
const LINEAR_MAX = 16;

export class OrderedSet<T> {
  private readonly items: T[] = [];
  /** Positions of the items, built once the set outgrows a linear search. */
  private index: Map<T, number> | null = null;
  private last = 0;

  get size(): number {
    return this.items.length;
  }

  has(item: T): boolean {
    return this.indexOf(item) >= 0;
  }

  /** Appends `item` unless present; returns false when it was already there. */
  add(item: T): boolean {
    if (this.indexOf(item) >= 0) return false;
    this.items.push(item);
    if (this.index !== null) this.index.set(item, this.items.length - 1);
    else if (this.items.length > LINEAR_MAX) this.index = new Map(this.items.map((it, i) => [it, i]));
    return true;
  }

  delete(item: T): boolean {
    const i = this.indexOf(item);
    if (i < 0) return false;
    this.deleteAt(i);
    return true;
  }

  /** Removes and returns the next item in beanstalkd's round-robin order. */
  take(): T | undefined {
    if (this.items.length === 0) return undefined;
    this.last = this.last % this.items.length;
    const item = this.items[this.last]!;
    this.deleteAt(this.last);
    this.last++;
    return item;
  }

  /** Removes and returns the first item (beanstalkd's ms_clear order: first, then last, ...). */
  shift(): T | undefined {
    if (this.items.length === 0) return undefined;
    const item = this.items[0]!;
    this.deleteAt(0);
    return item;
  }

  values(): readonly T[] {
    return this.items;
  }

  clear(): void {
    this.items.length = 0;
    this.index = null;
  }

  private indexOf(item: T): number {
    return this.index === null ? this.items.indexOf(item) : (this.index.get(item) ?? -1);
  }

  private deleteAt(i: number): void {
    const item = this.items[i]!;
    const moved = this.items.pop()!;
    this.index?.delete(item);
    if (i < this.items.length) {
      this.items[i] = moved;
      this.index?.set(moved, i);
    }
  }
}
