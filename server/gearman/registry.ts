import { isPending, whenReady, type JobBytes, type JobUpdate, type JobWatcher, type Pending } from '../operations/operations.js';
import type { GearmanStore } from './store.js';
import { JobHandles } from './handles.js';
import { uniqueEnd } from './job-body.js';

/** What WORK_STATUS last said of a job: the two numbers as the worker sent them. */
export interface WorkStatus {
  numerator: Buffer;
  denominator: Buffer;
}

/** What `workers` shows of a connection. */
export interface WorkerListing {
  fd: number;
  address: string;
  clientId: string;
  functions: string[];
}

/** The open connections of this node, as `workers` lists them. */
export class WorkerListings {
  private readonly listings = new Set<() => WorkerListing>();

  /** Lists a connection while it is open; returns how to stop listing it. */
  add(listing: () => WorkerListing): () => void {
    this.listings.add(listing);
    return () => this.listings.delete(listing);
  }

  all(): WorkerListing[] {
    return [...this.listings].map((l) => l());
  }
}

/** What GET_STATUS answers of a job. */
export interface JobStatus {
  known: boolean;
  running: boolean;
  status: WorkStatus | undefined;
}

/**
 * `maxqueue` limits of a function: queued jobs it may hold when a HIGH, NORMAL or LOW submit
 * arrives (indexed by the door's priority, 0 HIGH to 2 LOW); 0: no limit at that priority.
 */
export type QueueLimits = readonly [high: number, normal: number, low: number];

/** What GET_STATUS_UNIQUE answers of the job of a unique id: GET_STATUS's facts and its waiting clients. */
export interface UniqueStatus extends JobStatus {
  /** Clients waiting on the job (0 for a background job nobody joined). */
  clients: number;
}

/**
 * What the Gearman door keeps across connections, beside the jobs themselves: unique ids (for
 * coalescing and JOB_ASSIGN_UNIQ), the last WORK_STATUS of each job (for GET_STATUS), `maxqueue`
 * limits, which clients wait on a foreground job, and the open connections (for `workers`).
 * A single node keeps it in memory (LocalGearmanRegistry); a cluster keeps it in the database,
 * shared by every node (server/cluster/gearman-registry.ts).
 */
export interface GearmanRegistry {
  readonly handles: JobHandles;
  /**
   * Functions `create function` declared: listed by `status` even with no job and no worker,
   * until `drop function`. Kept by this node only (gearmand keeps them in memory too).
   */
  readonly declared: Set<string>;
  /** After a restart: whatever must be rebuilt from the jobs the store brought back. */
  restore(): Promise<void>;
  /**
   * The job already queued or running for this function and unique id, if the registry knows
   * it here and now; undefined lets the submit reach the store (which coalesces in a cluster).
   */
  jobForUnique(fn: string, unique: Buffer): number | undefined;
  /** A job was made: remember its unique id. */
  created(id: number, fn: string, unique: Buffer): void;
  /**
   * A worker's WORK_* packet for job `id` (`packet[start, end)` as it came, handle first; valid
   * only during the call, and made a Buffer of its own only when someone is told): to every client
   * waiting on it, on this node or another. WORK_STATUS also records `status`. Settles once the
   * packet is on its way to every one of them: only then may the door go on. A `final` packet
   * (the job's result) is followed by the job's delete at once; a registry may send it with the
   * delete, so that no client hears of the result while the job still shows as running.
   */
  report(id: number, type: number, packet: Buffer, start: number, end: number, status: WorkStatus | null, final: boolean): Pending<void>;
  /** GET_STATUS's answer. */
  jobStatus(id: number): Pending<JobStatus>;
  /** GET_STATUS_UNIQUE's answer: the job of this unique id, whatever its function (the oldest, if several). */
  uniqueStatus(unique: Buffer): Pending<UniqueStatus>;
  /** The last WORK_STATUS of each of `ids` that has one (the dashboard's). */
  statuses(ids: readonly number[]): Pending<Map<number, WorkStatus>>;
  /**
   * `watcher` (a client) no longer waits on job `id`: a foreground job nobody waits for any more
   * and no worker has started is dropped. A background job a foreground submit joined stays.
   */
  stopWaiting(id: number, watcher: JobWatcher): void;
  /** True when a job a worker just took is a foreground job nobody waits for any more (it is dropped, not run). */
  abandoned(job: JobBytes): Pending<boolean>;
  /** `maxqueue`: queued jobs a function may hold, per priority; undefined: no limit. */
  maxQueue(fn: string): QueueLimits | undefined;
  /** Sets (null: lifts) a function's limits. */
  setMaxQueue(fn: string, limits: QueueLimits | null): Pending<void>;
  /** A connection that `workers` lists while it is open; returns how to stop listing it. */
  list(listing: () => WorkerListing): () => void;
  /** This node's connections. */
  workers(): WorkerListing[];
}

/**
 * The registry of a single node, in memory. Entries live as long as their job: the registry
 * watches every job it keeps something for, and forgets it when the job ends, whichever door
 * ends it.
 */
export class LocalGearmanRegistry implements GearmanRegistry, JobWatcher {
  readonly handles: JobHandles;
  readonly declared = new Set<string>();
  /** `function \0 unique` -> job id. */
  private readonly byUnique = new Map<string, number>();
  /** unique id -> its jobs, oldest first, whatever their function (GET_STATUS_UNIQUE). */
  private readonly byUniqueOnly = new Map<string, Set<number>>();
  /** job id -> its `function \0 unique` key (only for jobs that have a unique id). */
  private readonly keyOf = new Map<number, string>();
  private readonly statusOf = new Map<number, WorkStatus>();
  /**
   * Jobs the registry watches (it attaches once per job), to forget what it keeps for them when
   * they end: those with a unique id or a WORK_STATUS. Not the foreground jobs as such: whether
   * a job is one is the store's to say (JobBytes.transient), so a plain foreground submit costs
   * the registry nothing.
   */
  private readonly watching = new Set<number>();
  /** Queued jobs a function may hold (`maxqueue`); absent: no limit. */
  private readonly limits = new Map<string, QueueLimits>();
  private readonly listings = new WorkerListings();
  /** The news `report` passes on, reused: watchers read it during the call only. */
  private readonly news: { kind: string; data: Buffer; start: number; end: number } = { kind: '', data: NO_DATA, start: 0, end: 0 };

  constructor(
    private readonly ops: GearmanStore,
    host: string,
  ) {
    this.handles = new JobHandles(host);
  }

  /**
   * After a restart: the unique ids of the jobs the binlog brought back coalesce again (each
   * body starts with its unique id, job-body.ts).
   */
  async restore(): Promise<void> {
    await this.ops.eachJob((job) => {
      const end = uniqueEnd(job.body, 0, job.body.length);
      if (end > 0) this.rememberUnique(job.id, job.tube, job.body.subarray(0, end));
    });
  }

  /** The job already queued or running for this function and unique id, if any. */
  jobForUnique(fn: string, unique: Buffer): number | undefined {
    return this.byUnique.get(uniqueKey(fn, unique));
  }

  created(id: number, fn: string, unique: Buffer): void {
    if (unique.length > 0) this.rememberUnique(id, fn, unique);
  }

  private rememberUnique(id: number, fn: string, unique: Buffer): void {
    const key = uniqueKey(fn, unique);
    this.byUnique.set(key, id);
    this.keyOf.set(id, key);
    const bare = unique.toString('latin1');
    const ids = this.byUniqueOnly.get(bare);
    if (ids === undefined) this.byUniqueOnly.set(bare, new Set([id]));
    else ids.add(id);
    this.watch(id);
  }

  report(id: number, type: number, packet: Buffer, start: number, end: number, status: WorkStatus | null): void {
    if (status !== null) {
      this.statusOf.set(id, { numerator: Buffer.from(status.numerator), denominator: Buffer.from(status.denominator) });
      this.watch(id);
    }
    // Watchers copy the packet into their replies during the call: it needs no copy, nor a view.
    const news = this.news;
    news.kind = kindOf(type);
    news.data = packet;
    news.start = start;
    news.end = end;
    this.ops.report(id, news);
    news.data = NO_DATA; // do not pin the packet
  }

  jobStatus(id: number): Pending<JobStatus> {
    let state: string | null = null;
    const visited = this.ops.visitJobs([id], (_, view) => (state = view?.state ?? null));
    const answer = (): JobStatus => ({ known: state !== null, running: state === 'reserved', status: this.statusOf.get(id) });
    return isPending(visited) ? visited.then(answer) : answer();
  }

  uniqueStatus(unique: Buffer): Pending<UniqueStatus> {
    const ids = this.byUniqueOnly.get(unique.toString('latin1'));
    const id = ids === undefined ? undefined : ids.values().next().value;
    if (id === undefined) return { known: false, running: false, status: undefined, clients: 0 };
    const clients = this.waitingClients(id);
    return whenReady(this.jobStatus(id), (status) => ({ ...status, clients }));
  }

  /** Clients waiting on job `id` (the registry's own watch is not one). */
  private waitingClients(id: number): number {
    return this.ops.watcherCount(id) - (this.watching.size > 0 && this.watching.has(id) ? 1 : 0);
  }

  statuses(ids: readonly number[]): Map<number, WorkStatus> {
    const out = new Map<number, WorkStatus>();
    for (const id of ids) {
      const status = this.statusOf.get(id);
      if (status !== undefined) out.set(id, status);
    }
    return out;
  }

  stopWaiting(id: number, watcher: JobWatcher): void {
    const remaining = this.ops.detachWatcher(id, watcher) - (this.watching.has(id) ? 1 : 0);
    if (remaining > 0) return;
    let drop = false;
    const seen = this.ops.visitJobs([id], (_, view) => (drop = view !== undefined && view.transient && view.state !== 'reserved'));
    const dropIt = (): void => {
      if (drop) void this.ops.delete(id);
    };
    if (isPending(seen)) void seen.then(dropIt);
    else dropIt();
  }

  abandoned(job: JobBytes): boolean {
    // Asked for every job a worker takes: no lookup for a background job.
    return job.transient === true && this.waitingClients(job.id) === 0;
  }

  maxQueue(fn: string): QueueLimits | undefined {
    // Asked for every submit: no lookup while no function has a limit.
    return this.limits.size === 0 ? undefined : this.limits.get(fn);
  }

  setMaxQueue(fn: string, limits: QueueLimits | null): void {
    if (limits === null) this.limits.delete(fn);
    else this.limits.set(fn, limits);
  }

  list(listing: () => WorkerListing): () => void {
    return this.listings.add(listing);
  }

  workers(): WorkerListing[] {
    return this.listings.all();
  }

  // ---- JobWatcher: forget a job once it is gone ------------------------------------------------

  update(_jobId: number, _update: JobUpdate): void {}

  ended(jobId: number): void {
    this.watching.delete(jobId);
    this.statusOf.delete(jobId);
    const key = this.keyOf.get(jobId);
    if (key !== undefined) {
      this.keyOf.delete(jobId);
      if (this.byUnique.get(key) === jobId) this.byUnique.delete(key);
      const bare = key.slice(key.indexOf('\0') + 1);
      const ids = this.byUniqueOnly.get(bare);
      if (ids !== undefined && ids.delete(jobId) && ids.size === 0) this.byUniqueOnly.delete(bare);
    }
  }

  private watch(id: number): void {
    if (this.watching.has(id)) return;
    if (this.ops.attachWatcher(id, this)) this.watching.add(id);
    else this.ended(id); // already gone
  }
}

const NO_DATA = Buffer.alloc(0);

function uniqueKey(fn: string, unique: Buffer): string {
  return `${fn}\0${unique.toString('latin1')}`;
}

/** JobUpdate kinds by packet type (an array: read once per WORK_* packet). */
const KINDS: string[] = Array.from({ length: 64 }, (_, type) => String(type));
/** A WORK_* packet type as a JobUpdate's kind (made once per type: no string per packet). */
export function kindOf(type: number): string {
  return type < KINDS.length ? KINDS[type]! : String(type);
}
