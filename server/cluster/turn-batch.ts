/**
 * Requests of one turn of the event loop, from any number of clients, answered by one statement:
 * with synchronous_commit on, each statement costs a commit (a WAL flush), so sixteen workers'
 * deletes cost one flush instead of sixteen. While a statement is in flight the next batch
 * gathers, so batches grow with the load and a lone client waits for nothing but its turn.
 */

import { ClientOrder } from './client-order.js';

/** Answers each request in order; an Error in its place fails that request alone. */
export type BatchRunner<Req, Res> = (requests: Req[]) => Promise<(Res | Error)[]>;

/** How much one statement takes, and how many statements run at once. */
export interface BatchLimits<Req> {
  /** Most requests in one statement. */
  maxBatch?: number;
  /** Statements in flight at once. */
  maxInFlight?: number;
  /** Most bytes (as `bytesOf` counts them) in one statement; its first request always fits. */
  maxBytes?: number;
  bytesOf?: (request: Req) => number;
}

/**
 * The test of whether one more request fits the statement being gathered: under `maxBatch`
 * requests and `maxBytes` bytes, except that a statement always takes its first request (a put
 * bigger than the byte limit still goes, alone). It keeps its count of bytes: one per gathering.
 */
export function batchFits<Req>(limits: BatchLimits<Req>): (taken: readonly unknown[], next: Req) => boolean {
  const maxBatch = limits.maxBatch ?? DEFAULT_MAX_BATCH;
  const { maxBytes, bytesOf } = limits;
  let bytes = 0;
  return (taken, next) => {
    if (taken.length >= maxBatch) return false;
    if (maxBytes === undefined || bytesOf === undefined) return true;
    const size = bytesOf(next);
    if (taken.length > 0 && bytes + size > maxBytes) return false;
    bytes += size;
    return true;
  };
}

const DEFAULT_MAX_BATCH = 512;
const DEFAULT_MAX_IN_FLIGHT = 2;

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
  private readonly maxInFlight: number;

  constructor(
    private readonly runBatch: BatchRunner<Req, Res>,
    /** The client a request is of (its requests keep their order: ClientOrder). */
    clientOf: (request: Req) => number,
    private readonly limits: BatchLimits<Req> = {},
  ) {
    this.order = new ClientOrder((q) => clientOf(q.request));
    this.maxInFlight = limits.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
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
    const fits = batchFits(this.limits);
    const { batch, rest } = this.order.take(this.queue, (taken, next) => fits(taken, next.request));
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
