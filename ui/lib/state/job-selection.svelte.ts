/** Jobs ticked in a list for a bulk action: some ids, or every job the list's search matches. */

export class JobSelection {
  ids = $state(new Set<number>());
  /** Every match of the search behind the list, not only the ticked ones. */
  allMatching = $state(false);

  has(id: number): boolean {
    return this.allMatching || this.ids.has(id);
  }

  toggle(id: number): void {
    const s = new Set(this.ids);
    if (s.has(id)) s.delete(id);
    else s.add(id);
    this.ids = s;
    this.allMatching = false;
  }

  /** Whether every one of `ids` (a page) is ticked. */
  hasAll(ids: readonly number[]): boolean {
    return ids.length > 0 && ids.every((id) => this.ids.has(id));
  }

  /** Ticks the whole page, or unticks it when it is all ticked already. */
  togglePage(ids: readonly number[]): void {
    const s = new Set(this.ids);
    if (this.hasAll(ids)) for (const id of ids) s.delete(id);
    else for (const id of ids) s.add(id);
    this.ids = s;
    this.allMatching = false;
  }

  clear(): void {
    this.ids = new Set();
    this.allMatching = false;
  }

  /** How many jobs an action would be asked to act on, given the search's `matched` count. */
  count(matched: number): number {
    return this.allMatching ? matched : this.ids.size;
  }
}
