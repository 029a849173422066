import { DEADLINE_SOON_MARGIN_MS, DEFAULT_TUBE } from '../../shared/limits.js';
import type { HistoryActor } from '../../shared/history.js';
import type { Clock } from './clock.js';
import { EngineEvents } from './events.js';
import { IndexedHeap } from './heap.js';
import { DEFAULT_HISTORY_EVENTS, JobHistory } from './history.js';
import { JOB_RECORD_HEAP_BYTES, TUBE_RECORD_HEAP_BYTES } from './record-costs.js';
import {
  BURY_CAUSE_CODE,
  type Job,
  TRANSIENT_FILE,
  Session,
  Tube,
  type JobImage,
  type JobState,
  type SessionDelegate,
  jobState,
  makeJob,
  setJobPriority,
  setJobDelayMs,
  countRelease,
  setJobDeadlineAt,
  jobTtrMs,
  jobDeadlineAt,
  countTimeout,
  setJobState,
  rebaseDeadline,
  jobFile,
  setJobFile,
} from './records.js';
import { nullJournal, type Journal, type TubeSettings } from './journal.js';
import { DEADLINE_SOON, fail, ok, TIMED_OUT, WAITING, type ReserveOutcome, type Result } from '../common/result.js';
import { Rotation } from './rotation.js';
import { SWITCH_AFTER_MS, TimeBase } from './time-base.js';
import { JobWatchers, type JobUpdate, type JobWatcher } from './watchers.js';
import { ServerStats, type CountedCommand } from './stats.js';
import { MemoryBudget } from './budget.js';
import { TubeRegistry } from './tube-registry.js';
import { JobTable } from './job-table.js';
import { Recovery } from './recovery.js';
import { JobEditor } from './edits.js';
import { FailureRules } from './failures.js';
import { WIDE_SESSION_TUBES, WaitingSessions } from './waiting.js';
import { JobQueues } from './queues.js';
import { PolicyGates } from './policy-gates.js';
import { WatchLists } from './watch-lists.js';
import type { TubePolicy } from '../../shared/policy.js';
import type { EngineOptions, JobEdit, KickKind, PutRequest } from './requests.js';

export type { EngineOptions, JobEdit, KickKind, PutRequest };
export { WIDE_SESSION_TUBES };

/**
 * The job server's state and every operation on it. Pure: no I/O and no timers. Time comes
 * from the injected clock; the owner calls `tick(now)` at `nextDeadline()`.
 *
 * Nothing here scans all tubes: tubes that have both waiting sessions and ready jobs sit in a
 * heap keyed by their best ready job, tubes holding delayed jobs in a heap keyed by their soonest,
 * paused tubes in a heap by unpause time and sessions in a heap by their next TTR or reserve
 * timeout.
 */
export class Engine {
  readonly stats = new ServerStats();
  readonly events = new EngineEvents();
  readonly defaultTube: Tube;
  draining = false;
  readonly startedAt: number;

  private readonly clock: Clock;
  private readonly journal: Journal;
  /** What happened to jobs lately, in one ring for all of them (history.ts). */
  readonly history: JobHistory;
  /** Largest body in bytes a job may have. */
  readonly maxJobSize: number;
  /** What one job costs in the record budget (bytes). */
  private readonly jobRecordBytes: number;
  private readonly budget: MemoryBudget;
  /** The tubes, their settings and their pauses (tube-registry.ts). */
  private readonly tubeRegistry: TubeRegistry;
  /** Every job by id, with their bodies (job-table.ts). */
  private readonly jobs = new JobTable();
  private readonly recovery: Recovery;
  private readonly editor: JobEditor;
  private readonly failures: FailureRules;
  private readonly sessionTicks = new IndexedHeap<Session>(
    (a, b) => a.tickAt < b.tickAt,
    (s, i) => (s.tickIndex = i),
  );
  private readonly sessions = new Set<Session>();
  /** Where each job waits by state: ready, delayed and buried, per tube and server-wide (queues.ts). */
  private readonly queues: JobQueues;
  /** Sessions blocked in reserve or asleep, and how a ready job finds one (waiting.ts). */
  private readonly waiting: WaitingSessions;
  /** Tube policies at work: caps, rates, queue caps, timeout backoff (policy-gates.ts). */
  private readonly gates: PolicyGates;
  /** The tubes each session uses and watches (watch-lists.ts). */
  private readonly watchLists: WatchLists;
  /** What opens closed tubes at a time (tick): pauses that end, rate tokens that come back. */
  private readonly openings: readonly { next(): number | undefined; open(now: number, budget: number): number }[];
  /** Who waits for news of a job (Gearman clients attached to a handle). */
  private readonly watchers = new JobWatchers();
  private nextSessionId = 1;
  /** What every job's times are relative to (Job, keepTimesSmall). */
  private readonly timeBase: TimeBase;

  constructor(options: EngineOptions) {
    this.clock = options.clock;
    this.timeBase = new TimeBase(this.clock.now());
    this.journal = options.journal ?? nullJournal;
    this.history = new JobHistory(options.historyEvents ?? DEFAULT_HISTORY_EVENTS);
    this.maxJobSize = options.maxJobSize ?? Number.POSITIVE_INFINITY;
    this.jobRecordBytes = options.jobRecordBytes ?? JOB_RECORD_HEAP_BYTES;
    this.budget = new MemoryBudget(
      this,
      options.maxJobBytes ?? Number.POSITIVE_INFINITY,
      options.maxRecordHeapBytes ?? Number.POSITIVE_INFINITY,
      this.jobRecordBytes,
    );
    this.waiting = new WaitingSessions(
      this.stats,
      {
        now: () => this.clock.now(),
        schedule: (session) => this.schedule(session),
        hand: (session, job, now) => {
          this.queues.removeReady(job);
          this.reserveFor(session, job, now, 'ready');
          session.delegate.reserved(job);
        },
      },
      options.wideSessionTubes ?? WIDE_SESSION_TUBES,
    );
    this.queues = new JobQueues(this.stats, this.events, this.waiting);
    this.startedAt = this.clock.now();
    this.gates = new PolicyGates(this.waiting, () => this.clock.now(), options.random ?? Math.random);
    this.tubeRegistry = new TubeRegistry(this.timeBase, this.events, this.waiting, this.gates, options.deadLetterAfter ?? 0);
    this.defaultTube = this.tubeRegistry.createDefault(DEFAULT_TUBE);
    this.watchLists = new WatchLists(this.tubeRegistry, this.waiting, this.budget);
    this.openings = [
      { next: () => this.tubeRegistry.nextUnpauseAt(), open: (now, budget) => this.tubeRegistry.endPauses(now, budget) },
      { next: () => this.gates.nextReopenAt(), open: (now, budget) => this.gates.reopen(now, budget) },
    ];
    this.recovery = new Recovery(this.jobs, this.tubeRegistry, this.queues, this.stats);
    const host = {
      maxJobSize: this.maxJobSize,
      hasRoomFor: (bytes: number) => this.hasRoomFor(bytes),
      journalOf: (job: Job) => this.journalOf(job),
      now: () => this.clock.now(),
    };
    this.editor = new JobEditor(host, this.jobs, this.tubeRegistry, this.queues, this.history, this.events, this.stats);
    const failureHost = { journalOf: host.journalOf, drop: (job: Job, from: JobState) => this.dropJob(job, from) };
    this.failures = new FailureRules(failureHost, this.queues, this.history, options.dropAfterFailures ?? 0);
  }

  now(): number {
    return this.clock.now();
  }

  // ---- tubes ---------------------------------------------------------------------------------

  tube(name: string): Tube | undefined {
    return this.tubeRegistry.get(name);
  }

  /** All tubes in list-tubes order. */
  tubes(): readonly Tube[] {
    return this.tubeRegistry.list();
  }

  /** The tube named `name`, created if needed. The caller has validated the name. */
  findOrCreateTube(name: string): Tube {
    return this.tubeRegistry.findOrCreate(name);
  }

  /** The server-wide dead-letter limit (0: off). */
  get defaultDeadLetterAfter(): number {
    return this.tubeRegistry.defaultDeadLetterAfter;
  }

  /** A tube's own settings, or null when the server's defaults apply. The tube need not exist. */
  ownTubeSettings(name: string): TubeSettings | null {
    return this.tubeRegistry.ownSettings(name);
  }

  /**
   * Sets a tube's own settings (null: back to the server's defaults), recorded in the journal
   * first. They apply from the next release or timeout; a job whose strikes already reach a lower
   * limit is buried at its next one.
   */
  setTubeSettings(name: string, settings: TubeSettings | null): Result<void> {
    return this.appliedOnceRecorded(this.journal.setTubeSettings(name, settings), () => this.tubeRegistry.applySettings(name, settings));
  }

  /** Recovery: a tube's settings record (its own settings and its policy). */
  restoreTubeSettings(img: { tube: string; settings: TubeSettings | null; policy: TubePolicy | null }): void {
    this.tubeRegistry.applySettings(img.tube, img.settings);
    this.tubeRegistry.applyPolicy(img.tube, img.policy);
  }

  /** A tube's policy, or null when it has none. The tube need not exist. */
  tubePolicy(name: string): TubePolicy | null {
    return this.tubeRegistry.policy(name);
  }

  /**
   * Sets a tube's policy (null: none), recorded in the journal first. It applies at once: a
   * lower cap takes no job back, it only holds the next reserves.
   */
  setTubePolicy(name: string, policy: TubePolicy | null): Result<void> {
    return this.appliedOnceRecorded(this.journal.setTubePolicy(name, policy), () => this.tubeRegistry.applyPolicy(name, policy));
  }

  /** A tube change the journal must hold first (settings, policy): applied once `recorded`, else INTERNAL_ERROR and nothing changes. */
  private appliedOnceRecorded(recorded: boolean, apply: () => void): Result<void> {
    if (!recorded) return fail('INTERNAL_ERROR');
    apply();
    return ok(undefined);
  }

  /** Pauses reservations from a tube for `delayMs` (0: for an instant, which wakes waiters). */
  pauseTube(name: string, delayMs: number): Result<Tube> {
    return this.tubeRegistry.pause(name, delayMs, this.clock.now());
  }

  /** Removes `tube` if nothing uses, watches or holds it (for front doors that create tubes on the fly). */
  dropTubeIfUnused(tube: Tube): void {
    this.tubeRegistry.removeIfUnused(tube);
  }

  // ---- sessions ------------------------------------------------------------------------------

  /**
   * A new session, using the default tube and watching it; with `watchNothing` it watches no
   * tube at first and may ignore its last one (a Gearman worker registers its functions).
   */
  openSession(delegate: SessionDelegate, options: { watchNothing?: boolean; roundRobin?: boolean } = {}): Session {
    const session = new Session(this.nextSessionId++, delegate);
    session.openedAt = session.lastCommandAt = this.clock.now();
    this.sessions.add(session);
    session.used = this.defaultTube;
    this.defaultTube.using++;
    if (options.roundRobin === true) session.rotation = new Rotation<Tube>();
    if (options.watchNothing === true) {
      session.mayWatchNothing = true;
    } else {
      session.watched.add(this.defaultTube);
      this.defaultTube.watching++;
    }
    this.stats.currentConnections++;
    this.stats.totalConnections++;
    return session;
  }

  /**
   * Ends a session: it stops waiting, its reserved jobs go back to ready (oldest reservation
   * first) and its tubes are released. Releases at most `budget` jobs per call and returns false
   * while more remain, so a client that held a million jobs cannot stall others as it leaves.
   */
  closeSession(session: Session, budget = Number.POSITIVE_INFINITY): boolean {
    if (session.closed) return true;
    if (session.waiting) this.waiting.stopWaiting(session);
    for (let n = 0, job = session.reservedJobs.first(); job !== undefined; n++, job = session.reservedJobs.first()) {
      if (n >= budget) {
        this.gates.serveOpened();
        return false;
      }
      // The job is already ready on disk; the record only keeps its reserves counter, so it is
      // skipped rather than failing the disconnect when the binlog has no room.
      const recorded = this.journalOf(job).canUpdate(1);
      this.removeReserved(session, job);
      // Recorded before the job is ready: a waiting worker may take it at once, and reserve after.
      const now = this.clock.now();
      this.history.record(job.id, now, 'disconnect', session.id, session.peer);
      if (this.failures.failedTooOften(job, now, 'disconnect')) continue;
      this.queues.enqueueReady(job, 'reserved');
      if (recorded) this.journalOf(job).update(job);
    }
    this.gates.serveOpened();
    // protocol: beanstalkd clears the watch list by always removing the first item, which
    // decides the order in which unreferenced tubes leave list-tubes.
    for (let tube = session.watched.shift(); tube !== undefined; tube = session.watched.shift()) {
      tube.watching--;
      if (session.wide) tube.wideWatchers.delete(session);
      this.tubeRegistry.removeIfUnused(tube);
    }
    session.used.using--;
    this.tubeRegistry.removeIfUnused(session.used);
    if (session.tickIndex >= 0) this.sessionTicks.removeAt(session.tickIndex);
    if (session.isProducer) this.stats.producers--;
    if (session.isWorker) this.stats.workers--;
    this.stats.currentConnections--;
    session.closed = true;
    this.sessions.delete(session);
    return true;
  }

  /**
   * The session holding a reserved `job`, or null. Found from the sessions' own heaps, where a
   * reserved job's heapIndex points: a job keeps no link to its holder, so reserving and
   * releasing write nothing but the heap. O(sessions): for the dashboard and tests, never the
   * protocol's hot path (which knows the session and asks hasReserved).
   */
  holderOf(job: Job): Session | null {
    if (jobState(job) !== 'reserved') return null;
    for (const session of this.sessions) if (this.hasReserved(session, job)) return session;
    return null;
  }

  /** Every reserved job's holder, for a pass over many jobs (a search): O(reserved jobs). */
  holders(): Map<Job, Session> {
    const map = new Map<Job, Session>();
    for (const session of this.sessions) for (const job of session.reservedJobs.values()) map.set(job, session);
    return map;
  }

  /** Open sessions, oldest first. */
  allSessions(): IterableIterator<Session> {
    return this.sessions.values();
  }

  /** Makes `name` the session's tube; fails with OUT_OF_MEMORY when a new tube would not fit. */
  use(session: Session, name: string): Result<Tube> {
    return this.watchLists.use(session, name);
  }

  /** Adds a tube to the watch list; returns the number of watched tubes. Fails like `use`. */
  watch(session: Session, name: string): Result<number> {
    return this.watchLists.watch(session, name);
  }

  /** True when tube `name` exists or one more tube fits the record budget. */
  hasRoomForTube(name: string): boolean {
    return this.watchLists.hasRoomForTube(name);
  }

  /** Removes a tube from the watch list; the last watched tube cannot be ignored. */
  ignore(session: Session, name: string): Result<number> {
    return this.watchLists.ignore(session, name);
  }

  markProducer(session: Session): void {
    if (!session.isProducer) {
      session.isProducer = true;
      this.stats.producers++;
    }
  }

  markWorker(session: Session): void {
    if (!session.isWorker) {
      session.isWorker = true;
      this.stats.workers++;
    }
  }

  /** Counts a command for `stats` (`times` for a bulk action that stands for many, like a clear). */
  count(command: CountedCommand, times = 1): void {
    this.stats.commands[command] += times;
  }

  // ---- jobs ----------------------------------------------------------------------------------

  job(id: number): Job | undefined {
    return this.jobs.get(id);
  }

  /** Every job, in no particular order (for compaction and recovery checks). */
  allJobs(): IterableIterator<Job> {
    return this.jobs.values();
  }

  get jobTotal(): number {
    return this.jobs.size;
  }

  get delayedCount(): number {
    return this.stats.delayed;
  }

  /** The id the next put will get. */
  get nextId(): number {
    return this.jobs.nextId;
  }

  /** Takes the next job id. beanstalkd takes it when the put line arrives, so a failed put uses one up. */
  allocateJobId(): number {
    return this.jobs.allocateId();
  }

  /** Bytes of all job bodies held. */
  get bodyBytes(): number {
    return this.jobs.bodies.bytes;
  }

  /** What the job and tube records cost on the V8 heap (an estimate; see record-costs.ts). */
  get recordHeapBytes(): number {
    return this.jobs.size * this.jobRecordBytes + this.tubeRegistry.size * TUBE_RECORD_HEAP_BYTES;
  }

  /**
   * Counts `other`'s bodies and records against this engine's budgets and this engine's against
   * `other`'s: engines in one process (beanstalkd's and Gearman's jobs) share its memory.
   */
  shareBudgetWith(other: Engine): void {
    this.budget.share(other);
    other.budget.share(this);
    other.budget.poolWith(this.budget);
  }

  /** True when one more job with a body of `bytes` fits both memory budgets. */
  hasRoomFor(bytes: number): boolean {
    return this.budget.hasRoomForJob(bytes);
  }

  setDraining(): void {
    if (this.draining) return;
    this.draining = true;
    this.events.emit('server:draining', {});
  }

  /** True when a body of `bytes` is over the largest job size (`-z`). */
  isTooBig(bytes: number): boolean {
    return bytes > this.maxJobSize;
  }

  /** Adds a job: ready, or delayed when `delayMs` > 0. Fails with JOB_TOO_BIG, DRAINING or OUT_OF_MEMORY. */
  put(request: PutRequest): Result<Job> {
    if (request.body.length > this.maxJobSize) return fail('JOB_TOO_BIG');
    if (this.draining) return fail('DRAINING');
    if (request.tube.gate !== null && !this.gates.admits(request.tube)) return fail('QUEUE_FULL');
    if (!this.hasRoomFor(request.body.length)) return fail('OUT_OF_MEMORY');
    const now = this.clock.now();
    this.keepTimesSmall(now);
    const id = request.id ?? this.allocateJobId();
    const job = makeJob(id, request.tube, request.priority, request.delayMs, request.ttrMs, now);
    if (request.delayMs > 0) {
      setJobState(job, 'delayed');
      setJobDeadlineAt(job, now + request.delayMs);
    }
    this.jobs.bodies.place(job, request.body, request.bodyOwned === true);
    if (request.transient === true) setJobFile(job, TRANSIENT_FILE);
    if (!this.journalOf(job).put(job)) {
      this.jobs.bodies.release(job);
      return fail('OUT_OF_MEMORY');
    }
    this.jobs.compactSome();
    this.jobs.add(job);
    this.stats.totalJobs++;
    job.tube.totalJobs++;
    this.history.record(id, now, 'put', request.by?.id ?? 0, request.by?.peer ?? '');
    if (request.delayMs > 0) this.queues.enqueueDelayed(job, null, jobDeadlineAt(job));
    else this.queues.enqueueReady(job, null);
    return ok(job);
  }

  /** Blocks `session` for a job from its watched tubes. `timeoutMs` null waits forever. */
  reserve(session: Session, timeoutMs: number | null): ReserveOutcome<Job> {
    if (session.waiting) this.waiting.stopWaiting(session); // only a wake-only wait can be in progress
    this.markWorker(session);
    const now = this.clock.now();
    if (this.deadlineSoon(session, now) && !this.anyWatchedReady(session)) return DEADLINE_SOON;
    // A pause or a rate hold that ran out before the scheduler's tick ends now; other waiters are served first.
    for (const opening of this.openings) opening.open(now, Number.POSITIVE_INFINITY);
    const best = this.queues.bestReady(session, false);
    if (best !== undefined) {
      // protocol: beanstalkd always queues a reserving client as a waiter and takes it back
      // round-robin; that take advances the tube's rotation, which decides later waiter order.
      best.tube.waiting.add(session);
      best.tube.waiting.take();
      session.rotation?.served(best.tube);
      this.queues.removeReady(best);
      this.reserveFor(session, best, now, 'ready');
      return { kind: 'reserved', job: best };
    }
    // protocol: a zero timeout still waits until the next tick, where a held job inside the
    // DEADLINE_SOON margin wins over TIMED_OUT (possible here when only paused tubes are ready).
    if (timeoutMs === 0 && this.deadlineSoon(session, now)) return DEADLINE_SOON;
    if (timeoutMs === 0 || session.halfClosed) return TIMED_OUT;
    this.waiting.startWaiting(session, timeoutMs === null ? -1 : now + timeoutMs);
    return WAITING;
  }

  /** The peer half-closed: a blocked reserve gives up now, later ones at once. */
  halfClose(session: Session): void {
    session.halfClosed = true;
    if (!session.waiting) return;
    const wakeOnly = session.wakeOnly;
    this.waiting.stopWaiting(session);
    this.schedule(session);
    if (!wakeOnly) session.delegate.timedOut();
  }

  /**
   * Asks to be woken (`delegate.woken()`) once a job is ready in a tube the session watches,
   * without reserving it. Returns true, and waits for nothing, when one is ready now. A later
   * reserve, or the session's end, cancels the wait.
   */
  sleep(session: Session): boolean {
    if (session.waiting) return false;
    if (this.queues.bestReady(session, false) !== undefined) return true;
    session.wakeOnly = true;
    this.waiting.startWaiting(session, -1);
    return false;
  }

  /**
   * Sets how long this session's next reservations last (ms), overriding each job's TTR;
   * -1 goes back to the job's TTR, Infinity holds a job until the session lets go or ends.
   */
  setHold(session: Session, holdMs: number): void {
    session.holdMs = holdMs;
  }

  /** Reserves a job by id whatever its tube or state (except reserved). */
  reserveJob(session: Session, id: number): Result<Job> {
    const job = this.jobs.get(id);
    if (job === undefined || jobState(job) === 'reserved') return fail('NOT_FOUND');
    const from = jobState(job);
    // A buried or delayed job taken this way must come back ready after a restart, like any
    // reserved job, so the change is recorded (a reserve from ready needs no record).
    const record = from !== 'ready';
    if (record && !this.journalOf(job).canUpdate(1)) return fail('INTERNAL_ERROR');
    this.queues.detach(job);
    this.markWorker(session);
    this.reserveFor(session, job, this.clock.now(), from);
    if (record) this.journalOf(job).update(job);
    return ok(job);
  }

  /**
   * Deletes a job that is ready, delayed, buried, or reserved by `session`. `actor`: the
   * dashboard user behind a delete no session made (null: the server itself).
   */
  delete(session: Session | null, id: number, actor: HistoryActor | null = null): Result<Job> {
    const job = this.jobs.get(id);
    if (job === undefined || (jobState(job) === 'reserved' && !this.hasReserved(session, job))) return fail('NOT_FOUND');
    if (!this.journalOf(job).delete(job)) return fail('INTERNAL_ERROR');
    const from = jobState(job);
    if (from === 'reserved') {
      const holder = session!; // hasReserved() is false without a session
      this.removeReserved(holder, job);
      this.schedule(holder);
    } else {
      this.queues.detach(job);
    }
    this.history.record(id, this.clock.now(), 'delete', session?.id ?? 0, session?.peer ?? '', '', actor);
    this.dropJob(job, from);
    this.gates.serveOpened();
    return ok(job);
  }

  /**
   * Returns a job reserved by `session` to ready, or delayed when `delayMs` > 0; or buries it
   * when this release reaches the dead-letter limit (the job's state says which).
   */
  release(session: Session, id: number, priority: number, delayMs: number): Result<Job> {
    const job = this.takeBack(session, id);
    if (typeof job === 'string') return fail(job);
    setJobPriority(job, priority);
    setJobDelayMs(job, delayMs);
    countRelease(job);
    const now = this.clock.now();
    this.history.record(id, now, 'release', session.id, session.peer);
    if (this.failures.strike(job)) this.failures.deadLetter(job, now, 'release');
    else if (delayMs > 0) this.queues.enqueueDelayed(job, 'reserved', now + delayMs);
    else this.queues.enqueueReady(job, 'reserved');
    this.journalOf(job).update(job);
    this.gates.serveOpened();
    return ok(job);
  }

  bury(session: Session, id: number, priority: number): Result<Job> {
    const job = this.takeBack(session, id);
    if (typeof job === 'string') return fail(job);
    setJobPriority(job, priority);
    this.history.record(id, this.clock.now(), 'bury', session.id, session.peer);
    this.queues.bury(job, 'reserved', BURY_CAUSE_CODE.bury);
    this.journalOf(job).update(job);
    this.gates.serveOpened();
    return ok(job);
  }

  /** Takes job `id` back from `session`, which holds it, for a release or bury; or says why not. */
  private takeBack(session: Session, id: number): Job | 'NOT_FOUND' | 'INTERNAL_ERROR' {
    const job = this.reservedBy(session, id);
    if (job === undefined) return 'NOT_FOUND';
    if (!this.journalOf(job).canUpdate(1)) return 'INTERNAL_ERROR';
    this.removeReserved(session, job);
    this.schedule(session);
    return job;
  }

  /**
   * Makes a job reserved by `session` run out `holdMs` from now (Infinity: never), whatever its
   * TTR: a Gearman worker's CAN_DO_TIMEOUT for the job's function.
   */
  hold(session: Session, id: number, holdMs: number): Result<Job> {
    const job = this.reservedBy(session, id);
    if (job === undefined) return fail('NOT_FOUND');
    setJobDeadlineAt(job, this.clock.now() + holdMs);
    session.reservedByDeadline.update(job.heapIndex);
    this.schedule(session);
    return ok(job);
  }

  /** True when `session` holds job `id`. */
  holds(session: Session, id: number): boolean {
    return this.reservedBy(session, id) !== undefined;
  }

  /** Restarts the TTR of a job reserved by `session`. */
  touch(session: Session, id: number): Result<Job> {
    const job = this.reservedBy(session, id);
    if (job === undefined) return fail('NOT_FOUND');
    setJobDeadlineAt(job, this.clock.now() + (session.holdMs < 0 ? jobTtrMs(job) : session.holdMs));
    session.reservedByDeadline.update(job.heapIndex);
    this.schedule(session);
    return ok(job);
  }

  peekReady(tube: Tube): Job | undefined {
    return tube.ready.peek();
  }

  peekDelayed(tube: Tube): Job | undefined {
    return tube.delayed.peek();
  }

  peekBuried(tube: Tube): Job | undefined {
    return tube.firstBuried();
  }

  /** What a kick on `tube` acts on: buried jobs if it has any, else delayed ones. */
  kickKind(tube: Tube): KickKind {
    return tube.buried.size > 0 ? 'buried' : 'delayed';
  }

  /**
   * Kicks up to `max` jobs of `kind` from `tube` to ready and returns how many moved (edits.ts).
   * Front doors call it in bounded slices so a huge kick never stalls other clients.
   */
  kickSome(tube: Tube, kind: KickKind, max: number, actor: HistoryActor | null = null): number {
    return this.editor.kickSome(tube, kind, max, actor);
  }

  /** kick in one call: for callers with a small bound. */
  kick(tube: Tube, bound: number): number {
    return this.kickSome(tube, this.kickKind(tube), bound);
  }

  kickJob(id: number, actor: HistoryActor | null = null): Result<Job> {
    return this.editor.kickJob(id, actor);
  }

  // ---- news of a job (Gearman's WORK_* packets) ---------------------------------------------

  /** Adds `watcher` to those told of job `id`'s updates until it is deleted; false when there is no such job. */
  attachWatcher(id: number, watcher: JobWatcher): boolean {
    if (this.jobs.get(id) === undefined) return false;
    this.watchers.attach(id, watcher);
    return true;
  }

  /** Stops telling `watcher` about job `id`; returns how many watchers remain. */
  detachWatcher(id: number, watcher: JobWatcher): number {
    return this.watchers.detach(id, watcher);
  }

  /** How many watchers job `id` has. */
  watcherCount(id: number): number {
    return this.watchers.count(id);
  }

  /** Passes `update` to every watcher of job `id`, in attach order; returns how many got it. */
  report(id: number, update: JobUpdate): number {
    return this.watchers.report(id, update);
  }

  // ---- edits (the dashboard) -----------------------------------------------------------------

  /**
   * Changes a job no worker holds, in place (edits.ts): body, priority, TTR, delay, tube. Fails
   * with NOT_FOUND, JOB_RESERVED, JOB_TOO_BIG or OUT_OF_MEMORY and changes nothing then.
   */
  editJob(id: number, edit: JobEdit, actor: HistoryActor | null = null): Result<Job> {
    return this.editor.edit(id, edit, actor);
  }

  /**
   * Deletes up to `max` jobs of `tube` in `state`, each exactly as `delete` would (journaled,
   * counted in the tube's cmd-delete). Front doors call it in slices. Returns how many went;
   * fewer than asked when the state ran out or the journal could not record more.
   */
  clearSome(tube: Tube, state: KickKind | 'ready', max: number, actor: HistoryActor | null = null): number {
    let n = 0;
    while (n < max) {
      const job = state === 'ready' ? tube.ready.peek() : state === 'delayed' ? tube.delayed.peek() : tube.firstBuried();
      if (job === undefined || !this.delete(null, job.id, actor).ok) break;
      n++;
    }
    return n;
  }

  // ---- recovery (recovery.ts) ---------------------------------------------------------------

  /** Recovery, before serving: a binlog's full record of a job, replacing an earlier version. */
  restoreJob(img: JobImage, file: number): void {
    this.recovery.job(img, file);
  }

  /** Recovery: a state record; one for an id with no full record is ignored. */
  restoreState(img: Omit<JobImage, 'tube' | 'ttrMs' | 'createdAt' | 'body'>): void {
    this.recovery.state(img);
  }

  /** Recovery: a delete record. */
  restoreDelete(id: number): void {
    this.recovery.delete(id);
  }

  /** Recovery done: every restored job goes to its queue; later ids are above `nextId`. Returns the number of jobs. */
  finishRestore(nextId: number): number {
    return this.recovery.finish(nextId);
  }

  // ---- time ----------------------------------------------------------------------------------

  /** The earliest time (epoch ms) at which `tick` has work, or undefined when nothing is timed. */
  nextDeadline(): number | undefined {
    let next = Number.POSITIVE_INFINITY;
    const delayed = this.queues.firstDelayed();
    if (delayed !== undefined) next = jobDeadlineAt(delayed);
    for (const opening of this.openings) {
      const at = opening.next();
      if (at !== undefined && at < next) next = at;
    }
    const session = this.sessionTicks.peek();
    if (session !== undefined && session.tickAt < next) next = session.tickAt;
    return next === Number.POSITIVE_INFINITY ? undefined : next;
  }

  /**
   * Does what is due at `now`: delayed jobs become ready, pauses end, TTRs expire, blocked
   * reserves time out. Does at most `budget` units of work and returns true if more is due.
   */
  tick(now: number, budget = Number.POSITIVE_INFINITY): boolean {
    let work = 0;
    for (let job = this.queues.firstDelayed(); job !== undefined && jobDeadlineAt(job) <= now; job = this.queues.firstDelayed()) {
      if (work++ >= budget) return true;
      this.queues.detach(job);
      this.queues.enqueueReady(job, 'delayed');
    }
    // Tubes that open again: pauses that end, rates whose next token is due.
    for (const opening of this.openings) {
      const at = opening.next();
      if (at === undefined || at > now) continue;
      if (work >= budget) return true;
      work += opening.open(now, budget - work);
      const next = opening.next();
      if (next !== undefined && next <= now) return true;
    }
    for (let s = this.sessionTicks.peek(); s !== undefined && s.tickAt <= now; s = this.sessionTicks.peek()) {
      if (work++ >= budget) return true;
      this.sessionTimeout(s, now);
    }
    return false;
  }

  private sessionTimeout(session: Session, now: number): void {
    const soon = session.waiting && !session.wakeOnly && this.deadlineSoon(session, now);
    // protocol: a reserved job expires once its deadline has passed (deadline < now, strictly).
    for (let job = session.soonestReserved(); job !== undefined && jobDeadlineAt(job) < now; job = session.soonestReserved()) {
      this.stats.jobTimeouts++;
      countTimeout(job);
      // Best effort, as for a disconnect: on disk the job is already ready (or, for the
      // dead-letter rule, comes back ready after a crash here and is buried at its next strike).
      const recorded = this.journalOf(job).canUpdate(1);
      this.removeReserved(session, job);
      this.history.record(job.id, now, 'timeout', session.id, session.peer);
      if (this.failures.strike(job)) this.failures.deadLetter(job, now, 'timeout');
      else if (this.failures.failedTooOften(job, now, 'timeout')) continue;
      else this.backAfterTimeout(job, now);
      if (recorded) this.journalOf(job).update(job);
    }
    this.gates.serveOpened();
    if (soon && session.waiting) {
      this.waiting.stopWaiting(session);
      this.schedule(session);
      session.delegate.deadlineSoon();
    } else if (session.waiting && session.waitUntil >= 0 && now >= session.waitUntil) {
      this.waiting.stopWaiting(session);
      session.waitUntil = -1;
      this.schedule(session);
      session.delegate.timedOut();
    } else {
      this.schedule(session);
    }
  }

  // ---- internals -----------------------------------------------------------------------------

  /** A timed-out job goes back ready, or delayed by its tube's timeout backoff. */
  private backAfterTimeout(job: Job, now: number): void {
    const delayMs = job.tube.gate === null ? 0 : this.gates.timeoutDelayMs(job.tube, job);
    if (delayMs <= 0) return this.queues.enqueueReady(job, 'reserved');
    setJobDelayMs(job, delayMs);
    this.queues.enqueueDelayed(job, 'reserved', now + delayMs);
  }

  private deadlineSoon(session: Session, now: number): boolean {
    const job = session.soonestReserved();
    return job !== undefined && now >= jobDeadlineAt(job) - DEADLINE_SOON_MARGIN_MS;
  }

  /** protocol: the DEADLINE_SOON check looks for ready jobs in watched tubes, paused or not. */
  private anyWatchedReady(session: Session): boolean {
    return this.queues.bestReady(session, true) !== undefined;
  }

  private reservedBy(session: Session, id: number): Job | undefined {
    const job = this.jobs.get(id);
    return job !== undefined && jobState(job) === 'reserved' && this.hasReserved(session, job) ? job : undefined;
  }

  /**
   * Whether `session` has the reserved `job`. Read from the session's own heap, where a reserved
   * job's heapIndex points: no table lookup on the hot path.
   */
  private hasReserved(session: Session | null, job: Job): boolean {
    return session !== null && session.reservedByDeadline.at(job.heapIndex) === job;
  }

  /** Tests: what disagrees in the private indexes of ready tubes and wide waiters (empty when consistent). */
  waitingIndexProblems(): string[] {
    const problems: string[] = [];
    const withReady = this.tubes().filter((t) => t.ready.size > 0);
    if (withReady.length !== this.queues.readyTubes.size || withReady.some((t) => !this.queues.readyTubes.has(t))) {
      problems.push(`readyTubes has ${this.queues.readyTubes.size} tubes, ${withReady.length} have ready jobs`);
    }
    problems.push(...this.waiting.problems(this.sessions, this.tubes()));
    return problems;
  }

  /** For invariant checks: whether the heap of delaying tubes holds exactly the tubes with delayed jobs, and the soonest first. */
  delayIndexProblems(): string[] {
    return this.queues.delayIndexProblems(this.tubes());
  }

  /** Recomputes when the engine must next look at `session` (beanstalkd's connsched). */
  private schedule(session: Session): void {
    let at = Number.POSITIVE_INFINITY;
    const soonest = session.soonestReserved();
    // Waiting: wake at the DEADLINE_SOON margin. Otherwise: at the first instant the job has expired.
    if (soonest !== undefined) at = jobDeadlineAt(soonest) + (session.waiting && !session.wakeOnly ? -DEADLINE_SOON_MARGIN_MS : 1);
    if (session.waiting && session.waitUntil >= 0 && session.waitUntil < at) at = session.waitUntil;
    if (at === Number.POSITIVE_INFINITY || session.closed) {
      session.tickAt = 0;
      if (session.tickIndex >= 0) this.sessionTicks.removeAt(session.tickIndex);
      return;
    }
    session.tickAt = at;
    if (session.tickIndex < 0) this.sessionTicks.push(session);
    else this.sessionTicks.update(session.tickIndex);
  }

  private reserveFor(session: Session, job: Job, now: number, from: JobState): void {
    this.keepTimesSmall(now);
    job.tube.reserved++;
    this.stats.reserved++;
    job.reserves++;
    setJobDeadlineAt(job, now + (session.holdMs < 0 ? jobTtrMs(job) : session.holdMs));
    setJobState(job, 'reserved');
    session.reservedJobs.push(job);
    session.reservedByDeadline.push(job);
    session.waitUntil = -1;
    this.history.record(job.id, now, 'reserve', session.id, session.peer);
    this.schedule(session);
    this.queues.changed(job, from);
    if (job.tube.gate !== null) this.gates.reserved(job.tube, now);
  }

  private removeReserved(session: Session, job: Job): void {
    session.reservedJobs.remove(job);
    session.reservedByDeadline.removeAt(job.heapIndex);
    job.tube.reserved--;
    this.stats.reserved--;
    if (job.tube.gate !== null) this.gates.unreserved(job.tube, this.clock.now());
  }

  /**
   * Moves the time base up to `now` once the clock has run SWITCH_AFTER_MS (3 days) past it, so
   * that new times keep fitting in a job's small fields to the millisecond (TimeBase). Creation
   * times stay with their era; the deadlines of delayed and reserved jobs are re-encoded, each
   * keeping its value, so no heap's order changes. That walk is a pause once in 3 days: about
   * 50 ns per delayed or reserved job (5 ms with 100,000 delayed jobs).
   */
  private keepTimesSmall(now: number): void {
    const base = this.timeBase;
    if (now - base.ms < SWITCH_AFTER_MS) return;
    const from = base.advance(now, this.jobs.nextId);
    this.queues.delayingTubes.forEach((tube) => tube.delayed.forEach((job) => rebaseDeadline(job, from)));
    for (const session of this.sessions) session.reservedByDeadline.forEach((job) => rebaseDeadline(job, from));
  }

  private dropJob(job: Job, from: JobState): void {
    this.jobs.remove(job);
    job.tube.cmdDelete++;
    job.tube.touchState(from);
    if (this.events.has('job:deleted')) this.events.emit('job:deleted', { job, from });
    if (this.watchers.any) this.watchers.end(job.id);
    this.tubeRegistry.removeIfUnused(job.tube);
  }

  /** The journal for `job`: none for a transient one. */
  private journalOf(job: Job): Journal {
    return jobFile(job) === TRANSIENT_FILE ? nullJournal : this.journal;
  }

}

export { Session, Tube };
export type { Job };
export type { SessionDelegate, JobUpdate, JobWatcher };
