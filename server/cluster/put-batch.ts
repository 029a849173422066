/**
 * Puts of one turn of the event loop, from any number of clients, go to PostgreSQL as one
 * multi-row INSERT: one round trip and one commit for all of them (a commit is what a put costs
 * a database with synchronous_commit on). The gathering is a TurnBatch's (turn-batch.ts): while
 * a batch is in flight the next one gathers, so batches grow with the load, as a binlog's group
 * commit does, and each connection's puts keep their order.
 */
import { fail, ok } from '../common/result.js';
import type { JobBytes, NewJob, Result } from '../operations/operations.js';
import type pg from 'pg';
import { run } from './pool.js';
import type { ClusterSql, Statement } from './sql.js';
import { STATE } from './schema.js';
import type { ClusterPolicies } from './tube-policies.js';
import { TurnBatch } from './turn-batch.js';

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
  /** Sent again after the batch it was in met a queue cap this node had not heard of. */
  again?: boolean;
}

/** SQLSTATE classes that mean the database refused to store more (disk full, out of memory). */
export const NO_ROOM = new Set(['53100', '53200']);

/** What the batched puts need of their store: the database, and whom to tell of new jobs. */
export interface PutStore {
  readonly pool: pg.Pool;
  readonly sql: ClusterSql;
  /** Where the batched statements run (ClusterNode.hotPool), and the put statement. */
  readonly hot: { pool: pg.Pool; put: Statement };
  readonly nodeId: number;
  now(): number;
  /** Bodies of `bytes` were committed. */
  addedBytes(bytes: number): void;
  jobsReady(tubes: Iterable<string>, tellOthers: boolean): void;
  delayedDue(at: number): void;
  failed<T>(err: unknown): Result<T>;
  /** Puts under a tube's queue cap, and this node's copy of the policies (tube-policies.ts). */
  readonly policies: Pick<ClusterPolicies, 'underCap' | 'load' | 'queueCap'>;
}

export class PutBatch {
  /** Ids used up by puts whose body never came, drawn before this node's next put. */
  private unusedIds = 0;
  /** A failed statement answers each of its puts (never rejects): a put's answer is a Result. */
  private readonly batch = new TurnBatch<QueuedPut, Result<JobBytes>>((puts) => this.insertMany(puts), (p) => p.client, {
    maxBatch: MAX_PUTS,
    maxBytes: MAX_BYTES,
    bytesOf: (p) => p.body.length,
    maxInFlight: MAX_IN_FLIGHT,
  });

  constructor(private readonly store: PutStore) {}

  /** Ids the protocol handed out for puts that never came: the next statement draws them first. */
  useUpIds(n: number): void {
    this.unusedIds += n;
  }

  add(tube: string, job: NewJob, client = 0): Promise<Result<JobBytes>> {
    // The caller may reuse the body's memory once this returns (NewJob's contract).
    const body = job.bodyOwned === true ? job.body : Buffer.from(job.body);
    return this.batch.add({ client, tube, priority: job.priority, delayMs: job.delayMs, ttrMs: job.ttrMs, body });
  }

  /**
   * A put into a tube with a queue cap: a statement of its own, under the tube's lock, so that
   * the count and the put are one step for the whole cluster. QUEUE_FULL when the cap is reached.
   */
  async addUnderCap(tube: string, job: NewJob, cap: number): Promise<Result<JobBytes>> {
    const store = this.store;
    const body = job.bodyOwned === true ? job.body : Buffer.from(job.body);
    const now = store.now();
    const delayed = job.delayMs > 0;
    try {
      const rows = await store.policies.underCap(store.pool, tube, cap, (db) =>
        run<{ id: number }>(db, store.sql.putUnderCap, [
          [tube],
          [delayed ? STATE.delayed : STATE.ready],
          [job.priority],
          [job.delayMs],
          [job.ttrMs],
          [now],
          [delayed ? now + job.delayMs : 0],
          [body],
          store.nodeId,
        ]),
      );
      if (rows === null) return fail('QUEUE_FULL');
      store.addedBytes(body.length);
      if (delayed) store.delayedDue(now + job.delayMs);
      else store.jobsReady([tube], true);
      return ok({ id: rows[0]!.id, tubeName: tube, bodyBuf: body, bodyOffset: 0, bodyLength: body.length });
    } catch (err) {
      return this.failure(err);
    }
  }

  /**
   * A batch the statement refused (sql.ts, `put`): this node reads the policies again, then puts
   * each job under its tube's cap, or with the others of a run of puts into tubes without one,
   * in the order they came (the ids follow it). A put refused a second time (a cap this node
   * cannot read) fails.
   */
  private async underNewCaps(batch: QueuedPut[]): Promise<Result<JobBytes>[]> {
    const store = this.store;
    await store.policies.load();
    const results: Result<JobBytes>[] = [];
    for (let i = 0; i < batch.length; ) {
      const p = batch[i]!;
      const cap = store.policies.queueCap(p.tube);
      if (cap !== null) {
        results.push(await this.addUnderCap(p.tube, { priority: p.priority, delayMs: p.delayMs, ttrMs: p.ttrMs, body: p.body, bodyOwned: true }, cap));
        i++;
        continue;
      }
      if (p.again === true) {
        results.push(store.failed(new Error(`tube ${p.tube} has a queue cap in the database that this node cannot read`)));
        i++;
        continue;
      }
      let end = i;
      while (end < batch.length && store.policies.queueCap(batch[end]!.tube) === null && batch[end]!.again !== true) end++;
      results.push(...(await this.insertMany(batch.slice(i, end).map((q) => ({ ...q, again: true })))));
      i = end;
    }
    return results;
  }

  /** A put statement's failure as the puts' result: no room in the database, or an error. */
  private failure(err: unknown): Result<JobBytes> {
    const code = (err as { code?: string }).code;
    return code !== undefined && NO_ROOM.has(code) ? fail('OUT_OF_MEMORY') : this.store.failed(err);
  }

  /** One statement's puts, after the ids used up meanwhile; a failure is every put's answer (logged once). */
  private async insertMany(batch: QueuedPut[]): Promise<Result<JobBytes>[]> {
    const store = this.store;
    const now = store.now();
    try {
      if (this.unusedIds > 0) {
        const n = this.unusedIds;
        this.unusedIds = 0;
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
      // No row: a tube of the batch has a queue cap in the database that this node has not heard of.
      if (rows.length === 0) return await this.underNewCaps(batch);
      // Ids were drawn in the order of the arrays.
      const ids = rows.map((r) => r.id).sort((a, b) => a - b);
      const readyTubes = new Set<string>();
      let soonestDue = Number.POSITIVE_INFINITY;
      const results = batch.map((p, i): Result<JobBytes> => {
        if (p.delayMs > 0) soonestDue = Math.min(soonestDue, now + p.delayMs);
        else readyTubes.add(p.tube);
        return ok({ id: ids[i]!, tubeName: p.tube, bodyBuf: p.body, bodyOffset: 0, bodyLength: p.body.length });
      });
      store.addedBytes(batch.reduce((n, p) => n + p.body.length, 0));
      if (readyTubes.size > 0) store.jobsReady(readyTubes, true);
      if (soonestDue !== Number.POSITIVE_INFINITY) store.delayedDue(soonestDue);
      return results;
    } catch (err) {
      const result = this.failure(err);
      return batch.map(() => result);
    }
  }
}
