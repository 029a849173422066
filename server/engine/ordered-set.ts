/**
 * An unordered set with beanstalkd's `ms` semantics, which decide observable orders:
 * removal swaps the last item into the hole (list-tubes order after a tube goes away),
 * and `take` is round-robin over that array (the order in which waiting clients are served).
 * Membership and removal are O(1) through an index map.
 */
export class OrderedSet<T> {
  private readonly items: T[] = [];
  private readonly index = new Map<T, number>();
  private last = 0;

  get size(): number {
    return this.items.length;
  }

  has(item: T): boolean {
    return this.index.has(item);
  }

  /** Appends `item` unless present; returns false when it was already there. */
  add(item: T): boolean {
    if (this.index.has(item)) return false;
    this.index.set(item, this.items.length);
    this.items.push(item);
    return true;
  }

  delete(item: T): boolean {
    const i = this.index.get(item);
    if (i === undefined) return false;
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
    this.index.clear();
  }

  private deleteAt(i: number): void {
    const item = this.items[i]!;
    const moved = this.items.pop()!;
    this.index.delete(item);
    if (i < this.items.length) {
      this.items[i] = moved;
      this.index.set(moved, i);
    }
  }
}
