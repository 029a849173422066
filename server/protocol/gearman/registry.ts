import type { JobUpdate, JobWatcher, Operations } from '../../operations/operations.js';
import { JobHandles } from './handles.js';

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

/**
 * What the Gearman door keeps across connections: unique ids (for coalescing and
 * JOB_ASSIGN_UNIQ), the last WORK_STATUS of each job (for GET_STATUS), `maxqueue` limits and the
 * open connections (for `workers`). Entries live as long as their job: the registry watches
 * every job it keeps something for, and forgets it when the job ends, whichever door ends it.
 */
export class GearmanRegistry implements JobWatcher {
  readonly handles: JobHandles;
  /** `function \0 unique` -> job id. */
  private readonly byUnique = new Map<string, number>();
  /** job id -> its unique id and function (only for jobs that have a unique id). */
  private readonly uniqueOf = new Map<number, { fn: string; unique: Buffer }>();
  private readonly statusOf = new Map<number, WorkStatus>();
  /** Jobs the registry watches (it attaches once per job). */
  private readonly watching = new Set<number>();
  /** Queued jobs a function may hold (`maxqueue`); absent: no limit. */
  readonly maxQueue = new Map<string, number>();
  private readonly listings = new Set<() => WorkerListing>();

  constructor(
    private readonly ops: Operations,
    host: string,
  ) {
    this.handles = new JobHandles(host);
  }

  /** The job already queued or running for this function and unique id, if any. */
  jobForUnique(fn: string, unique: Buffer): number | undefined {
    return this.byUnique.get(uniqueKey(fn, unique));
  }

  rememberUnique(id: number, fn: string, unique: Buffer): void {
    const copy = Buffer.from(unique);
    this.byUnique.set(uniqueKey(fn, copy), id);
    this.uniqueOf.set(id, { fn, unique: copy });
    this.watch(id);
  }

  uniqueIdOf(id: number): Buffer | undefined {
    return this.uniqueOf.get(id)?.unique;
  }

  setStatus(id: number, numerator: Buffer, denominator: Buffer): void {
    this.statusOf.set(id, { numerator: Buffer.from(numerator), denominator: Buffer.from(denominator) });
    this.watch(id);
  }

  statusOfJob(id: number): WorkStatus | undefined {
    return this.statusOf.get(id);
  }

  /** A connection that `workers` lists while it is open; returns how to stop listing it. */
  list(listing: () => WorkerListing): () => void {
    this.listings.add(listing);
    return () => this.listings.delete(listing);
  }

  workers(): WorkerListing[] {
    return [...this.listings].map((l) => l());
  }

  /** True when the registry is one of job `id`'s watchers (it is not a client waiting on it). */
  watches(id: number): boolean {
    return this.watching.has(id);
  }

  // ---- JobWatcher: forget a job once it is gone ------------------------------------------------

  update(_jobId: number, _update: JobUpdate): void {}

  ended(jobId: number): void {
    this.watching.delete(jobId);
    this.statusOf.delete(jobId);
    const u = this.uniqueOf.get(jobId);
    if (u !== undefined) {
      this.uniqueOf.delete(jobId);
      const key = uniqueKey(u.fn, u.unique);
      if (this.byUnique.get(key) === jobId) this.byUnique.delete(key);
    }
  }

  private watch(id: number): void {
    if (this.watching.has(id)) return;
    if (this.ops.attachWatcher(id, this)) this.watching.add(id);
    else this.ended(id); // already gone
  }
}

function uniqueKey(fn: string, unique: Buffer): string {
  return `${fn}\0${unique.toString('latin1')}`;
}
