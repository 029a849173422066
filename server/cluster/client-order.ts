/**
 * Keeps each client's requests in its command order across statements. A batch's statements
 * run two at a time, and two statements in flight may take effect in either order: a put's id,
 * which of two deletes of one job wins, which of two reserves gets the better job. So while a
 * client has a request in a statement in flight, its later requests wait for the next one, as
 * one command at a time would have them. Client 0 (the dashboard) has no order to keep.
 */
export class ClientOrder<T> {
  /** Clients with requests in a statement in flight, and in how many statements. */
  private readonly busy = new Map<number, number>();

  constructor(private readonly clientOf: (request: T) => number) {}

  /**
   * Splits `queue` into the next statement's requests (while `fits` says another one fits) and
   * those that wait, both in queue order; the taken ones count as in flight until `done`.
   */
  take(queue: T[], fits: (taken: T[], next: T) => boolean): { batch: T[]; rest: T[] } {
    const batch: T[] = [];
    const rest: T[] = [];
    const blocked = new Set(this.busy.keys());
    for (const request of queue) {
      const client = this.clientOf(request);
      if (!fits(batch, request) || (client !== 0 && blocked.has(client))) {
        if (client !== 0) blocked.add(client);
        rest.push(request);
        continue;
      }
      batch.push(request);
    }
    for (const request of batch) {
      const client = this.clientOf(request);
      if (client !== 0) this.busy.set(client, (this.busy.get(client) ?? 0) + 1);
    }
    return { batch, rest };
  }

  /** The statement holding `batch` is over (committed or failed). */
  done(batch: T[]): void {
    for (const request of batch) {
      const client = this.clientOf(request);
      if (client === 0) continue;
      const n = this.busy.get(client)! - 1;
      if (n === 0) this.busy.delete(client);
      else this.busy.set(client, n);
    }
  }
}
