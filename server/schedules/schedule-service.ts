import type { NewJob, Pending, Result } from '../operations/operations.js';
import { parseCron, type CronSlots } from './cron.js';
import type { MissedSlotPolicy, RunKind, Schedule, ScheduleFields, ScheduleRun } from './schedule.js';
import type { ScheduleStore } from './schedule-store.js';

/** A slot first seen this late was missed (the server was down or stalled): the policy decides. */
export const DEFAULT_MISSED_AFTER_MS = 60_000;
/** On-time slots fired per schedule per tick at most (a 6-field "every second" on a slow tick). */
const MAX_ON_TIME_PER_TICK = 100;
/** Next runs shown per schedule. */
export const NEXT_RUNS_SHOWN = 5;

/** How a schedule's job is put: the admin API's put (the operations' `put`), once durable. */
export type PutJob = (tube: string, job: NewJob) => Promise<Result<{ id: number }>>;

export interface ScheduleServiceOptions {
  store: ScheduleStore;
  put: PutJob;
  /** This node's id in a cluster (0 on a single server), said in each run. */
  node: number;
  missedAfterMs?: number;
}

/** A run to make now. */
export interface DueRun {
  slotAt: number;
  kind: Exclude<RunKind, 'run-now'>;
}

/**
 * The runs a schedule owes at `now`, given that slots up to `checkedThrough` are dealt with:
 * every slot of the last `missedAfterMs` (on time), and for slots older than that (missed while
 * down) nothing with `skip`, or one run for the latest of them with `catch-up-once`.
 */
export function dueRuns(cron: CronSlots, checkedThrough: number, now: number, missed: MissedSlotPolicy, missedAfterMs: number): DueRun[] {
  const out: DueRun[] = [];
  const lateFrom = now - missedAfterMs;
  if (missed === 'catch-up-once') {
    const lastMissed = cron.latestAtOrBefore(lateFrom);
    if (lastMissed !== null && lastMissed > checkedThrough) out.push({ slotAt: lastMissed, kind: 'catch-up' });
  }
  for (const slotAt of cron.next(MAX_ON_TIME_PER_TICK, Math.max(checkedThrough, lateFrom))) {
    if (slotAt > now) break;
    out.push({ slotAt, kind: 'slot' });
  }
  return out;
}

/** What /metrics says of this node's schedule runs. */
export interface ScheduleFires {
  /** Runs this node made, by schedule name and kind, and how many of them failed to put a job. */
  fires: { id: number; schedule: string; kind: RunKind; count: number }[];
  failures: number;
}

/**
 * Schedules: kept in a store, evaluated by `tick(now)` (driven by server/automation's timer, or a
 * test's fake clock), each slot claimed in the store before its job is put, so one node of a
 * cluster fires it. Claim first, then put: a node that dies between the two loses that slot's
 * job rather than putting it twice (the run shows no job).
 */
export class ScheduleService {
  private readonly store: ScheduleStore;
  private readonly put: PutJob;
  private readonly node: number;
  private readonly missedAfterMs: number;
  private readonly parsed = new Map<string, CronSlots>();
  private readonly fireCounts = new Map<string, { id: number; schedule: string; kind: RunKind; count: number }>();
  private failures = 0;

  constructor(options: ScheduleServiceOptions) {
    this.store = options.store;
    this.put = options.put;
    this.node = options.node;
    this.missedAfterMs = options.missedAfterMs ?? DEFAULT_MISSED_AFTER_MS;
  }

  list(): Pending<Schedule[]> {
    return this.store.list();
  }

  get(id: number): Pending<Schedule | undefined> {
    return this.store.get(id);
  }

  runs(id: number): Pending<ScheduleRun[]> {
    return this.store.runs(id);
  }

  /** Fails with a message when the expression or the zone is not understood. */
  async create(fields: ScheduleFields, now: number): Promise<{ ok: true; value: Schedule } | { ok: false; message: string }> {
    const problem = this.problemWith(fields);
    if (problem !== null) return { ok: false, message: problem };
    return { ok: true, value: await this.store.create(fields, now) };
  }

  /** As create; undefined value when there is no such schedule. */
  async update(id: number, fields: ScheduleFields, now: number): Promise<{ ok: true; value: Schedule | undefined } | { ok: false; message: string }> {
    const problem = this.problemWith(fields);
    if (problem !== null) return { ok: false, message: problem };
    return { ok: true, value: await this.store.update(id, fields, now) };
  }

  remove(id: number): Pending<boolean> {
    return this.store.remove(id);
  }

  /** The next `n` slots after `now` (none while paused or when the expression has no more). */
  nextRuns(schedule: Schedule, now: number, n = NEXT_RUNS_SHOWN): number[] {
    if (schedule.paused) return [];
    return this.cronOf(schedule)?.next(n, now) ?? [];
  }

  /** Puts the schedule's job now, paused or not; undefined when there is no such schedule. */
  async runNow(id: number, now: number): Promise<ScheduleRun | undefined> {
    const schedule = await this.store.get(id);
    if (schedule === undefined) return undefined;
    // Two run-nows in the same millisecond are one claim: the second waits for the next one.
    let at = now;
    while (!(await this.store.claim(id, at, 'run-now', now, this.node))) {
      if ((await this.store.get(id)) === undefined) return undefined;
      at++;
    }
    return this.fire(schedule, at, 'run-now', now);
  }

  /** Fires what is due at `now` in every schedule that is not paused. */
  async tick(now: number): Promise<void> {
    for (const schedule of await this.store.list()) {
      if (schedule.paused) continue;
      const cron = this.cronOf(schedule);
      if (cron === undefined) continue;
      // Nothing passed since the last look: no write at all (the common case, every tick).
      const latest = cron.latestAtOrBefore(now);
      if (latest === null || latest <= schedule.checkedThrough) continue;
      const due = dueRuns(cron, schedule.checkedThrough, now, schedule.missed, this.missedAfterMs);
      await this.store.advance(schedule.id, now);
      for (const run of due) {
        if (await this.store.claim(schedule.id, run.slotAt, run.kind, now, this.node)) await this.fire(schedule, run.slotAt, run.kind, now);
      }
    }
  }

  fires(): ScheduleFires {
    return { fires: [...this.fireCounts.values()].map((f) => ({ ...f })), failures: this.failures };
  }

  private async fire(schedule: Schedule, slotAt: number, kind: RunKind, now: number): Promise<ScheduleRun> {
    let jobId: number | null = null;
    let error: string | null = null;
    try {
      const r = await this.put(schedule.tube, { priority: schedule.priority, delayMs: schedule.delayMs, ttrMs: schedule.ttrMs, body: schedule.body });
      if (r.ok) jobId = r.value.id;
      else error = r.code;
    } catch (err) {
      error = (err as Error).message;
    }
    if (error !== null) this.failures++;
    const key = `${schedule.id}\0${kind}`;
    const count = this.fireCounts.get(key) ?? { id: schedule.id, schedule: schedule.name, kind, count: 0 };
    count.schedule = schedule.name;
    count.count++;
    this.fireCounts.set(key, count);
    await this.store.finish(schedule.id, slotAt, kind, jobId, error);
    return { scheduleId: schedule.id, slotAt, kind, firedAt: now, jobId, error, node: this.node };
  }

  private problemWith(fields: ScheduleFields): string | null {
    const r = parseCron(fields.cron, fields.timeZone);
    return r.ok ? null : `cron: ${r.message}`;
  }

  private cronOf(schedule: Schedule): CronSlots | undefined {
    const key = `${schedule.timeZone}\0${schedule.cron}`;
    let cron = this.parsed.get(key);
    if (cron === undefined) {
      const r = parseCron(schedule.cron, schedule.timeZone);
      if (!r.ok) return undefined;
      cron = r.value;
      this.parsed.set(key, cron);
    }
    return cron;
  }
}
