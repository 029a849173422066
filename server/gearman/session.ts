import type { Logger } from 'pino';
import {
  isPending,
  type ClientDelegate,
  type ClientOperations,
  type FailureCode,
  type JobBytes,
  type JobUpdate,
  type MadeJob,
  type JobWatcher,
  type NewJob,
  type Pending,
  type ReserveOutcome,
  type Result,
} from '../operations/operations.js';
import type { GearmanStore } from './store.js';
import { MAX_FUNCTIONS_PER_WORKER } from './limits.js';
import type { GearmanRegistry, JobStatus, UniqueStatus, WorkStatus } from './registry.js';

/** A leaving client lets go of this many foreground jobs per turn. */
const LEAVE_SLICE = 1024;

/** What a Gearman client hears of the foreground jobs it waits on (its front door sends it on). */
export interface SessionNews {
  /** A worker's WORK_* packet for job `jobId`: `type` and `data[start, end)` as the worker sent them (valid only during the call). */
  update(jobId: number, type: number, data: Buffer, start: number, end: number): void;
  /** The job ended without a result (cancelled, deleted from the dashboard, dropped by retries). */
  failed(jobId: number): void;
}

/** Why a submit made no job: the store's refusal (QUEUE_FULL: the function's `maxqueue`). */
export type SubmitRefusal = FailureCode;

/** What a submit answers: the job's id (a new job, or the one it joined by unique id), or why not. */
export type SubmitAnswer = { ok: true; id: number } | { ok: false; refusal: SubmitRefusal };

/** What a session needs: the Gearman realm's store, the registry, and how its connection is told things. */
export interface SessionContext {
  ops: GearmanStore;
  registry: GearmanRegistry;
  /** --gearman-round-robin: a worker's functions are served in turn. */
  roundRobin: boolean;
  log: Logger;
}

/** A submit as the door parsed it. `unique` and `body` are valid only during the call. */
export interface Submission {
  fn: string;
  unique: Buffer;
  /** `unique NUL data` (job-body.ts). */
  body: Buffer;
  /** The engine's priority: 0 HIGH, 1 NORMAL, 2 LOW. */
  priority: number;
  background: boolean;
  delayMs: number;
}

/**
 * One Gearman connection's life among the jobs, below its front door: what it submits (unique
 * ids joining a queued job, `maxqueue`, foreground jobs it then waits on), what it takes as a
 * worker (a foreground job nobody waits for any more is dropped, not handed out; CAN_DO_TIMEOUT
 * holds), the results it reports (sent on to the waiting clients, then the job goes), and its
 * leaving (its foreground jobs let go of in slices). The door parses, calls one of these and
 * writes the answer; everything here answers at once with the in-memory store, or later (a
 * promise) with a cluster's database.
 */
export class GearmanSession {
  readonly client: ClientOperations;
  /** CAN_DO_TIMEOUT per function (ms). */
  private readonly timeouts = new Map<string, number>();
  /** Foreground jobs this client waits on. */
  private readonly waitingOn = new Set<number>();
  /** The submit being made, reused: the store copies what it keeps. */
  private readonly newJob: NewJob = { priority: 0, delayMs: 0, ttrMs: 0, body: NO_BYTES, transient: false };
  /** The answer of a submit the store made at once, reused: read before the next call. */
  private readonly madeAt: { ok: true; id: number } = { ok: true, id: 0 };

  private readonly ops: GearmanStore;
  private readonly registry: GearmanRegistry;

  constructor(
    private readonly ctx: SessionContext,
    delegate: ClientDelegate,
    peer: string,
    private readonly news: SessionNews,
    /** The client certificate's subject CN (mutual TLS), or null. */
    identity: string | null = null,
  ) {
    this.ops = ctx.ops;
    this.registry = ctx.registry;
    // A worker watches only the functions it registers, and holds a job until it reports or leaves.
    this.client = ctx.ops.connect(delegate, peer, { watchNothing: true, roundRobin: ctx.roundRobin, identity });
    this.client.setHold(Number.POSITIVE_INFINITY);
  }

  // ---- a client's submits ----------------------------------------------------------------------

  /**
   * Adds a job, or joins the queued or running job with the same function and unique id. A
   * foreground submit then waits on the job (news). Refused with QUEUE_FULL beyond the function's
   * `maxqueue` for the priority, else as the store refuses.
   */
  submit(s: Submission): Pending<SubmitAnswer> {
    if (s.unique.length > 0) {
      const existing = this.registry.jobForUnique(s.fn, s.unique);
      if (existing !== undefined) return this.joined(existing, s.background);
    }
    return this.put(s, this.registry.maxQueue(s.fn)?.[s.priority]);
  }

  /** Makes the job; `limit` (maxqueue) is checked by the store in the same step as the put. */
  private put(s: Submission, limit: number | undefined): Pending<SubmitAnswer> {
    const job = this.newJob;
    job.queueLimit = limit !== undefined && limit > 0 ? limit : undefined;
    job.priority = s.priority;
    job.delayMs = s.delayMs;
    job.body = s.body;
    // A foreground job dies with its clients, so it is never journaled: a restart must not run it.
    job.transient = !s.background;
    // For a store that coalesces unique ids itself (a cluster's database).
    job.unique = s.unique;
    const result = this.client.submit(s.fn, job);
    job.body = NO_BYTES; // do not pin the caller's bytes
    job.unique = NO_BYTES;
    // The in-memory store answers at once: no closure (nor answer object) per submit then.
    if (!isPending(result)) return this.created(result, s.fn, s.unique, s.background, this.madeAt);
    const unique = Buffer.from(s.unique); // valid only during this call
    return result.then((r) => this.created(r, s.fn, unique, s.background, { ok: true, id: 0 }));
  }

  private created(r: Result<MadeJob>, fn: string, unique: Buffer, background: boolean, answer: { ok: true; id: number }): SubmitAnswer {
    if (!r.ok) return { ok: false, refusal: r.code };
    const id = r.value.id;
    this.registry.created(id, fn, unique);
    return this.joined(id, background, answer);
  }

  /** `answer`, made the id of the job the client now has; reused when answered at once (read before the next call). */
  private joined(id: number, background: boolean, answer = this.madeAt): SubmitAnswer {
    if (!background) this.watchJob(id);
    answer.id = id;
    return answer;
  }

  private watchJob(id: number): void {
    if (this.waitingOn.has(id)) return;
    if (this.ops.attachWatcher(id, this.watcher)) this.waitingOn.add(id);
  }

  /** The client has its answer (a final WORK_* packet): it no longer waits on the job, whatever becomes of it. */
  answered(jobId: number): void {
    if (this.waitingOn.delete(jobId)) this.ops.detachWatcher(jobId, this.watcher);
  }

  private readonly watcher: JobWatcher = {
    update: (jobId: number, update: JobUpdate) => this.news.update(jobId, Number(update.kind), update.data, update.start, update.end),
    ended: (jobId: number) => {
      if (this.waitingOn.delete(jobId)) this.news.failed(jobId);
    },
  };

  /** GET_STATUS's answer. */
  jobStatus(id: number): Pending<JobStatus> {
    return this.registry.jobStatus(id);
  }

  /** GET_STATUS_UNIQUE's answer. */
  uniqueStatus(unique: Buffer): Pending<UniqueStatus> {
    return this.registry.uniqueStatus(unique);
  }

  // ---- a worker's functions, takes and results -------------------------------------------------

  /**
   * CAN_DO (`timeoutMs` 0) or CAN_DO_TIMEOUT: the worker can do `fn`, and holds its jobs at most
   * `timeoutMs`. Fails with TOO_MANY_FUNCTIONS past MAX_FUNCTIONS_PER_WORKER.
   */
  canDo(fn: string, timeoutMs: number): Pending<Result<number>> | 'TOO_MANY_FUNCTIONS' {
    if (this.client.watchedCount() >= MAX_FUNCTIONS_PER_WORKER) return 'TOO_MANY_FUNCTIONS';
    if (Number.isSafeInteger(timeoutMs) && timeoutMs > 0) this.timeouts.set(fn, timeoutMs);
    else this.timeouts.delete(fn);
    return this.client.watch(fn);
  }

  cantDo(fn: string): Pending<unknown> {
    this.timeouts.delete(fn);
    return this.client.ignore(fn);
  }

  resetAbilities(): Pending<unknown>[] {
    this.timeouts.clear();
    return this.client.watchedTubes().map((fn) => this.client.ignore(fn));
  }

  /** PRE_SLEEP: true when a job is ready now (the worker is told at once). */
  sleep(): Pending<boolean> {
    return this.client.sleep();
  }

  /**
   * GRAB_JOB: the next job for one of the worker's functions, or null. A foreground job whose
   * clients all left while it ran and that came back to the queue (its worker left or overran)
   * is dropped instead, as gearmand decides at the next take, and the next job is offered.
   * The job's bytes are valid until the next operation.
   */
  grab(): Pending<JobBytes | null> {
    const outcome = this.client.reserve(0);
    return isPending(outcome) ? outcome.then((o) => this.taken(o)) : this.taken(outcome);
  }

  private taken(outcome: ReserveOutcome<JobBytes>): Pending<JobBytes | null> {
    if (outcome.kind !== 'reserved') return null;
    const job = outcome.job;
    const abandoned = this.registry.abandoned(job);
    if (!isPending(abandoned)) return this.handOut(job, abandoned);
    const kept = copyOf(job);
    return abandoned.then((gone) => this.handOut(kept, gone));
  }

  private handOut(job: JobBytes, abandoned: boolean): Pending<JobBytes | null> {
    if (abandoned) {
      this.settleQuietly(this.client.delete(job.id));
      return this.grab();
    }
    // No lookup per job for a worker without CAN_DO_TIMEOUT.
    const timeout = this.timeouts.size === 0 ? undefined : this.timeouts.get(job.tubeName);
    if (timeout === undefined) return job;
    // The job is held for CAN_DO_TIMEOUT before the worker is told of it.
    const held = this.client.hold(job.id, timeout);
    if (!isPending(held)) {
      if (!held.ok) this.finishFailed(held.code);
      return job;
    }
    const kept = copyOf(job);
    return held.then((r) => {
      if (!r.ok) this.finishFailed(r.code);
      return kept;
    });
  }

  /**
   * A WORK_* packet for job `id` (`packet[start, end)` as it came, handle first): sent on to
   * every client waiting on it, in the order they arrive; after a `final` one the job goes.
   * False when this worker does not hold the job. The packet and `status` are valid only
   * during the call.
   */
  report(id: number, type: number, packet: Buffer, start: number, end: number, status: WorkStatus | null, final: boolean): Pending<boolean> {
    const held = this.client.holds(id);
    if (!isPending(held)) return this.reportHeld(held, id, type, packet, start, end, status, final);
    const kept = Buffer.from(packet.subarray(start, end));
    const keptStatus = status === null ? null : { numerator: Buffer.from(status.numerator), denominator: Buffer.from(status.denominator) };
    return held.then((h) => this.reportHeld(h, id, type, kept, 0, kept.length, keptStatus, final));
  }

  private reportHeld(held: boolean, id: number, type: number, packet: Buffer, start: number, end: number, status: WorkStatus | null, final: boolean): Pending<boolean> {
    if (!held) return false;
    const reported = this.registry.report(id, type, packet, start, end, status, final);
    if (!final) return true;
    // The job goes once its result is on its way to every waiting client (in a cluster, a
    // statement: the delete must not overtake it).
    if (!isPending(reported)) return this.finished(this.client.delete(id));
    return reported.then(() => this.finished(this.client.delete(id)));
  }

  private finished(deleted: Pending<Result<void>>): Pending<boolean> {
    // The result has gone to the clients already; a failed delete leaves the job held until the worker leaves.
    if (!isPending(deleted)) return this.noteFinished(deleted);
    return deleted.then((r) => this.noteFinished(r));
  }

  private noteFinished(r: Result<void>): boolean {
    if (!r.ok) this.finishFailed(r.code);
    return true;
  }

  private finishFailed(code: FailureCode): void {
    this.ctx.log.warn({ code }, 'Gearman: a job could not be removed or held');
  }

  /** Waits for an operation whose answer nobody is told (a drop, a hold); a failure is logged. */
  private settleQuietly(value: Pending<Result<unknown>>): void {
    if (!isPending(value)) {
      if (!value.ok) this.finishFailed(value.code);
      return;
    }
    value.then(
      (r) => (r.ok ? undefined : this.finishFailed(r.code)),
      (err: unknown) => this.ctx.log.error({ err }, 'Gearman: an operation failed'),
    );
  }

  // ---- leaving ---------------------------------------------------------------------------------

  /**
   * The connection is over: a job this worker held goes back to its queue (at its head: ids are
   * FIFO), and a foreground job nobody waits for any more is dropped if it has not started.
   */
  close(): Pending<void> {
    this.letGo([...this.waitingOn]);
    this.waitingOn.clear();
    return this.client.close();
  }

  /**
   * Stops waiting on `ids`, a slice per turn (a client may wait on many). A foreground job that
   * nobody waits for any more and that no worker has started is dropped; a background job a
   * foreground submit had joined stays, as it does in gearmand.
   */
  private letGo(ids: number[], from = 0): void {
    const end = Math.min(ids.length, from + LEAVE_SLICE);
    for (let i = from; i < end; i++) this.registry.stopWaiting(ids[i]!, this.watcher);
    if (end < ids.length) setImmediate(() => this.letGo(ids, end));
    this.ctx.ops.onActivity();
  }
}

const NO_BYTES = Buffer.alloc(0);
/** A job's bytes kept past the next operation (a store's JobBytes may be a view it refills). */
function copyOf(job: JobBytes): JobBytes {
  const body = Buffer.from(job.bodyBuf.subarray(job.bodyOffset, job.bodyOffset + job.bodyLength));
  return { id: job.id, tubeName: job.tubeName, bodyBuf: body, bodyOffset: 0, bodyLength: body.length, transient: job.transient === true };
}
