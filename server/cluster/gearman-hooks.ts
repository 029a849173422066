/**
 * The Gearman realm's hooks into the shared store (realm-hooks.ts; the store runs the shared
 * operations over Gearman's tables), and the Gearman-only operations its registry
 * (gearman-registry.ts) calls. What only Gearman needs across nodes:
 * - submits with a unique id coalesce in the database (one job per function and unique id,
 *   whichever nodes the submits reach), and a foreground submit records its node as waiting;
 * - a worker's WORK_* packets reach clients on other nodes through the database: batched in
 *   the order sent, then the nodes concerned are notified and take their packets;
 * - a job whose clients all left (on every node) is dropped if no worker runs it yet.
 */
import { fail, ok } from '../common/result.js';
import type { QueueLimits } from '../gearman/registry.js';
import type { JobBytes, JobWatcher, NewJob, Result } from '../operations/operations.js';
import { deleteArrays, type DeletedRow, type DeleteRequest, type ReservedRow } from './batched.js';
import { GEARMAN_SQL } from './gearman-sql.js';
import { NO_ROOM } from './put-batch.js';
import { inTransaction, run, type Queryable } from './pool.js';
import type { HookedStore, RealmHooks } from './realm-hooks.js';
import { STATE } from './schema.js';

/** What WORK_STATUS said of a job: its two numbers as the worker sent them. */
export interface StatusNumbers {
  numerator: Buffer;
  denominator: Buffer;
}

/** A job's WORK_STATUS as stored (null: none sent yet). */
interface StatusColumns {
  status_numerator: Buffer | null;
  status_denominator: Buffer | null;
}

function statusOf(row: StatusColumns): StatusNumbers | null {
  return row.status_numerator === null ? null : { numerator: row.status_numerator, denominator: row.status_denominator ?? Buffer.alloc(0) };
}

/** A WORK_* packet on its way to other nodes. */
interface Packet {
  job: number;
  type: number;
  data: Buffer;
  status: StatusNumbers | null;
}

/** A submit retries this often when the job it joined ends under it (its unique id is free again). */
const SUBMIT_ATTEMPTS = 5;
/** SQLSTATE of a foreign key violation: a waiter row for a job deleted meanwhile. */
const FOREIGN_KEY_VIOLATION = '23503';

export class GearmanHooks implements RealmHooks {
  /** Jobs a client here just took that are foreground jobs nobody waits for (the registry asks once). */
  private readonly abandonedIds = new Set<number>();
  private relayQueue: Packet[] = [];
  /** Final packets waiting for their job's delete (by job id). */
  private readonly finals = new Map<number, Packet>();
  /** The batch of packets sent last (or being sent), and the one gathering now. */
  private relayChain: Promise<void> = Promise.resolve();
  private relayNext: Promise<void> | null = null;
  private receiving = false;
  private receiveAgain = false;
  /** `maxqueue` limits, read every second (set on any node). */
  private limits = new Map<string, QueueLimits>();

  /** Packets wait in the database for this node's clients. */
  readonly handlers = { updates: () => void this.receive() };

  constructor(private readonly store: HookedStore) {}

  async start(): Promise<void> {
    await this.readLimits();
  }

  // ---- submits ---------------------------------------------------------------------------------

  /** A submit with a unique id, or a foreground one, is one statement of its own; others are batched (null). */
  insert(tube: string, job: NewJob, conn: number): Promise<Result<JobBytes>> | null {
    const unique = job.unique !== undefined && job.unique.length > 0 ? Buffer.from(job.unique) : null;
    const foreground = job.transient === true;
    if (unique === null && !foreground && job.queueLimit === undefined) return null;
    // The function's policy caps its queue as maxqueue does: the lower of the two holds.
    const cap = this.store.policies.queueCap(tube);
    if (cap !== null && (job.queueLimit === undefined || cap < job.queueLimit)) job = { ...job, queueLimit: cap };
    // Copied now: the caller may reuse the body's memory once this returns (NewJob's contract).
    return this.submitOne(tube, { ...job, body: job.bodyOwned === true ? job.body : Buffer.from(job.body) }, unique, foreground, conn);
  }

  private async submitOne(tube: string, job: NewJob, unique: Buffer | null, foreground: boolean, conn: number): Promise<Result<JobBytes>> {
    const store = this.store;
    const body = job.body;
    const delayed = job.delayMs > 0;
    const limit = job.queueLimit;
    for (let attempt = 0; attempt < SUBMIT_ATTEMPTS; attempt++) {
      const now = store.now();
      try {
        const submit = (db: Queryable): Promise<{ id: number; created: boolean }[]> =>
          run<{ id: number; created: boolean }>(db, GEARMAN_SQL.submit, [
            tube,
            delayed ? STATE.delayed : STATE.ready,
            job.priority,
            job.delayMs,
            job.ttrMs,
            now,
            delayed ? now + job.delayMs : 0,
            body,
            store.nodeId,
            unique,
            foreground,
            conn,
          ]);
        // Under a queue limit, the count and the put are one step for the whole cluster.
        const rows =
          limit === undefined
            ? await submit(store.pool)
            : await inTransaction(store.pool, async (db) => {
                await run(db, GEARMAN_SQL.lockFunction, [tube]);
                const [seen] = await run<{ joins: boolean; queued: number }>(db, GEARMAN_SQL.queuedUpTo, [tube, unique, limit]);
                return seen !== undefined && !seen.joins && seen.queued >= limit ? null : submit(db);
              });
        if (rows === null) {
          // Refused by the function's policy (not maxqueue): the policy counts it.
          if (store.policies.queueCap(tube) === limit) await run(store.pool, store.policies.sql.refused, [tube]);
          return fail('QUEUE_FULL');
        }
        const [row] = rows;
        // Made by a statement this one could not see yet: the next one sees it.
        if (row === undefined) continue;
        if (row.created) {
          store.addedBytes(body.length);
          if (delayed) store.delayedDue(now + job.delayMs);
          else store.jobsReady([tube], true);
        }
        return ok({ id: row.id, tubeName: tube, bodyBuf: body, bodyOffset: 0, bodyLength: body.length });
      } catch (err) {
        const code = (err as { code?: string }).code;
        // The job this submit joined ended meanwhile: its unique id is free, so a new job is made.
        if (code === FOREIGN_KEY_VIOLATION) continue;
        return code !== undefined && NO_ROOM.has(code) ? fail('OUT_OF_MEMORY') : store.failed(err);
      }
    }
    return store.failed(new Error('a submit found its unique id taken and freed again too often'));
  }

  // ---- WORK_* packets between nodes ------------------------------------------------------------

  /**
   * A worker's packet for job `id`: to this node's waiting clients now, and to other nodes'
   * through the database; settles once the batch holding it committed. A final packet (the
   * job's result) waits for the job's delete instead and goes with it (runDeletes).
   */
  relay(id: number, kind: string, type: number, data: Buffer, status: StatusNumbers | null, final: boolean): Promise<void> | undefined {
    if (final) {
      this.finals.set(id, { job: id, type, data: Buffer.from(data), status: null });
      return undefined;
    }
    // Watchers copy the packet into their replies during the call.
    this.store.report(id, { kind, data, start: 0, end: data.length });
    this.relayQueue.push({
      job: id,
      type,
      data: Buffer.from(data),
      status: status === null ? null : { numerator: Buffer.from(status.numerator), denominator: Buffer.from(status.denominator) },
    });
    return this.queueRelay();
  }

  /** Packets of one turn go in one statement, one batch after another (their order is kept). */
  private queueRelay(): Promise<void> {
    if (this.relayNext !== null) return this.relayNext;
    const next = this.relayChain
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => {
        this.relayNext = null; // packets from now on go in the batch after this one
        return this.sendRelay(this.relayQueue.splice(0));
      });
    this.relayNext = next;
    this.relayChain = next.catch(() => undefined);
    return next;
  }

  private async sendRelay(batch: Packet[]): Promise<void> {
    try {
      await this.sendRelayNow(batch);
    } catch (err) {
      // Progress packets only (a final one goes with its job's delete): the result still comes.
      this.store.log.warn({ err: (err as Error).message, packets: batch.length }, 'cluster: relaying Gearman packets to other nodes failed');
    }
  }

  private async sendRelayNow(batch: Packet[]): Promise<void> {
    if (batch.length === 0) return;
    // One status per job: the last one sent.
    const statuses = new Map<number, StatusNumbers>();
    for (const p of batch) if (p.status !== null) statuses.set(p.job, p.status);
    const rows = await run<{ node: number }>(this.store.pool, GEARMAN_SQL.relay, [
      batch.map((p) => p.job),
      batch.map((p) => p.type),
      batch.map((p) => p.data),
      [...statuses.keys()],
      [...statuses.values()].map((s) => s.numerator),
      [...statuses.values()].map((s) => s.denominator),
      this.store.nodeId,
    ]);
    for (const row of rows) this.store.updatesFor(row.node);
  }

  /** Deletes of jobs with a final packet waiting send it with them (null: none has one, the plain statement). */
  runDeletes(requests: DeleteRequest[]): Promise<DeletedRow[]> | null {
    const packets: Packet[] = [];
    for (const r of requests) {
      const p = this.finals.get(r.id);
      if (p === undefined) continue;
      this.finals.delete(r.id);
      packets.push(p);
    }
    return packets.length === 0 ? null : this.finish(requests, packets);
  }

  private async finish(requests: DeleteRequest[], packets: Packet[]): Promise<DeletedRow[]> {
    const store = this.store;
    // The jobs are locked first: the statement that ends them then sees every waiter committed.
    const rows = await inTransaction(store.pool, async (db) => {
      await run(db, GEARMAN_SQL.lockJobs, [packets.map((p) => p.job)]);
      return run<DeletedRow & { node: number | null }>(db, GEARMAN_SQL.finish, [
        ...deleteArrays(requests),
        packets.map((p) => p.job),
        packets.map((p) => p.type),
        packets.map((p) => p.data),
        store.nodeId,
      ]);
    });
    const deleted = rows.filter((r) => r.node === null);
    const done = new Set(deleted.map((r) => r.id));
    // This node's clients hear the result as gearmand tells it: with the job gone. A packet
    // whose delete failed (the worker no longer held the job) goes nowhere.
    for (const p of packets) if (done.has(p.job)) store.report(p.job, { kind: String(p.type), data: p.data, start: 0, end: p.data.length });
    for (const r of rows) if (r.node !== null) store.updatesFor(r.node);
    return deleted;
  }

  /** A delete waits for the packets sent before it: a job's final packet must not be overtaken by its end. */
  beforeDeletes(): Promise<void> | null {
    return this.relayNext ?? this.relayChain;
  }

  /**
   * Takes the packets waiting for this node's clients, in the order they were sent, and tells
   * the clients of jobs that ended without a result (cancelled or dropped on another node).
   */
  async receive(): Promise<void> {
    if (this.receiving) {
      this.receiveAgain = true;
      return;
    }
    this.receiving = true;
    try {
      do {
        this.receiveAgain = false;
        const rows = await run<{ seq: number | null; job: number; type: number | null; data: Buffer | null }>(this.store.pool, GEARMAN_SQL.receive, [
          this.store.nodeId,
          [...this.store.watchedIds()],
        ]);
        const packets = rows.filter((r) => r.seq !== null).sort((a, b) => a.seq! - b.seq!);
        for (const p of packets) this.store.report(p.job, { kind: String(p.type), data: p.data!, start: 0, end: p.data!.length });
        for (const r of rows) if (r.seq === null) this.store.jobEnded(r.job);
      } while (this.receiveAgain);
    } catch (err) {
      this.store.log.warn({ err: (err as Error).message }, 'cluster: taking Gearman packets failed (the next poll tries again)');
    } finally {
      this.receiving = false;
    }
  }

  /**
   * An operator's delete or clear (the dashboard, the admin protocol's `cancel job`): clients
   * waiting on the jobs on other nodes are told they failed now, not at their next poll.
   */
  operatorRemoved(): void {
    this.store.updatesFor('*');
  }

  // ---- waiting clients -------------------------------------------------------------------------

  taken(row: ReservedRow): void {
    if (row.abandoned) this.abandonedIds.add(row.id);
  }

  /** True (once) when a job a client here just took was a foreground job nobody waits for. */
  takeAbandoned(id: number): boolean {
    return this.abandonedIds.delete(id);
  }

  untaken(id: number): void {
    this.abandonedIds.delete(id);
  }

  /**
   * Client `conn` of this node left: it waits on nothing more, and a foreground job only it
   * waited on (on any node) is dropped unless a worker runs it. The jobs are locked first, so
   * two clients leaving the same job at once see each other's leaving (one of them drops it).
   */
  async clientLeft(conn: number): Promise<void> {
    const store = this.store;
    try {
      const dropped = await inTransaction(store.pool, async (db) => {
        const jobs = (await run<{ job: number }>(db, GEARMAN_SQL.waitedOn, [store.nodeId, conn])).map((r) => r.job);
        if (jobs.length === 0) return [];
        await run(db, GEARMAN_SQL.lockJobs, [jobs]);
        return run<{ id: number; bytes: number }>(db, GEARMAN_SQL.leaveConnection, [store.nodeId, conn, jobs]);
      });
      for (const row of dropped) {
        store.addedBytes(-row.bytes);
        store.jobEnded(row.id);
      }
    } catch (err) {
      // The node's own leaving (or its lease running out) drops them instead.
      store.log.warn({ err: (err as Error).message }, 'cluster: letting go of a Gearman client\'s jobs failed');
    }
  }

  /** The gone nodes' clients wait on nothing more: foreground jobs only they waited on are dropped. */
  async reclaim(db: Queryable, node: number | null): Promise<void> {
    const dropped = await run<{ bytes: number }>(db, GEARMAN_SQL.reclaimWaiters, [node]);
    this.store.addedBytes(-dropped.reduce((n, r) => n + r.bytes, 0));
  }

  /** A client here stopped waiting on job `id` (its rows in the database go when it leaves: clientLeft). */
  stopWaiting(id: number, watcher: JobWatcher): void {
    this.store.detachWatcher(id, watcher);
  }

  // ---- status and limits -----------------------------------------------------------------------

  async jobStatus(id: number): Promise<{ state: number; status: StatusNumbers | null } | undefined> {
    const [row] = await run<StatusColumns & { state: number }>(this.store.pool, GEARMAN_SQL.jobStatus, [id]);
    if (row === undefined) return undefined;
    const status = statusOf(row);
    return { state: row.state, status };
  }

  async statuses(ids: readonly number[]): Promise<Map<number, StatusNumbers>> {
    if (ids.length === 0) return new Map();
    const rows = await run<StatusColumns & { id: number }>(this.store.pool, GEARMAN_SQL.statuses, [ids]);
    const out = new Map<number, StatusNumbers>();
    for (const r of rows) {
      const status = statusOf(r);
      if (status !== null) out.set(r.id, status);
    }
    return out;
  }

  /** GET_STATUS_UNIQUE: the job of unique id `unique`, on any node. */
  async uniqueStatus(unique: Buffer): Promise<{ state: number; status: StatusNumbers | null; clients: number } | undefined> {
    const [row] = await run<StatusColumns & { state: number; clients: number }>(this.store.pool, GEARMAN_SQL.uniqueStatus, [unique]);
    if (row === undefined) return undefined;
    return { state: row.state, status: statusOf(row), clients: row.clients };
  }

  maxQueue(fn: string): QueueLimits | undefined {
    return this.limits.get(fn);
  }

  async setMaxQueue(fn: string, limits: QueueLimits | null): Promise<void> {
    const column = (n: number | undefined): number | null => (limits === null || n === undefined || n <= 0 ? null : n);
    await run(this.store.pool, GEARMAN_SQL.setMaxQueue, [fn, column(limits?.[0]), column(limits?.[1]), column(limits?.[2])]);
    if (limits === null) this.limits.delete(fn);
    else this.limits.set(fn, limits);
  }

  private async readLimits(): Promise<void> {
    type Row = { name: string; max_queue_high: number | null; max_queue: number | null; max_queue_low: number | null };
    const rows = await run<Row>(this.store.pool, GEARMAN_SQL.maxQueues, []);
    const n = (v: number | null): number => v ?? 0;
    this.limits = new Map(rows.map((r) => [r.name, [n(r.max_queue_high), n(r.max_queue), n(r.max_queue_low)] as const]));
  }

  async poll(): Promise<void> {
    await this.readLimits();
    await this.receive();
  }
}
