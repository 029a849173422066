/**
 * Test support for the engine's unit tests (imported only by `*.test.ts`): a fake-clock harness,
 * a delegate that records what blocked sessions are told, and an invariant checker. It imports
 * no test framework, so it type-checks and builds like the rest of the engine.
 */
import type { TubePolicy } from '../../shared/policy.js';
import { URGENT_BELOW } from '../../shared/limits.js';
import { FakeClock } from './clock.js';
import { Engine, type EngineOptions } from './engine.js';
import type { EngineEventMap } from './events.js';
import type { Job, Session, SessionDelegate, Tube } from './records.js';
import type { Journal, TubeSettings } from './journal.js';
import type { ReserveOutcome, Result } from '../common/result.js';
import {
  jobState,
  jobPriority,
  jobBody,
  jobDeadlineAt,
  jobDelayMs,
  jobTtrMs,
  jobCreatedAt,
  jobFile,
  isTransient,
  jobCounters,
} from './records.js';
import { bodyLengthOf, bodyOffsetOf } from './body-store.js';

/** The fake clock's starting time (epoch ms), a round number so deadlines read easily. */
export const T0 = 1_700_000_000_000;

/** The value of a result that must have succeeded. */
export function unwrap<T>(result: Result<T>): T {
  if (!result.ok) throw new Error(`expected success, got ${result.code}`);
  return result.value;
}

/** What a blocked session was told, in order. */
export type DelegateCall = { kind: 'reserved'; jobId: number } | { kind: 'timed-out' } | { kind: 'deadline-soon' } | { kind: 'woken' };

export class RecordingDelegate implements SessionDelegate {
  readonly calls: DelegateCall[] = [];

  reserved(job: Job): void {
    this.calls.push({ kind: 'reserved', jobId: job.id });
  }

  timedOut(): void {
    this.calls.push({ kind: 'timed-out' });
  }

  deadlineSoon(): void {
    this.calls.push({ kind: 'deadline-soon' });
  }

  woken(): void {
    this.calls.push({ kind: 'woken' });
  }

  /** Returns the calls so far and forgets them. */
  drain(): DelegateCall[] {
    return this.calls.splice(0);
  }
}

export interface PutOptions {
  priority?: number;
  delayMs?: number;
  ttrMs?: number;
  body?: string | Buffer;
}

/** A session plus the recording delegate it reports to, with protocol-like helpers. */
export class Client {
  constructor(
    readonly engine: Engine,
    readonly session: Session,
    readonly delegate: RecordingDelegate,
  ) {}

  get id(): number {
    return this.session.id;
  }

  /** Puts into the used tube; throws when the engine refuses. */
  put(options: PutOptions = {}): Job {
    const result = this.tryPut(options);
    if (!result.ok) throw new Error(`put failed: ${result.code}`);
    return result.value;
  }

  tryPut(options: PutOptions = {}): Result<Job> {
    this.engine.markProducer(this.session);
    const body = options.body ?? 'x';
    return this.engine.put({
      tube: this.session.used,
      priority: options.priority ?? 0,
      delayMs: options.delayMs ?? 0,
      ttrMs: options.ttrMs ?? 60_000,
      body: typeof body === 'string' ? Buffer.from(body) : body,
      by: this.session,
    });
  }

  /** reserve (null: wait forever) or reserve-with-timeout (ms). */
  reserve(timeoutMs: number | null = null): ReserveOutcome<Job> {
    return this.engine.reserve(this.session, timeoutMs);
  }

  /** A reserve that must hand out a job at once; returns its id. */
  reserveNow(): number {
    const outcome = this.engine.reserve(this.session, 0);
    if (outcome.kind !== 'reserved') throw new Error(`expected a job, got ${outcome.kind}`);
    return outcome.job.id;
  }

  use(name: string): Tube {
    return unwrap(this.engine.use(this.session, name));
  }

  watch(name: string): number {
    return unwrap(this.engine.watch(this.session, name));
  }

  ignore(name: string): Result<number> {
    return this.engine.ignore(this.session, name);
  }

  watched(): string[] {
    return this.session.watched.values().map((t) => t.name);
  }

  /** Ids of the jobs this session holds, in reservation order. */
  reservedIds(): number[] {
    return [...this.session.reservedJobs.values()].map((j) => j.id);
  }

  close(): void {
    this.engine.closeSession(this.session);
  }
}

/** A journal whose writes can be made to fail, recording what it was asked to write. */
export class RecordingJournal implements Journal {
  failPut = false;
  failUpdate = false;
  failDelete = false;
  readonly writes: string[] = [];

  put(job: Job): boolean {
    if (this.failPut) return false;
    this.writes.push(`put ${job.id} ${jobState(job)}`);
    return true;
  }

  canUpdate(): boolean {
    return !this.failUpdate;
  }

  update(job: Job): void {
    if (this.failUpdate) throw new Error('update without room: canUpdate said no');
    this.writes.push(`update ${job.id} ${jobState(job)}`);
  }

  delete(job: Job): boolean {
    if (this.failDelete) return false;
    this.writes.push(`delete ${job.id}`);
    return true;
  }

  canRewrite(): boolean {
    return !this.failUpdate;
  }

  rewrite(job: Job): void {
    if (this.failUpdate) throw new Error('rewrite without room: canRewrite said no');
    this.writes.push(`rewrite ${job.id} ${jobState(job)} ${job.tube.name}`);
  }

  setTubeSettings(tube: string, settings: TubeSettings | null): boolean {
    if (this.failUpdate) return false;
    this.writes.push(`tube ${tube} ${settings === null ? 'cleared' : `dead-letter-after ${settings.deadLetterAfter}`}`);
    return true;
  }

  setTubePolicy(tube: string, policy: TubePolicy | null): boolean {
    if (this.failUpdate) return false;
    this.writes.push(`policy ${tube} ${JSON.stringify(policy)}`);
    return true;
  }
}

export type HarnessOptions = Omit<EngineOptions, 'clock'>;

/** An engine on a fake clock, the sessions opened through it, and a scheduler that never sleeps. */
export class Harness {
  readonly clock = new FakeClock(T0);
  readonly engine: Engine;
  readonly clients: Client[] = [];

  constructor(options: HarnessOptions = {}) {
    this.engine = new Engine({ clock: this.clock, ...options });
  }

  now(): number {
    return this.clock.now();
  }

  open(): Client {
    const delegate = new RecordingDelegate();
    const client = new Client(this.engine, this.engine.openSession(delegate), delegate);
    this.clients.push(client);
    return client;
  }

  /**
   * Moves the clock forward by `ms`, running `tick` at every deadline on the way, exactly as
   * the scheduler does (it sleeps until `nextDeadline()`, then ticks).
   */
  advance(ms: number): void {
    this.advanceTo(this.clock.now() + ms);
  }

  advanceTo(target: number): void {
    for (let guard = 0; ; guard++) {
      if (guard > 1_000_000) throw new Error('advanceTo: the engine never ran out of due work');
      const next = this.engine.nextDeadline();
      if (next === undefined || next > target) break;
      if (next > this.clock.now()) this.clock.set(next);
      this.tickNow();
    }
    this.clock.set(target);
  }

  /** One scheduler wake-up at the current time; checks that it leaves nothing due behind. */
  tickNow(): void {
    const now = this.clock.now();
    if (this.engine.tick(now)) throw new Error('tick with no budget reported more work');
    const next = this.engine.nextDeadline();
    if (next !== undefined && next <= now) throw new Error(`after tick(${now}) the next deadline is ${next}`);
  }

  /** Records every engine event as a short string, e.g. `changed 3 ready>reserved`. */
  recordEvents(): string[] {
    const log: string[] = [];
    const events = this.engine.events;
    events.on('job:changed', (e: EngineEventMap['job:changed']) => log.push(`changed ${e.job.id} ${e.from ?? 'new'}>${e.to}`));
    events.on('job:deleted', (e: EngineEventMap['job:deleted']) => log.push(`deleted ${e.job.id} ${e.from}`));
    events.on('tube:created', (e: EngineEventMap['tube:created']) => log.push(`created ${e.tube.name}`));
    events.on('tube:removed', (e: EngineEventMap['tube:removed']) => log.push(`removed ${e.tube.name}`));
    events.on('tube:paused', (e: EngineEventMap['tube:paused']) => log.push(`paused ${e.tube.name} ${e.tube.paused}`));
    events.on('server:draining', () => log.push('draining'));
    return log;
  }

  tubeNames(): string[] {
    return this.engine.tubes().map((t) => t.name);
  }

  /** Every job the engine holds (ids are dense from 1, so a scan up to the last id finds them). */
  jobs(maxId: number): Job[] {
    const jobs: Job[] = [];
    for (let id = 1; id <= maxId; id++) {
      const job = this.engine.job(id);
      if (job !== undefined) jobs.push(job);
    }
    return jobs;
  }

  /**
   * Cross-checks every counter and index against the jobs, tubes and sessions; returns the
   * problems found (empty when consistent). `maxId` bounds the job scan.
   */
  problems(maxId: number): string[] {
    const problems: string[] = [];
    const check = (cond: boolean, what: string): void => {
      if (!cond) problems.push(what);
    };
    const engine = this.engine;
    const stats = engine.stats;
    const now = this.clock.now();
    const tubes = engine.tubes();
    const listed = new Set(tubes);
    const open = this.clients.filter((c) => !c.session.closed).map((c) => c.session);

    let ready = 0;
    let urgent = 0;
    let reserved = 0;
    let delayed = 0;
    let buried = 0;
    let jobCount = 0;
    for (const tube of tubes) {
      const gate = tube.gate;
      const cap = gate?.policy.concurrency ?? null;
      if (gate !== null) check(gate.capHeld === (cap !== null && tube.reserved >= cap), `tube ${tube.name}'s cap mark is off`);
      check(tube.gated === (gate !== null && (gate.capHeld || gate.rateHeld)), `tube ${tube.name}'s gated mark is off`);
      check(engine.tube(tube.name) === tube, `tube ${tube.name} is listed but not found by name`);
      let tubeUrgent = 0;
      check(tube.ready.runIsSorted(), `tube ${tube.name}'s sorted run of ready jobs is out of order`);
      tube.ready.forEach((j) => {
        check(jobState(j) === 'ready' && j.tube === tube, `job ${j.id} in ${tube.name}'s ready heap is ${jobState(j)}`);
        if (jobPriority(j) < URGENT_BELOW) tubeUrgent++;
      });
      tube.delayed.forEach((j) => check(jobState(j) === 'delayed' && j.tube === tube, `job ${j.id} in delay heap is ${jobState(j)}`));
      for (const j of tube.buried.values()) check(jobState(j) === 'buried' && j.tube === tube, `job ${j.id} in buried list is ${jobState(j)}`);
      check(tube.urgent === tubeUrgent, `tube ${tube.name} urgent ${tube.urgent}, counted ${tubeUrgent}`);
      ready += tube.ready.size;
      urgent += tube.urgent;
      reserved += tube.reserved;
      delayed += tube.delayed.size;
      buried += tube.buried.size;
      jobCount += tube.jobCount;

      const using = open.filter((s) => s.used === tube).length;
      const watching = open.filter((s) => s.watched.has(tube)).length;
      const waiting = open.filter((s) => s.waiting && s.watched.has(tube)).length;
      const narrowWaiting = open.filter((s) => s.waiting && !s.wide && s.watched.has(tube)).length;
      const wideWatchers = open.filter((s) => s.wide && s.watched.has(tube));
      check(tube.using === using, `tube ${tube.name} using ${tube.using}, counted ${using}`);
      check(tube.watching === watching, `tube ${tube.name} watching ${tube.watching}, counted ${watching}`);
      check(tube.waiting.size === narrowWaiting, `tube ${tube.name} waiting ${tube.waiting.size}, counted ${narrowWaiting}`);
      check(
        tube.wideWatchers.size === wideWatchers.length && wideWatchers.every((s) => tube.wideWatchers.has(s)),
        `tube ${tube.name} lists ${tube.wideWatchers.size} wide watchers, counted ${wideWatchers.length}`,
      );
      check(tube.waitingSessions === waiting, `tube ${tube.name} current-waiting ${tube.waitingSessions}, counted ${waiting}`);
      const referenced = tube.using + tube.watching + tube.jobCount > 0 || tube === engine.defaultTube;
      check(referenced, `tube ${tube.name} is unreferenced but still listed`);
      const pausedNow = tube.paused && tube.unpauseAt > now;
      if (tube.gate?.rateHeld === true) check(tube.gate.reopenAt > now, `tube ${tube.name} is held by its rate past the next token`);
      check(
        !(waiting > 0 && tube.ready.size > 0 && !pausedNow && !tube.gated),
        `tube ${tube.name} has ${waiting} waiting sessions and ${tube.ready.size} ready jobs`,
      );
    }
    problems.push(...engine.waitingIndexProblems());
    problems.push(...engine.delayIndexProblems());
    check(stats.ready === ready, `stats.ready ${stats.ready}, counted ${ready}`);
    check(stats.urgent === urgent, `stats.urgent ${stats.urgent}, counted ${urgent}`);
    check(stats.reserved === reserved, `stats.reserved ${stats.reserved}, counted ${reserved}`);
    check(stats.delayed === delayed, `stats.delayed ${stats.delayed}, counted ${delayed}`);
    check(engine.delayedCount === delayed, `delayedCount ${engine.delayedCount}, counted ${delayed}`);
    check(stats.buried === buried, `stats.buried ${stats.buried}, counted ${buried}`);
    check(engine.jobTotal === jobCount, `jobTotal ${engine.jobTotal}, tubes hold ${jobCount}`);

    const jobs = this.jobs(maxId);
    check(jobs.length === engine.jobTotal, `found ${jobs.length} jobs, jobTotal ${engine.jobTotal}`);
    let bytes = 0;
    for (const job of jobs) {
      bytes += jobBody(job).length;
      check(listed.has(job.tube), `job ${job.id}'s tube ${job.tube.name} is not listed`);
      if (jobState(job) === 'reserved') {
        const holder = engine.holderOf(job);
        check(holder !== null && !holder.closed && [...holder.reservedJobs.values()].includes(job), `job ${job.id} has no live holder`);
      } else {
        check(engine.holderOf(job) === null, `job ${job.id} is ${jobState(job)} but has a holder`);
      }
    }
    check(engine.bodyBytes === bytes, `bodyBytes ${engine.bodyBytes}, counted ${bytes}`);

    let heldBySessions = 0;
    for (const s of open) {
      heldBySessions += s.reservedJobs.size;
      check(s.reservedByDeadline.size === s.reservedJobs.size, `session ${s.id} heaps disagree`);
      for (const j of s.reservedJobs.values()) check(engine.holderOf(j) === s, `session ${s.id} holds job ${j.id} reserved by another`);
      for (const t of s.watched.values()) check(listed.has(t), `session ${s.id} watches unlisted tube ${t.name}`);
      check(listed.has(s.used), `session ${s.id} uses unlisted tube ${s.used.name}`);
    }
    check(heldBySessions === reserved, `sessions hold ${heldBySessions} jobs, tubes count ${reserved}`);
    check(stats.waiting === open.filter((s) => s.waiting).length, `stats.waiting ${stats.waiting}`);
    check(stats.currentConnections === open.length, `currentConnections ${stats.currentConnections}`);
    check(stats.producers === open.filter((s) => s.isProducer).length, `producers ${stats.producers}`);
    check(stats.workers === open.filter((s) => s.isWorker).length, `workers ${stats.workers}`);

    const next = engine.nextDeadline();
    let soonestDelayed = Infinity;
    for (const t of tubes) {
      const soonest = t.delayed.peek();
      if (soonest !== undefined) soonestDelayed = Math.min(soonestDelayed, jobDeadlineAt(soonest));
    }
    check(next === undefined ? soonestDelayed === Infinity : next <= soonestDelayed, `nextDeadline ${next} is after a delayed job's deadline`);
    return problems;
  }
}

/**
 * A job record with what the record functions read of it (state, priority, times, counters,
 * body), as named fields: for tests that match a job against the fields they expect.
 */
export function fieldsOf(job: Job): Record<string, unknown>;
export function fieldsOf(job: Job | undefined): Record<string, unknown> | undefined;
export function fieldsOf(job: Job | undefined): Record<string, unknown> | undefined {
  if (job === undefined) return undefined;
  const c = jobCounters(job);
  return {
    ...job,
    state: jobState(job),
    priority: jobPriority(job),
    delayMs: jobDelayMs(job),
    ttrMs: jobTtrMs(job),
    createdAt: jobCreatedAt(job),
    deadlineAt: jobDeadlineAt(job),
    file: jobFile(job),
    transient: isTransient(job),
    timeouts: c.timeouts,
    releases: c.releases,
    strikes: c.strikes,
    kicks: c.kicks,
    buries: c.buries,
    buryCause: c.buryCause,
    buriedSeq: c.buriedSeq,
    tubeName: job.tube.name,
    bodyOffset: bodyOffsetOf(job),
    bodyLength: bodyLengthOf(job),
    body: jobBody(job),
  };
}
