/**
 * A binary min-heap whose items remember their own position, so any item can be removed
 * or re-ordered in O(log n). The position is stored through `setIndex` (-1 once removed).
 */
export class IndexedHeap<T> {
  private readonly items: T[] = [];

  constructor(
    private readonly less: (a: T, b: T) => boolean,
    private readonly setIndex: (item: T, index: number) => void,
  ) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  at(index: number): T | undefined {
    return this.items[index];
  }

  push(item: T): void {
    this.items.push(item);
    this.setIndex(item, this.items.length - 1);
    this.siftUp(this.items.length - 1);
  }

  pop(): T | undefined {
    if (this.items.length === 0) return undefined;
    return this.removeAt(0);
  }

  /** Removes the item at `index` (as last reported through setIndex). */
  removeAt(index: number): T {
    const items = this.items;
    const item = items[index]!;
    const last = items.pop()!;
    if (index < items.length) {
      this.place(last, index);
      this.siftDown(index);
      this.siftUp(index);
    }
    this.setIndex(item, -1);
    return item;
  }

  /** Restores heap order after the key of the item at `index` changed. */
  update(index: number): void {
    this.siftDown(index);
    this.siftUp(index);
  }

  /**
   * Up to `limit` items in sorted order, leaving out the leading ones for which `before` is true
   * (a page after a cursor). A best-first walk of the heap: O((skipped + limit) log n), so the
   * first pages of a huge heap cost next to nothing and nothing is sorted or copied.
   */
  ordered(limit: number, before: (item: T) => boolean = () => false): T[] {
    const items = this.items;
    const out: T[] = [];
    if (items.length === 0 || limit <= 0) return out;
    const frontier = new IndexedHeap<number>(
      (a, b) => this.less(items[a]!, items[b]!),
      () => undefined,
    );
    frontier.push(0);
    while (out.length < limit && frontier.size > 0) {
      const i = frontier.pop()!;
      if (!before(items[i]!)) out.push(items[i]!);
      const left = 2 * i + 1;
      if (left < items.length) frontier.push(left);
      if (left + 1 < items.length) frontier.push(left + 1);
    }
    return out;
  }

  /** Visits items in heap-array order (not sorted). */
  forEach(fn: (item: T) => void): void {
    for (const item of this.items) fn(item);
  }

  private siftUp(index: number): void {
    const items = this.items;
    const item = items[index]!;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      const p = items[parent]!;
      if (!this.less(item, p)) break;
      this.place(p, index);
      index = parent;
    }
    this.place(item, index);
  }

  private siftDown(index: number): void {
    const items = this.items;
    const n = items.length;
    const item = items[index]!;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && this.less(items[right]!, items[left]!) ? right : left;
      const c = items[child]!;
      if (!this.less(c, item)) break;
      this.place(c, index);
      index = child;
    }
    this.place(item, index);
  }

  /** Puts `item` at `index` and tells it so (both sifts, for each item they move). */
  private place(item: T, index: number): void {
    this.items[index] = item;
    this.setIndex(item, index);
  }
}

/** The `setIndex` of a heap whose items keep their position in a `heapIndex` field (jobs). */
export function setHeapIndex(item: { heapIndex: number }, index: number): void {
  item.heapIndex = index;
}
