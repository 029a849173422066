/**
 * Puts of one turn of the event loop, from any number of clients, go to PostgreSQL as one
 * multi-row INSERT: one round trip and one commit for all of them (a commit is what a put costs
 * a database with synchronous_commit on). While a batch is in flight the next one gathers, so
 * batches grow with the load, as a binlog's group commit does.
 */
import { fail, ok } from '../common/result.js';
import type { JobBytes, NewJob, Result } from '../operations/operations.js';
import { ClientOrder } from './client-order.js';
import type { ClusterStore } from './cluster-store.js';
import { run } from './pool.js';
import { STATE } from './schema.js';

/** Most puts, and body bytes, in one statement. */
const MAX_PUTS = 1000;
const MAX_BYTES = 16 * 1024 * 1024;
/** Statements in flight at once for one node. */
const MAX_IN_FLIGHT = 2;

interface QueuedPut {
  /** The connection putting it (0: none, the dashboard). */
  client: number;
  tube: string;
  priority: number;
  delayMs: number;
  ttrMs: number;
  body: Buffer;
  resolve: (result: Result<JobBytes>) => void;
}

/** SQLSTATE classes that mean the database refused to store more (disk full, out of memory). */
export const NO_ROOM = new Set(['53100', '53200']);

export class PutBatch {
  private queue: QueuedPut[] = [];
  private flushQueued = false;
  private inFlight = 0;
  private readonly order = new ClientOrder<QueuedPut>((p) => p.client);

  constructor(private readonly store: ClusterStore) {}

  add(tube: string, job: NewJob, client = 0): Promise<Result<JobBytes>> {
    // The caller may reuse the body's memory once this returns (NewJob's contract).
    const body = job.bodyOwned === true ? job.body : Buffer.from(job.body);
    return new Promise((resolve) => {
      this.queue.push({ client, tube, priority: job.priority, delayMs: job.delayMs, ttrMs: job.ttrMs, body, resolve });
      this.queueFlush();
    });
  }

  private queueFlush(): void {
    if (this.flushQueued || this.inFlight >= MAX_IN_FLIGHT || this.queue.length === 0) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      void this.flush();
    });
  }

  /** The next statement's puts: up to MAX_PUTS and MAX_BYTES, each connection's in its order (ClientOrder). */
  private takeBatch(): QueuedPut[] {
    let bytes = 0;
    const { batch, rest } = this.order.take(this.queue, (taken, next) => {
      const fits = taken.length < MAX_PUTS && (taken.length === 0 || bytes + next.body.length <= MAX_BYTES);
      if (fits) bytes += next.body.length;
      return fits;
    });
    this.queue = rest;
    return batch;
  }

  private async flush(): Promise<void> {
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    this.inFlight++;
    const store = this.store;
    const now = store.now();
    try {
      if (store.unusedIds > 0) {
        const n = store.unusedIds;
        store.unusedIds = 0;
        await run(store.pool, store.sql.useUpIds, [n]);
      }
      const rows = await run<{ id: number }>(store.hot.pool, store.hot.put, [
        batch.map((p) => p.tube),
        batch.map((p) => (p.delayMs > 0 ? STATE.delayed : STATE.ready)),
        batch.map((p) => p.priority),
        batch.map((p) => p.delayMs),
        batch.map((p) => p.ttrMs),
        batch.map(() => now),
        batch.map((p) => (p.delayMs > 0 ? now + p.delayMs : 0)),
        batch.map((p) => p.body),
        store.nodeId,
      ]);
      // Ids were drawn in the order of the arrays.
      const ids = rows.map((r) => r.id).sort((a, b) => a - b);
      const readyTubes = new Set<string>();
      let soonestDue = Number.POSITIVE_INFINITY;
      batch.forEach((p, i) => {
        if (p.delayMs > 0) soonestDue = Math.min(soonestDue, now + p.delayMs);
        else readyTubes.add(p.tube);
        p.resolve(ok({ id: ids[i]!, tubeName: p.tube, bodyBuf: p.body, bodyOffset: 0, bodyLength: p.body.length }));
      });
      store.addedBytes(batch.reduce((n, p) => n + p.body.length, 0));
      if (readyTubes.size > 0) store.jobsReady(readyTubes, true);
      if (soonestDue !== Number.POSITIVE_INFINITY) store.delayedDue(soonestDue);
    } catch (err) {
      const code = (err as { code?: string }).code;
      const result: Result<JobBytes> = code !== undefined && NO_ROOM.has(code) ? fail('OUT_OF_MEMORY') : store.failed(err);
      for (const p of batch) p.resolve(result);
    } finally {
      this.order.done(batch);
      this.inFlight--;
      this.queueFlush();
    }
  }
}
