import type { HistoryActor, JobHistoryDto } from '../../shared/history.js';
import type { TubePolicy, TubePolicyState } from '../../shared/policy.js';
import { bodyStamp, bodyOffsetOf, bodyLengthOf } from '../engine/body-store.js';
import type { Engine, Job, PutRequest, Session, Tube } from '../engine/engine.js';
import {
  BURY_CAUSES,
  TRANSIENT_FILE,
  fillJobBasics,
  isTransient,
  type SessionDelegate,
  jobState,
  jobCreatedAt,
  jobDeadlineAt,
  jobFile,
  jobCounters,
  jobBody,
} from '../engine/records.js';
import { cursorOf, listJobs } from '../engine/job-pages.js';
import { fail, ok } from '../common/result.js';
import {
  isPending,
  type ClientDelegate,
  type ClientOperations,
  type ConnectOptions,
  type CountedCommand,
  type Durability,
  type JobBytes,
  type MadeJob,
  type JobChange,
  type JobPage,
  type JobScan,
  type JobSnapshot,
  type JobState,
  type JobUpdate,
  type JobView,
  type JobWatcher,
  type NewJob,
  type Operations,
  type Pending,
  type QueuedState,
  type ReleaseOutcome,
  type ReserveOutcome,
  type Result,
  type ServerCounts,
  type SessionView,
  type TubeAges,
  type TubeCounts,
  type TubeName,
  type TubeSettings,
  type TubeSettingsView,
  type TubePolicyView,
} from './operations.js';
import { NO_COUNTS } from '../common/job-counts.js';
import { ttrWithFloor } from '../common/rules.js';
import { walkReadyAges } from './ready-ages.js';
import { tubeSettingsView } from './tube-settings-view.js';
import { SLICE, sliced } from './sliced.js';

export interface MemoryOperationsOptions {
  engine: Engine;
  durability: Durability;
  /** Called after work done on a later turn (a slice of a bulk action), so the scheduler re-arms. */
  onActivity: () => void;
}

const OK_VOID: Result<void> = ok(undefined);
const EMPTY_BODY = Buffer.alloc(0);

/**
 * The operations over the in-memory engine. Every answer is a value (never a promise) except
 * bulk work that needs more than one slice; snapshots are copied out of the engine's records.
 */
export class MemoryOperations implements Operations {
  readonly durability: Durability;
  private readonly engine: Engine;
  private readonly rearm: () => void;
  /** One view reused by `visitJobs`, so comparing many jobs allocates nothing. */
  private readonly scratch: JobView = emptyView();

  constructor(options: MemoryOperationsOptions) {
    this.engine = options.engine;
    this.durability = options.durability;
    this.rearm = options.onActivity;
  }

  onActivity(): void {
    this.rearm();
  }

  get maxJobSize(): number {
    return this.engine.maxJobSize;
  }

  isTooBig(bytes: number): boolean {
    return this.engine.isTooBig(bytes);
  }

  get draining(): boolean {
    return this.engine.draining;
  }

  onDraining(fn: () => void): () => void {
    return this.engine.events.on('server:draining', fn);
  }

  now(): number {
    return this.engine.now();
  }

  connect(delegate: ClientDelegate, peer: string, options: ConnectOptions = {}): ClientOperations {
    return new MemoryClient(this.engine, delegate, peer, options, this.rearm);
  }

  // ---- reads -----------------------------------------------------------------------------------

  peek(id: number): JobBytes | undefined {
    const job = this.engine.job(id);
    return job === undefined ? undefined : new DoorJob(job);
  }

  job(id: number): JobSnapshot | undefined {
    const job = this.engine.job(id);
    return job === undefined ? undefined : this.snapshot(job);
  }

  /** The id of the session holding `job` (0: not reserved). */
  private holderId(job: Job): number {
    return this.engine.holderOf(job)?.id ?? 0;
  }

  private snapshot(job: Job): JobSnapshot {
    return jobSnapshot(job, this.holderId(job));
  }

  visitJobs(ids: Iterable<number>, visit: (id: number, view: JobView | undefined) => void): void {
    for (const id of ids) {
      const job = this.engine.job(id);
      visit(id, job === undefined ? undefined : fillView(job, this.scratch, this.holderId(job)));
    }
  }

  jobHistory(id: number): JobHistoryDto {
    const history = this.engine.history;
    return { id, events: history.of(id), capacity: history.capacity, recorded: history.recorded };
  }

  readyAges(nearShare: number): Promise<Map<string, TubeAges>> {
    return walkReadyAges(this.scanJobs(), this.engine.now(), nearShare);
  }

  scanJobs(): JobScan {
    const jobs = this.engine.allJobs();
    const view = emptyView();
    const holders = this.engine.holders();
    return {
      next(max, visit) {
        for (let n = 0; n < max; n++) {
          const step = jobs.next();
          if (step.done === true) return true;
          const job = step.value;
          if (!visit(fillView(job, view, holders.get(job)?.id ?? 0), jobBody(job))) return false;
        }
        return false;
      },
    };
  }

  eachJob(visit: (job: JobSnapshot) => void): void {
    const holders = this.engine.holders();
    for (const job of this.engine.allJobs()) visit(jobSnapshot(job, holders.get(job)?.id ?? 0));
  }

  watcherCount(id: number): number {
    return this.engine.watcherCount(id);
  }

  tube(name: string): TubeCounts | undefined {
    const tube = this.engine.tube(name);
    return tube === undefined ? undefined : this.countsOf(tube);
  }

  tubes(): TubeCounts[] {
    return this.engine.tubes().map((t) => this.countsOf(t));
  }

  tubeNames(): string[] {
    return this.engine.tubes().map((t) => t.name);
  }

  serverCounts(): ServerCounts {
    const e = this.engine;
    const s = e.stats;
    return {
      urgent: s.urgent,
      ready: s.ready,
      reserved: s.reserved,
      delayed: e.delayedCount,
      buried: s.buried,
      jobTimeouts: s.jobTimeouts,
      totalJobs: s.totalJobs,
      tubes: e.tubes().length,
      currentConnections: s.currentConnections,
      totalConnections: s.totalConnections,
      producers: s.producers,
      workers: s.workers,
      waiting: s.waiting,
      draining: e.draining,
      startedAt: e.startedAt,
      maxJobSize: e.maxJobSize,
      operations: { ...s.commands },
    };
  }

  sessions(): SessionView[] {
    return [...this.engine.allSessions()].map(sessionView);
  }

  closeConnection(id: number): Result<void> {
    for (const session of this.engine.allSessions()) {
      if (session.id !== id || session.delegate.disconnect === undefined) continue;
      session.delegate.disconnect();
      return ok(undefined);
    }
    return fail('NOT_FOUND');
  }

  listJobs(tubeName: string, state: JobState, limit: number, cursor: string | null): JobPage<JobSnapshot> | undefined {
    const tube = this.engine.tube(tubeName);
    if (tube === undefined) return undefined;
    const page = listJobs(this.engine, tube, state, limit, cursor);
    return { jobs: page.jobs.map((job) => this.snapshot(job)), next: page.next };
  }

  nextInList(id: number): number | null {
    const job = this.engine.job(id);
    if (job === undefined) return null;
    return listJobs(this.engine, job.tube, jobState(job), 1, cursorOf(jobState(job), job)).jobs[0]?.id ?? null;
  }

  count(operation: CountedCommand): void {
    this.engine.count(operation);
  }

  // ---- changes (the dashboard's; the protocol's go through a client) ----------------------------

  put(tubeName: string, job: NewJob): Result<JobSnapshot> {
    const engine = this.engine;
    engine.count('put');
    if (engine.isTooBig(job.body.length)) return fail('JOB_TOO_BIG');
    const tube = engine.findOrCreateTube(tubeName);
    const result = engine.put({ ...job, tube, ttrMs: ttrWithFloor(job.ttrMs) });
    if (!result.ok) {
      engine.dropTubeIfUnused(tube);
      return fail(result.code);
    }
    return ok(this.snapshot(result.value));
  }

  delete(id: number, by: HistoryActor | null = null): Result<void> {
    const engine = this.engine;
    const held = engine.job(id);
    if (held !== undefined && jobState(held) === 'reserved') return fail('JOB_RESERVED');
    engine.count('delete');
    const result = engine.delete(null, id, by);
    return result.ok ? OK_VOID : fail(result.code);
  }

  kickJob(id: number, by: HistoryActor | null = null): Result<JobSnapshot> {
    this.engine.count('kick-job');
    const result = this.engine.kickJob(id, by);
    return result.ok ? ok(this.snapshot(result.value)) : fail(result.code);
  }

  kick(tubeName: string, bound: number, by: HistoryActor | null = null): Pending<Result<number>> {
    const tube = this.engine.tube(tubeName);
    if (tube === undefined) return fail('NOT_FOUND');
    this.engine.count('kick');
    return okCount(kickSliced(this.engine, tube, bound, this.rearm, by));
  }

  pauseTube(tubeName: string, delayMs: number): Result<TubeCounts> {
    this.engine.count('pause-tube');
    const result = this.engine.pauseTube(tubeName, delayMs);
    return result.ok ? ok(this.countsOf(result.value)) : fail(result.code);
  }

  tubeSettings(tube: string): TubeSettingsView {
    return tubeSettingsView(tube, this.engine.ownTubeSettings(tube), this.engine.defaultDeadLetterAfter);
  }

  setTubeSettings(tube: string, settings: TubeSettings | null): Result<TubeSettingsView> {
    const result = this.engine.setTubeSettings(tube, settings);
    return result.ok ? ok(this.tubeSettings(tube)) : fail(result.code);
  }

  tubePolicy(tube: string): TubePolicyView {
    return { tube, policy: this.engine.tubePolicy(tube), state: policyState(this.engine.tube(tube)) };
  }

  setTubePolicy(tube: string, policy: TubePolicy | null): Result<TubePolicyView> {
    const result = this.engine.setTubePolicy(tube, policy);
    return result.ok ? ok(this.tubePolicy(tube)) : fail(result.code);
  }

  private countsOf(tube: Tube): TubeCounts {
    return tubeCounts(tube, this.engine.ownTubeSettings(tube.name));
  }

  editJob(id: number, change: JobChange, by: HistoryActor | null = null): Result<JobSnapshot> {
    const engine = this.engine;
    const { kick, ...edit } = change;
    if (edit.ttrMs !== undefined) edit.ttrMs = ttrWithFloor(edit.ttrMs);
    const result = engine.editJob(id, edit, by);
    if (!result.ok) return fail(result.code);
    const job = result.value;
    if (kick === true && (jobState(job) === 'buried' || jobState(job) === 'delayed')) {
      engine.count('kick-job');
      const kicked = engine.kickJob(id, by);
      if (!kicked.ok) return fail(kicked.code);
    }
    return ok(this.snapshot(job));
  }

  clear(tubeName: string, state: QueuedState, by: HistoryActor | null = null): Pending<Result<number>> {
    const engine = this.engine;
    const tube = engine.tube(tubeName);
    if (tube === undefined) return fail('NOT_FOUND');
    const step = (max: number): number => {
      const n = engine.clearSome(tube, state, max, by);
      engine.count('delete', n);
      return n;
    };
    return okCount(sliced(Number.POSITIVE_INFINITY, step, this.rearm));
  }

  move(tubeName: string, state: QueuedState, to: string, limit: number, by: HistoryActor | null = null): Pending<Result<number>> {
    const engine = this.engine;
    const from = engine.tube(tubeName);
    if (from === undefined) return fail('NOT_FOUND');
    // Moving into the same tube would requeue the same jobs over and over: it moves nothing.
    if (to === tubeName) return ok(0);
    let firstFailure: Result<number> | null = null;
    let moved = 0;
    const step = (max: number): number => {
      let n = 0;
      while (n < max) {
        const job = state === 'ready' ? from.ready.peek() : state === 'delayed' ? from.delayed.peek() : from.firstBuried();
        if (job === undefined) break;
        const result = engine.editJob(job.id, { tube: to }, by);
        if (!result.ok) {
          if (moved + n === 0) firstFailure = fail(result.code);
          break;
        }
        n++;
      }
      moved += n;
      return n;
    };
    const total = sliced(limit, step, this.rearm);
    const answer = (count: number): Result<number> => firstFailure ?? ok(count);
    return isPending(total) ? total.then(answer) : answer(total);
  }

  // ---- news of a job ---------------------------------------------------------------------------

  attachWatcher(id: number, watcher: JobWatcher): boolean {
    return this.engine.attachWatcher(id, watcher);
  }

  detachWatcher(id: number, watcher: JobWatcher): number {
    return this.engine.detachWatcher(id, watcher);
  }

  report(id: number, update: JobUpdate): number {
    return this.engine.report(id, update);
  }
}

/**
 * An engine job record as the doors read it (JobBytes). The engine's records are plain objects
 * whose packed fields are read through functions (engine/records.ts), so the store answers with
 * this instead: one small object per answer, which a pipelining door may hold while it runs the
 * client's next commands. The body it points at is valid until the next operation, as with every
 * JobBytes this store hands out.
 */
class DoorJob implements JobBytes {
  readonly id: number;
  readonly tubeName: string;
  readonly bodyBuf: Buffer;
  readonly bodyOffset: number;
  readonly bodyLength: number;
  readonly transient: boolean;

  constructor(job: Job) {
    this.id = job.id;
    this.tubeName = job.tube.name;
    this.bodyBuf = job.slab.buf;
    this.bodyOffset = bodyOffsetOf(job);
    this.bodyLength = bodyLengthOf(job);
    this.transient = isTransient(job);
  }
}

/** One client of the in-memory store: a thin holder of its engine session. */
class MemoryClient implements ClientOperations {
  private readonly session: Session;
  /** The tube of this client's last submit. */
  private lastTube: Tube | null = null;

  constructor(
    private readonly engine: Engine,
    delegate: ClientDelegate,
    peer: string,
    options: ConnectOptions,
    private readonly onActivity: () => void,
  ) {
    const engineDelegate: SessionDelegate = {
      reserved: (job) => delegate.reserved(new DoorJob(job)),
      timedOut: () => delegate.timedOut(),
      deadlineSoon: () => delegate.deadlineSoon(),
      woken: () => delegate.woken(),
      disconnect: () => delegate.disconnect(),
    };
    this.session = engine.openSession(engineDelegate, options);
    this.session.peer = peer;
    this.session.identity = options.identity ?? null;
    const session = this.session;
    this.request = { tube: session.used, priority: 0, delayMs: 0, ttrMs: 0, body: EMPTY_BODY, bodyOwned: false, id: 0, transient: false, by: session };
  }

  get id(): number {
    return this.session.id;
  }

  noteCommand(name: string, at: number): void {
    const session = this.session;
    session.lastCommand = name;
    session.lastCommandAt = at;
  }

  usedTube(): string {
    return this.session.used.name;
  }

  watchedTubes(): string[] {
    return this.session.watched.values().map((t) => t.name);
  }

  watchedCount(): number {
    return this.session.watched.size;
  }

  use(tube: string): Result<TubeName> {
    // The engine's own result: its tube record is a TubeName, so no second object per use.
    return this.engine.use(this.session, tube);
  }

  watch(tube: string): Result<number> {
    return this.engine.watch(this.session, tube);
  }

  ignore(tube: string): Result<number> {
    return this.engine.ignore(this.session, tube);
  }

  admitPut(bytes: number): Result<number> {
    const engine = this.engine;
    engine.markProducer(this.session);
    // Beyond beanstalkd: the memory budget is checked before any of the body is buffered.
    if (!engine.hasRoomFor(bytes)) return fail('OUT_OF_MEMORY');
    return ok(engine.allocateJobId());
  }

  /** The request handed to the engine, reused: the engine copies what it keeps. */
  private readonly request: PutRequest;

  put(id: number, job: NewJob): Result<MadeJob> {
    const result = this.engine.put(this.requestFor(this.session.used, id, job));
    this.request.body = EMPTY_BODY; // do not pin the caller's buffer
    return result; // the engine's job record says the id: no object made per put
  }

  /** The engine's answer, its job record as the doors read it. */
  private answer(result: Result<Job>): Result<JobBytes> {
    return result.ok ? ok(new DoorJob(result.value)) : result;
  }

  /** The reused request, filled for `job` into `tube` (no object per put). */
  private requestFor(tube: Tube, id: number | undefined, job: NewJob): PutRequest {
    const request = this.request;
    request.tube = tube;
    request.id = id;
    request.priority = job.priority;
    request.delayMs = job.delayMs;
    request.ttrMs = ttrWithFloor(job.ttrMs);
    request.body = job.body;
    request.bodyOwned = job.bodyOwned === true;
    request.transient = job.transient === true;
    return request;
  }

  submit(tube: string, job: NewJob): Result<MadeJob> {
    const engine = this.engine;
    engine.markProducer(this.session);
    if (engine.isTooBig(job.body.length)) return fail('JOB_TOO_BIG');
    // A client submits to the same function again and again: its tube is kept, not looked up.
    const last = this.lastTube;
    const known = last !== null && last.name === tube && !last.removed ? last : engine.tube(tube);
    if (job.queueLimit !== undefined && queuedIn(known) >= job.queueLimit) return fail('QUEUE_FULL');
    if (known === undefined && !engine.hasRoomForTube(tube)) return fail('OUT_OF_MEMORY');
    const target = known ?? engine.findOrCreateTube(tube);
    this.lastTube = target;
    const result = engine.put(this.requestFor(target, undefined, job));
    this.request.body = EMPTY_BODY;
    this.request.tube = this.session.used;
    if (!result.ok) engine.dropTubeIfUnused(target);
    return result;
  }

  reserve(timeoutMs: number | null): ReserveOutcome<JobBytes> {
    const outcome = this.engine.reserve(this.session, timeoutMs);
    return outcome.kind === 'reserved' ? { kind: 'reserved', job: new DoorJob(outcome.job) } : outcome;
  }

  reserveJob(id: number): Result<JobBytes> {
    return this.answer(this.engine.reserveJob(this.session, id));
  }

  delete(id: number): Result<void> {
    return voidOf(this.engine.delete(this.session, id));
  }

  release(id: number, priority: number, delayMs: number): Result<ReleaseOutcome> {
    const result = this.engine.release(this.session, id, priority, delayMs);
    if (!result.ok) return fail(result.code);
    return ok(jobState(result.value) === 'buried' ? 'buried' : 'released');
  }

  bury(id: number, priority: number): Result<void> {
    return voidOf(this.engine.bury(this.session, id, priority));
  }

  touch(id: number): Result<void> {
    return voidOf(this.engine.touch(this.session, id));
  }

  peekReady(): JobBytes | undefined {
    return this.shown(this.engine.peekReady(this.session.used));
  }

  peekDelayed(): JobBytes | undefined {
    return this.shown(this.engine.peekDelayed(this.session.used));
  }

  peekBuried(): JobBytes | undefined {
    return this.shown(this.engine.peekBuried(this.session.used));
  }

  private shown(job: Job | undefined): JobBytes | undefined {
    return job === undefined ? undefined : new DoorJob(job);
  }

  kick(bound: number): Pending<number> {
    return kickSliced(this.engine, this.session.used, bound, this.onActivity);
  }

  sleep(): boolean {
    return this.engine.sleep(this.session);
  }

  setHold(holdMs: number): void {
    this.engine.setHold(this.session, holdMs);
  }

  hold(id: number, holdMs: number): Result<void> {
    return voidOf(this.engine.hold(this.session, id, holdMs));
  }

  holds(id: number): boolean {
    return this.engine.holds(this.session, id);
  }

  halfClose(): void {
    this.engine.halfClose(this.session);
  }

  close(): Pending<void> {
    if (this.engine.closeSession(this.session, SLICE)) return undefined;
    // A client that held many jobs lets them go a slice per turn.
    return (async () => {
      do {
        await new Promise((resolve) => setImmediate(resolve));
        this.onActivity();
      } while (!this.engine.closeSession(this.session, SLICE));
      this.onActivity();
    })();
  }
}

function voidOf(result: Result<unknown>): Result<void> {
  return result.ok ? OK_VOID : fail(result.code);
}

function okCount(count: Pending<number>): Pending<Result<number>> {
  return isPending(count) ? count.then((n) => ok(n)) : ok(count);
}

/** A kick of the tube's buried jobs, or of its delayed ones when none is buried. */
function kickSliced(engine: Engine, tube: Tube, bound: number, onActivity: () => void, by: HistoryActor | null = null): Pending<number> {
  const kind = engine.kickKind(tube);
  return sliced(bound, (max) => engine.kickSome(tube, kind, max, by), onActivity);
}

/** Jobs queued in `tube` (ready and delayed), for a submit's queue limit. */
function queuedIn(tube: Tube | undefined): number {
  return tube === undefined ? 0 : tube.ready.size + tube.delayed.size;
}

export function tubeCounts(tube: Tube, ownSettings: TubeSettings | null): TubeCounts {
  const nextReady = tube.ready.peek();
  return {
    name: tube.name,
    serial: tube.serial,
    urgent: tube.urgent,
    ready: tube.ready.size,
    reserved: tube.reserved,
    delayed: tube.delayed.size,
    buried: tube.buried.size,
    totalJobs: tube.totalJobs,
    using: tube.using,
    watching: tube.watching,
    waiting: tube.waitingSessions,
    deletes: tube.cmdDelete,
    pauses: tube.cmdPause,
    pauseMs: tube.pauseMs,
    unpauseAt: tube.unpauseAt,
    stateChanges: [...tube.stateChanges],
    nextReadyCreatedAt: nextReady === undefined ? 0 : jobCreatedAt(nextReady),
    deadLetterAfter: tube.deadLetterAfter,
    ownSettings,
    policy: policyState(tube),
  };
}

/** What a tube's policy is doing now (null: no such tube, or no policy). */
function policyState(tube: Tube | undefined): TubePolicyState | null {
  const gate = tube?.gate ?? null;
  if (gate === null) return null;
  const { policy, capHeld, rateHeld, capFullSince, refusedPuts, backoffs } = gate;
  return { policy, capHeld, rateHeld, capFullSince, refusedPuts, backoffs };
}

function emptyView(): JobView {
  return {
    id: 0,
    tube: '',
    state: 'ready',
    priority: 0,
    delayMs: 0,
    ttrMs: 0,
    createdAt: 0,
    deadlineAt: 0,
    file: 0,
    reservedBy: 0,
    holderNode: 0,
    ...NO_COUNTS,
    buryCause: 'none',
    bodyLength: 0,
    bodyStamp: 0,
    transient: false,
  };
}

/** `reservedBy`: the holding session's id (0: none). */
function fillView(job: Job, view: JobView, reservedBy: number): JobView {
  fillJobBasics(job, view);
  view.file = jobFile(job);
  view.reservedBy = reservedBy;
  view.buryCause = BURY_CAUSES[jobCounters(job).buryCause] ?? 'none';
  view.bodyLength = bodyLengthOf(job);
  view.bodyStamp = bodyStamp(job);
  view.transient = jobFile(job) === TRANSIENT_FILE;
  return view;
}

export function jobSnapshot(job: Job, reservedBy: number): JobSnapshot {
  return { ...fillView(job, emptyView(), reservedBy), body: jobBody(job) };
}

function sessionView(session: Session): SessionView {
  const held = [...session.reservedJobs.values()];
  return {
    id: session.id,
    peer: session.peer,
    identity: session.identity,
    openedAt: session.openedAt,
    lastCommandAt: session.lastCommandAt,
    lastCommand: session.lastCommand,
    holding: held.map((j) => ({ id: j.id, tube: j.tube.name, deadlineAt: jobDeadlineAt(j) })),
    producer: session.isProducer,
    worker: session.isWorker,
    waiting: session.waiting,
    using: session.used.name,
    watching: session.watched.values().map((t) => t.name),
    reserved: held.map((j) => j.id),
  };
}
