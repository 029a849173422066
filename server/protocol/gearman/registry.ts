import type { JobUpdate, JobWatcher, Operations } from '../../operations/operations.js';
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
  /** job id -> its `function \0 unique` key (only for jobs that have a unique id). */
  private readonly keyOf = new Map<number, string>();
  private readonly statusOf = new Map<number, WorkStatus>();
  /** Jobs the registry watches (it attaches once per job). */
  private readonly watching = new Set<number>();
  /** Foreground jobs: they matter only while a client waits on them. */
  private readonly foreground = new Set<number>();
  /** Queued jobs a function may hold (`maxqueue`); absent: no limit. */
  readonly maxQueue = new Map<string, number>();
  private readonly listings = new Set<() => WorkerListing>();

  constructor(
    private readonly ops: Operations,
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

  rememberUnique(id: number, fn: string, unique: Buffer): void {
    const key = uniqueKey(fn, unique);
    this.byUnique.set(key, id);
    this.keyOf.set(id, key);
    this.watch(id);
  }

  rememberForeground(id: number): void {
    this.foreground.add(id);
    this.watch(id);
  }

  isForeground(id: number): boolean {
    return this.foreground.has(id);
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
    this.foreground.delete(jobId);
    this.statusOf.delete(jobId);
    const key = this.keyOf.get(jobId);
    if (key !== undefined) {
      this.keyOf.delete(jobId);
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
