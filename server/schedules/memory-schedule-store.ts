import { RUNS_KEPT, type RunKind, type Schedule, type ScheduleFields, type ScheduleRun } from './schedule.js';
import type { ScheduleStore } from './schedule-store.js';

/** Everything a single server keeps of its schedules, as saved (schedule-file.ts). */
export interface SchedulesState {
  nextId: number;
  schedules: Schedule[];
  runs: ScheduleRun[];
}

/**
 * A single server's schedules, in memory; `save` is called after every change with the whole
 * state (with -b it writes DIR/schedules.json, schedule-file.ts). A few schedules of a few
 * hundred bytes each: a whole-state save per change is simpler than a log and costs nothing.
 */
export class MemoryScheduleStore implements ScheduleStore {
  private nextId: number;
  private readonly schedules = new Map<number, Schedule>();
  private readonly runsOf = new Map<number, ScheduleRun[]>();

  constructor(
    initial: SchedulesState | null = null,
    private readonly save: (state: SchedulesState) => void = () => undefined,
  ) {
    this.nextId = initial?.nextId ?? 1;
    for (const s of initial?.schedules ?? []) this.schedules.set(s.id, s);
    for (const r of initial?.runs ?? []) this.runsFor(r.scheduleId).push(r);
  }

  list(): Schedule[] {
    return [...this.schedules.values()].map(copy);
  }

  get(id: number): Schedule | undefined {
    const s = this.schedules.get(id);
    return s === undefined ? undefined : copy(s);
  }

  create(fields: ScheduleFields, now: number): Schedule {
    const schedule: Schedule = { ...fields, id: this.nextId++, createdAt: now, updatedAt: now, checkedThrough: now };
    this.schedules.set(schedule.id, schedule);
    this.persist();
    return copy(schedule);
  }

  update(id: number, fields: ScheduleFields, now: number): Schedule | undefined {
    const old = this.schedules.get(id);
    if (old === undefined) return undefined;
    const resumed = old.paused && !fields.paused;
    const schedule: Schedule = { ...old, ...fields, updatedAt: now, checkedThrough: resumed ? Math.max(old.checkedThrough, now) : old.checkedThrough };
    this.schedules.set(id, schedule);
    this.persist();
    return copy(schedule);
  }

  remove(id: number): boolean {
    const had = this.schedules.delete(id);
    this.runsOf.delete(id);
    if (had) this.persist();
    return had;
  }

  advance(id: number, through: number): void {
    const s = this.schedules.get(id);
    if (s === undefined || through <= s.checkedThrough) return;
    s.checkedThrough = through;
    this.persist();
  }

  claim(id: number, slotAt: number, kind: RunKind, firedAt: number, node: number): boolean {
    if (!this.schedules.has(id)) return false;
    const runs = this.runsFor(id);
    const manual = kind === 'run-now';
    if (runs.some((r) => r.slotAt === slotAt && (r.kind === 'run-now') === manual)) return false;
    runs.unshift({ scheduleId: id, slotAt, kind, firedAt, jobId: null, error: null, node });
    if (runs.length > RUNS_KEPT) runs.length = RUNS_KEPT;
    this.persist();
    return true;
  }

  finish(id: number, slotAt: number, kind: RunKind, jobId: number | null, error: string | null): void {
    const manual = kind === 'run-now';
    const run = this.runsOf.get(id)?.find((r) => r.slotAt === slotAt && (r.kind === 'run-now') === manual);
    if (run === undefined) return;
    run.jobId = jobId;
    run.error = error;
    this.persist();
  }

  runs(id: number): ScheduleRun[] {
    return (this.runsOf.get(id) ?? []).map((r) => ({ ...r }));
  }

  private runsFor(id: number): ScheduleRun[] {
    let runs = this.runsOf.get(id);
    if (runs === undefined) {
      runs = [];
      this.runsOf.set(id, runs);
    }
    return runs;
  }

  private persist(): void {
    this.save({ nextId: this.nextId, schedules: [...this.schedules.values()], runs: [...this.runsOf.values()].flat() });
  }
}

function copy(s: Schedule): Schedule {
  return { ...s };
}
