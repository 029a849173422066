/**
 * One client of a cluster node: its used tube and watch list, the reservations it holds (each
 * with its fencing token and deadline), and a blocked reserve. Jobs are in PostgreSQL; what is
 * here is what beanstalkd keeps per connection, and the timers that act for it: its jobs' TTRs
 * (expiry, and DEADLINE_SOON while it waits) and its reserve timeout.
 */
import { DEADLINE_SOON_MARGIN_MS, DEFAULT_TUBE } from '../../shared/limits.js';
import { OrderedSet } from '../common/ordered-set.js';
import { fail, ok } from '../common/result.js';
import { Rotation } from '../engine/rotation.js';
import type {
  ClientDelegate,
  ClientOperations,
  ConnectOptions,
  MadeJob,
  JobBytes,
  NewJob,
  ReleaseOutcome,
  ReserveOutcome,
  Result,
  SessionView,
  TubeName,
} from '../operations/operations.js';
import { mayIgnore, ttrWithFloor } from '../common/rules.js';
import type { ReservedRow } from './batched.js';
import type { ClientStore } from './client-store.js';
import { jobBytes } from './job-row.js';
import { run } from './pool.js';
import { STATE } from './schema.js';

/** A reservation this client holds: the token's counter and when it runs out (epoch ms). */
interface Held {
  tube: string;
  reserves: number;
  deadlineAt: number;
  /** Touches (or holds) of the job whose answer has not come yet. */
  extending: number;
}


const OK_VOID: Result<void> = ok(undefined);
/** Reserves and sleeps counted in the order they came, for ClusterClient.arrival. */
let arrivals = 0;

export class ClusterClient implements ClientOperations {
  private used = DEFAULT_TUBE;
  /** When its latest reserve or sleep came (WaitingClient.arrival). */
  arrival = 0;
  /** Watched tubes in beanstalkd's list-tubes-watched order (an ignore swaps the last one in). */
  private readonly watched = new OrderedSet<string>();
  /** --gearman-round-robin: the watched tubes in the order a reserve tries them; null: all at once, best job first. */
  private readonly rotation: Rotation<string> | null;
  /** A put admitted whose body never came (EXPECTED_CRLF, a disconnect): its id is used up. */
  private admitted = false;
  private readonly held = new Map<number, Held>();
  producer = false;
  worker = false;
  private halfClosed = false;
  private holdMs = -1;
  /** A blocked reserve (until: epoch ms, -1 for ever), or a sleep (wakeOnly). */
  private wait: { until: number; wakeOnly: boolean } | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** When `timer` fires (epoch ms). */
  private timerAt = Number.POSITIVE_INFINITY;
  private readonly openedAt: number;
  private lastCommandAt: number;
  private lastCommand = '';
  private closed = false;
  /** A Gearman worker: it watches nothing until it asks, and may ignore its last function. */
  private readonly mayWatchNothing: boolean;
  /** A foreground submit was made: the client may wait on jobs, recorded in the database. */
  private waited = false;
  private readonly submitting = new Set<Promise<unknown>>();
  /** Set before any reservation is asked for: a closing client then gives back whatever it holds, known or not. */
  private everReserved = false;

  /** Who its client certificate says it is (mutual TLS), or null. */
  readonly identity: string | null;

  constructor(
    private readonly store: ClientStore<ClusterClient>,
    readonly id: number,
    readonly delegate: ClientDelegate,
    readonly peer: string,
    options: ConnectOptions,
  ) {
    this.openedAt = this.lastCommandAt = store.now();
    this.mayWatchNothing = options.watchNothing === true;
    this.identity = options.identity ?? null;
    this.rotation = options.roundRobin === true ? new Rotation<string>() : null;
    store.localTube(DEFAULT_TUBE).using++;
    if (!this.mayWatchNothing) {
      this.watched.add(DEFAULT_TUBE);
      store.localTube(DEFAULT_TUBE).watching++;
    }
  }

  get isWaiting(): boolean {
    return this.wait !== null && !this.wait.wakeOnly;
  }

  noteCommand(name: string, at: number): void {
    this.settleAdmitted();
    this.lastCommand = name;
    this.lastCommandAt = at;
  }

  usedTube(): string {
    return this.used;
  }

  watchedTubes(): string[] {
    return [...this.watched.values()];
  }

  watchedCount(): number {
    return this.watched.size;
  }

  use(tube: string): Result<TubeName> {
    if (tube !== this.used) {
      this.store.localTube(this.used).using--;
      this.store.releaseTube(this.used);
      this.store.localTube(tube).using++;
      this.used = tube;
    }
    return ok({ name: tube });
  }

  watch(tube: string): Result<number> {
    if (!this.watched.has(tube)) {
      this.watched.add(tube);
      this.rotation?.add(tube);
      this.store.localTube(tube).watching++;
      if (this.isWaiting) this.store.localTube(tube).waiting++;
    }
    return ok(this.watched.size);
  }

  ignore(tube: string): Result<number> {
    if (this.watched.has(tube)) {
      if (!mayIgnore(this.watched.size, this.mayWatchNothing)) return fail('NOT_IGNORED');
      this.watched.delete(tube);
      this.rotation?.delete(tube);
      this.store.localTube(tube).watching--;
      if (this.isWaiting) this.store.localTube(tube).waiting--;
      this.store.releaseTube(tube);
    }
    return ok(this.watched.size);
  }

  /**
   * The id comes from the database's sequence when the put commits (put answers it). beanstalkd
   * gives the id here, so a put whose body never comes still uses one up: noted now, and drawn
   * from the sequence before this node's next put if no body follows.
   */
  admitPut(bytes: number): Result<number> {
    this.settleAdmitted();
    this.producer = true;
    // Beyond beanstalkd, as in memory: the budget is checked before the body is read.
    if (this.store.overBudget(bytes)) return fail('OUT_OF_MEMORY');
    this.admitted = true;
    return ok(0);
  }

  put(_id: number, job: NewJob): Promise<Result<MadeJob>> | Result<MadeJob> {
    this.admitted = false;
    return this.submit(this.used, job);
  }

  /** A put admitted before this command never got its body: its id is used up. */
  private settleAdmitted(): void {
    if (!this.admitted) return;
    this.admitted = false;
    this.store.useUpIds(1);
  }

  submit(tube: string, job: NewJob): Promise<Result<MadeJob>> | Result<MadeJob> {
    this.producer = true;
    if (this.store.isTooBig(job.body.length)) return fail('JOB_TOO_BIG');
    if (this.store.draining) return fail('DRAINING');
    if (this.store.overBudget(job.body.length)) return fail('OUT_OF_MEMORY');
    const result = this.store.insert(tube, { ...job, ttrMs: ttrWithFloor(job.ttrMs) }, this.id);
    if (job.transient === true) {
      // A foreground submit records this client as waiting: its leaving waits for the record.
      this.waited = true;
      this.submitting.add(result);
      void result.finally(() => this.submitting.delete(result));
    }
    return result;
  }

  async reserve(timeoutMs: number | null): Promise<ReserveOutcome<JobBytes>> {
    this.arrival = ++arrivals;
    this.settleAdmitted();
    this.stopWaiting();
    this.worker = true;
    const now = this.store.now();
    if (this.deadlineSoon(now) && !(await this.anyWatchedReady())) return { kind: 'deadline-soon' };
    const generation = this.store.wakeGeneration;
    const job = this.rotation === null ? await this.take([...this.watched.values()], () => !this.closed) : await this.takeInTurn(this.rotation);
    if (job !== null) return { kind: 'reserved', job };
    // protocol: a zero timeout still lets a held job inside the DEADLINE_SOON margin win.
    if (timeoutMs === 0 && this.deadlineSoon(this.store.now())) return { kind: 'deadline-soon' };
    if (timeoutMs === 0 || this.halfClosed) return { kind: 'timed-out' };
    this.startWaiting(timeoutMs === null ? -1 : now + timeoutMs, false);
    // A job made ready while the statement ran woke nobody: look again for this client.
    if (this.store.wakeGeneration !== generation) this.store.wake(null);
    return { kind: 'waiting' };
  }

  /**
   * Offered by the store's dispatch while this client waits: reserves from `tubes` and hands the
   * job over (or, asleep, says a job is ready). False when nothing was there.
   */
  async offer(tubes: string[]): Promise<boolean> {
    const wait = this.wait;
    if (wait === null) return true;
    if (wait.wakeOnly) {
      const any = await this.anyTakeable(tubes);
      if (!any || this.wait !== wait) return any;
      this.stopWaiting();
      this.delegate.woken();
      return true;
    }
    // Left out of the statement if the client stops waiting before it runs (its own reserve
    // then gets the best job, not this offer).
    const job = await this.take(tubes, () => this.wait === wait && !this.closed);
    if (job === null) return false;
    if (this.wait !== wait || this.closed) {
      // The client stopped waiting (or left) while the statement ran: the job goes back.
      await this.giveBack(job.id);
      return true;
    }
    this.stopWaiting();
    this.delegate.reserved(job);
    return true;
  }

  /**
   * Round robin: the best job of the first tube in the rotation that has one, a statement per
   * tube tried (a worker of many functions with empty queues pays for each).
   */
  private async takeInTurn(rotation: Rotation<string>): Promise<JobBytes | null> {
    for (const tube of [...rotation.order()]) {
      const job = await this.take([tube], () => !this.closed);
      if (job === null) continue;
      rotation.served(tube);
      return job;
    }
    return null;
  }

  /** Reserves the best ready job of `tubes` for this client, or null. */
  private async take(tubes: string[], live: () => boolean): Promise<JobBytes | null> {
    if (tubes.length === 0) return null;
    this.everReserved = true;
    const row = await this.store.reserves.add({ tubes, conn: this.id, hold: this.holdMs, live });
    if (row === null) return null;
    const job = this.holding(row);
    if (this.closed) {
      // The connection ended while the statement ran: the job goes back at once.
      await this.giveBack(job.id);
      return null;
    }
    return job;
  }

  private holding(row: ReservedRow): JobBytes {
    this.store.taken(row);
    this.held.set(row.id, { tube: row.tube, reserves: row.reserves, deadlineAt: row.due_at, extending: 0 });
    this.schedule();
    return jobBytes(row);
  }

  private async giveBack(id: number): Promise<void> {
    const token = this.token(id);
    if (!this.held.delete(id)) return;
    this.store.untaken(id);
    const [row] = await run<{ tube: string }>(this.store.pool, this.store.sql.unreserve, [id, ...token]);
    if (row !== undefined) this.store.jobsReady([row.tube], true);
  }

  async reserveJob(id: number): Promise<Result<JobBytes>> {
    this.worker = true;
    this.everReserved = true;
    try {
      const [row] = await run<ReservedRow>(this.store.pool, this.store.sql.reserveJob, [id, this.store.nodeId, this.id, this.store.now(), this.holdMs]);
      if (row === undefined) return fail('NOT_FOUND');
      const job = this.holding(row);
      if (this.closed) await this.giveBack(job.id);
      return ok(job);
    } catch (err) {
      return this.store.failed(err);
    }
  }

  /** The token of a reservation this client holds ([-1, -1, -1] when it holds none: matches nothing). */
  private token(id: number): [number, number, number] {
    const held = this.held.get(id);
    return held === undefined ? [-1, -1, -1] : [this.store.nodeId, this.id, held.reserves];
  }

  async delete(id: number): Promise<Result<void>> {
    try {
      const [node, conn, reserves] = this.token(id);
      const row = await this.store.deletes.add({ id, node, conn, reserves, client: this.id });
      if (row === null) return fail('NOT_FOUND');
      this.drop(id);
      this.store.localTube(row.tube).deletes++;
      this.store.jobEnded(id);
      return OK_VOID;
    } catch (err) {
      return this.store.failed(err);
    }
  }

  async release(id: number, priority: number, delayMs: number): Promise<Result<ReleaseOutcome>> {
    if (!this.held.has(id)) return fail('NOT_FOUND');
    try {
      const now = this.store.now();
      const [row] = await run<{ tube: string; state: number; due_at: number }>(this.store.pool, this.store.sql.release, [
        id,
        ...this.token(id),
        priority,
        delayMs,
        now,
        this.store.defaultDeadLetterAfter,
      ]);
      this.drop(id);
      if (row === undefined) return fail('NOT_FOUND');
      this.store.reservationEnded(row.tube, row.state, row.due_at);
      return ok(row.state === STATE.buried ? 'buried' : 'released');
    } catch (err) {
      return this.store.failed(err);
    }
  }

  async bury(id: number, priority: number): Promise<Result<void>> {
    if (!this.held.has(id)) return fail('NOT_FOUND');
    try {
      const [row] = await run<{ tube: string }>(this.store.pool, this.store.sql.bury, [id, ...this.token(id), priority]);
      this.drop(id);
      if (row === undefined) return fail('NOT_FOUND');
      this.store.reservationEnded(row.tube, STATE.buried);
      return OK_VOID;
    } catch (err) {
      return this.store.failed(err);
    }
  }

  async touch(id: number): Promise<Result<void>> {
    return this.extend(id, this.holdMs < 0 ? null : this.store.now() + this.holdMs);
  }

  async hold(id: number, holdMs: number): Promise<Result<void>> {
    return this.extend(id, this.store.now() + holdMs);
  }

  /** Moves a held job's deadline (null: now + its TTR). */
  private async extend(id: number, deadlineAt: number | null): Promise<Result<void>> {
    const held = this.held.get(id);
    if (held === undefined) return fail('NOT_FOUND');
    held.extending++;
    try {
      const deadline = deadlineAt === null || Number.isFinite(deadlineAt) ? deadlineAt : Number.MAX_SAFE_INTEGER;
      const [row] = await run<{ due_at: number }>(this.store.pool, this.store.sql.touch, [id, ...this.token(id), deadline, this.store.now()]);
      if (row === undefined) {
        this.drop(id);
        return fail('NOT_FOUND');
      }
      held.deadlineAt = row.due_at;
      this.schedule();
      return OK_VOID;
    } catch (err) {
      return this.store.failed(err);
    } finally {
      held.extending--;
    }
  }

  holds(id: number): boolean {
    return this.held.has(id);
  }

  async peekReady(): Promise<JobBytes | undefined> {
    const [row] = await run<{ id: number; tube: string; body: Buffer }>(this.store.pool, this.store.sql.peekReady, [this.used]);
    return row === undefined ? undefined : jobBytes(row);
  }

  async peekDelayed(): Promise<JobBytes | undefined> {
    const [row] = await run<{ id: number; tube: string; body: Buffer }>(this.store.pool, this.store.sql.peekDelayed, [this.used]);
    return row === undefined ? undefined : jobBytes(row);
  }

  async peekBuried(): Promise<JobBytes | undefined> {
    const [row] = await run<{ id: number; tube: string; body: Buffer }>(this.store.pool, this.store.sql.peekBuried, [this.used]);
    return row === undefined ? undefined : jobBytes(row);
  }

  kick(bound: number): Promise<number> {
    return this.store.kickIn(this.used, bound);
  }

  async sleep(): Promise<boolean> {
    if (this.wait !== null) return false;
    this.arrival = ++arrivals;
    if (await this.anyTakeable([...this.watched.values()])) return true;
    this.startWaiting(-1, true);
    return false;
  }

  setHold(holdMs: number): void {
    this.holdMs = Number.isFinite(holdMs) ? holdMs : Math.floor(Number.MAX_SAFE_INTEGER / 2);
  }

  halfClose(): void {
    this.halfClosed = true;
    const wait = this.wait;
    if (wait === null) return;
    this.stopWaiting();
    if (!wait.wakeOnly) this.delegate.timedOut();
  }

  /** Ends the client: what it holds is ready again (no strike, as beanstalkd does on a disconnect). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.settleAdmitted();
    this.stopWaiting();
    this.stopTimers();
    this.store.forget(this);
    this.store.localTube(this.used).using--;
    this.store.releaseTube(this.used);
    for (const tube of this.watched.values()) {
      this.store.localTube(tube).watching--;
      this.store.releaseTube(tube);
    }
    for (const id of this.held.keys()) this.store.untaken(id);
    this.held.clear();
    // The jobs it waited on first, then the ones it held: a foreground job it both waited on and
    // ran (Gearman's client and worker on one connection) comes back to the queue with nobody
    // waiting, so the next take drops it. The other way round, a worker elsewhere could take it
    // in between, still seeing this client wait, and run it for nobody.
    if (this.waited) {
      // A submit still in flight records this client as waiting when it commits: after it.
      await Promise.allSettled([...this.submitting]);
      await this.store.clientLeft(this.id);
    }
    // Also when it holds nothing it knows of: a reserve that committed after the statement
    // failed for it (a timeout, a batch that failed) left a job it was never told about.
    if (this.everReserved) await this.store.giveBackConnection(this.store.nodeId, this.id);
  }

  stopTimers(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  view(): SessionView {
    return {
      id: this.id,
      peer: this.peer,
      identity: this.identity,
      openedAt: this.openedAt,
      lastCommandAt: this.lastCommandAt,
      lastCommand: this.lastCommand,
      holding: [...this.held].map(([id, h]) => ({ id, tube: h.tube, deadlineAt: h.deadlineAt })),
      producer: this.producer,
      worker: this.worker,
      waiting: this.isWaiting,
      using: this.used,
      watching: [...this.watched.values()],
      reserved: [...this.held.keys()],
    };
  }

  // ---- waiting and deadlines --------------------------------------------------------------------

  private startWaiting(until: number, wakeOnly: boolean): void {
    this.wait = { until, wakeOnly };
    if (!wakeOnly) for (const tube of this.watched.values()) this.store.localTube(tube).waiting++;
    this.store.addWaiter(this);
    this.schedule();
  }

  private stopWaiting(): void {
    const wait = this.wait;
    if (wait === null) return;
    this.wait = null;
    if (!wait.wakeOnly) for (const tube of this.watched.values()) this.store.localTube(tube).waiting--;
    this.store.removeWaiter(this);
    this.schedule();
  }

  private drop(id: number): void {
    if (this.held.delete(id)) this.schedule();
  }

  private soonestDeadline(): number {
    let soonest = Number.POSITIVE_INFINITY;
    for (const h of this.held.values()) if (h.deadlineAt < soonest) soonest = h.deadlineAt;
    return soonest;
  }

  private deadlineSoon(now: number): boolean {
    return now >= this.soonestDeadline() - DEADLINE_SOON_MARGIN_MS;
  }

  /** True when a reserve over `tubes` could take a job now: one is ready where no policy holds it back. */
  private async anyTakeable(tubes: string[]): Promise<boolean> {
    const gated = this.store.policies.gates(tubes);
    const statement = gated ? this.store.policies.sql.anyOpen : this.store.sql.anyReady;
    const [row] = await run<{ any: boolean }>(this.store.pool, statement, gated ? [tubes, this.store.now()] : [tubes]);
    return row?.any === true;
  }

  private async anyWatchedReady(): Promise<boolean> {
    const [row] = await run<{ any: boolean }>(this.store.pool, this.store.sql.anyReady, [[...this.watched.values()]]);
    return row?.any === true;
  }

  /**
   * Times the next thing to do for this client: an expiry, DEADLINE_SOON, or its reserve timeout.
   * A timer armed no later than needed is kept: `tick` looks at everything when it fires and
   * arms the next one, so a timer that fires early costs one look. Every reserve and delete
   * schedules; re-arming for each cost two timer operations per job.
   */
  private schedule(): void {
    if (this.closed) return this.stopTimers();
    const soonest = this.soonestDeadline();
    let at = Number.POSITIVE_INFINITY;
    // protocol: a reservation expires once its deadline has passed (strictly).
    if (soonest !== Number.POSITIVE_INFINITY) at = soonest + 1;
    if (this.isWaiting) {
      if (soonest !== Number.POSITIVE_INFINITY) at = Math.min(at, soonest - DEADLINE_SOON_MARGIN_MS);
      if (this.wait!.until >= 0) at = Math.min(at, this.wait!.until);
    }
    if (this.timer !== null && this.timerAt <= at) return;
    this.stopTimers();
    if (at === Number.POSITIVE_INFINITY) return;
    this.timerAt = at;
    this.timer = setTimeout(this.onTimer, Math.max(0, Math.min(at - this.store.now(), 2 ** 31 - 1)));
  }

  private readonly onTimer = (): void => void this.tick();

  private async tick(): Promise<void> {
    this.timer = null;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.store.now();
    const soon = this.isWaiting && this.deadlineSoon(now);
    for (const [id, held] of [...this.held]) {
      if (held.deadlineAt >= now) continue;
      try {
        // Only if the deadline in the database has passed too: a touch that committed first
        // (queued before this statement) keeps the job, and its TOUCHED stays true.
        const [row] = await run<{ tube: string; state: number; due_at: number }>(this.store.pool, this.store.sql.expire, [
          id,
          this.store.nodeId,
          this.id,
          held.reserves,
          this.store.defaultDeadLetterAfter,
          this.store.now(),
        ]);
        if (row !== undefined) {
          this.held.delete(id);
          this.store.jobTimeouts++;
          this.store.reservationEnded(row.tube, row.state, row.due_at);
        } else if (this.held.get(id) === held && held.extending === 0 && held.deadlineAt < this.store.now()) {
          // Not touched meanwhile: the token no longer holds the job (its node was reaped, or
          // another node expired it); this client holds nothing. A touch still in flight may be
          // what kept the job (its answer, on another connection, can come after this one): its
          // own answer says whether the job is still held.
          this.held.delete(id);
        }
      } catch (err) {
        // Any node expires it a little later (the store's poll); this client keeps its entry
        // until then, so a touch can still save the job.
        this.store.log.warn({ err: (err as Error).message }, 'cluster: expiring a reservation failed');
        held.deadlineAt = Math.max(held.deadlineAt, now + 1000 - 1);
      }
    }
    const wait = this.wait;
    if (soon && wait !== null) {
      this.stopWaiting();
      this.delegate.deadlineSoon();
    } else if (wait !== null && !wait.wakeOnly && wait.until >= 0 && this.store.now() >= wait.until) {
      this.stopWaiting();
      this.delegate.timedOut();
    } else {
      this.schedule();
    }
  }
}
