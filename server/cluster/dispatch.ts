import type { Logger } from 'pino';

/** A client of this node blocked in reserve (or asleep until a job is ready): a ClusterClient. */
export interface WaitingClient {
  /**
   * When its reserve (or sleep) came, in command order across the node's clients. Waiters are
   * served in this order, not in the order their own first statements came back: with two
   * statements in flight, a later reserve's may come back first.
   */
  readonly arrival: number;
  watchedTubes(): string[];
  /** Tries a reserve over `tubes`; true when the client is served (or woken). */
  offer(tubes: string[]): Promise<boolean>;
}

/**
 * This node's waiting clients and the news that sends them to look: jobs made ready in some tubes
 * (here, or on another node, heard through LISTEN). Offers go to every waiting client that
 * watches a tube with news, all at once, so their reserves share one statement per set of tubes
 * (the store's reserveMany hands the best jobs to the oldest waiters first); news that arrives
 * meanwhile starts another round.
 */
export class ReserveDispatch<C extends WaitingClient> {
  /** Waiting clients, in arrival order. */
  private readonly waiters = new Set<C>();
  /** The latest arrival among those added (a later one is appended, an earlier one sorted in). */
  private lastArrival = 0;
  /** Tubes with news since the last round (null: all of them). */
  private news: Set<string> | null = new Set();
  private dispatching = false;
  private queued = false;
  /** Bumped by every wake: a reserve that saw it change while it looked looks again. */
  generation = 0;

  constructor(private readonly log: Logger) {}

  /** How many clients wait. */
  get size(): number {
    return this.waiters.size;
  }

  add(client: C): void {
    this.waiters.add(client);
    if (client.arrival >= this.lastArrival) {
      this.lastArrival = client.arrival;
      return;
    }
    // Came back before a reserve that came earlier: the waiters are put in arrival order again.
    const ordered = [...this.waiters].sort((a, b) => a.arrival - b.arrival);
    this.waiters.clear();
    for (const c of ordered) this.waiters.add(c);
  }

  delete(client: C): void {
    this.waiters.delete(client);
  }

  /** News for the waiters: they look for jobs in these tubes (null: in any tube). */
  wake(tubes: Set<string> | null): void {
    this.generation++;
    if (this.news !== null) {
      if (tubes === null) this.news = null;
      else for (const t of tubes) this.news.add(t);
    }
    if (this.waiters.size === 0) {
      this.news = new Set();
      return;
    }
    if (this.dispatching) {
      this.queued = true;
      return;
    }
    void this.dispatch();
  }

  private async dispatch(): Promise<void> {
    this.dispatching = true;
    try {
      do {
        this.queued = false;
        const news = this.news;
        this.news = new Set();
        const offers: Promise<boolean>[] = [];
        for (const client of this.waiters) {
          // All its tubes, not only those with news: a better job may wait in another one.
          const tubes = client.watchedTubes();
          if (news === null || tubes.some((t) => news.has(t))) offers.push(client.offer(tubes));
        }
        await Promise.all(offers);
      } while (this.queued && this.waiters.size > 0);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: waking waiting reserves failed (the next poll tries again)');
    } finally {
      this.dispatching = false;
    }
  }
}
