/**
 * Requests of one turn of the event loop, from any number of clients, answered by one statement:
 * with synchronous_commit on, each statement costs a commit (a WAL flush), so sixteen workers'
 * deletes cost one flush instead of sixteen. While a statement is in flight the next batch
 * gathers, so batches grow with the load and a lone client waits for nothing but its turn.
 */

import { ClientOrder } from './client-order.js';

/** Answers each request in order; an Error in its place fails that request alone. */
export type BatchRunner<Req, Res> = (requests: Req[]) => Promise<(Res | Error)[]>;

interface Queued<Req, Res> {
  request: Req;
  resolve: (res: Res) => void;
  reject: (err: unknown) => void;
}

export class TurnBatch<Req, Res> {
  private queue: Queued<Req, Res>[] = [];
  private flushQueued = false;
  private inFlight = 0;
  private readonly order: ClientOrder<Queued<Req, Res>>;

  constructor(
    private readonly runBatch: BatchRunner<Req, Res>,
    /** The client a request is of (its requests keep their order: ClientOrder). */
    clientOf: (request: Req) => number,
    /** Most requests in one statement. */
    private readonly maxBatch = 512,
    /** Statements in flight at once. */
    private readonly maxInFlight = 2,
  ) {
    this.order = new ClientOrder((q) => clientOf(q.request));
  }

  add(request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.queueFlush();
    });
  }

  private queueFlush(): void {
    if (this.flushQueued || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const { batch, rest } = this.order.take(this.queue, (taken) => taken.length < this.maxBatch);
    this.queue = rest;
    if (batch.length === 0) return;
    this.inFlight++;
    try {
      const results = await this.runBatch(batch.map((q) => q.request));
      batch.forEach((q, i) => {
        const result = results[i]!;
        if (result instanceof Error) q.reject(result);
        else q.resolve(result);
      });
    } catch (err) {
      for (const q of batch) q.reject(err);
    } finally {
      this.order.done(batch);
      this.inFlight--;
      this.queueFlush();
    }
  }
}
