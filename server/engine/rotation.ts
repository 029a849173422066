/**
 * A worker's functions in the order --gearman-round-robin offers them (gearmand's
 * `--round-robin`): the function registered last comes first, and the one a job was just taken
 * from goes to the back, so a worker that can do several functions gets them in turn instead of
 * draining one before the next. Generic over what names a function (a tube, a tube name).
 */
export class Rotation<T> {
  private items: T[] = [];

  /** A newly registered function: offered first, as gearmand puts it at the head of the worker's list. */
  add(item: T): void {
    if (this.items.includes(item)) return;
    this.items.unshift(item);
  }

  delete(item: T): void {
    const i = this.items.indexOf(item);
    if (i >= 0) this.items.splice(i, 1);
  }

  /** A job of `item` was just handed out: it goes to the back. */
  served(item: T): void {
    const i = this.items.indexOf(item);
    if (i < 0 || i === this.items.length - 1) return;
    this.items.splice(i, 1);
    this.items.push(item);
  }

  /** The order to look in. */
  order(): readonly T[] {
    return this.items;
  }
}
