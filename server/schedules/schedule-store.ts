import type { Pending } from '../operations/operations.js';
import type { RunKind, Schedule, ScheduleFields, ScheduleRun } from './schedule.js';

/**
 * Where schedules and their runs are kept: in memory (saved to a file with -b), or in
 * PostgreSQL in cluster mode, where `claim` is what makes a slot fire once across nodes.
 */
export interface ScheduleStore {
  list(): Pending<Schedule[]>;
  get(id: number): Pending<Schedule | undefined>;
  create(fields: ScheduleFields, now: number): Pending<Schedule>;
  /** Replaces the fields; `checkedThrough` moves to `now` when the schedule is resumed. */
  update(id: number, fields: ScheduleFields, now: number): Pending<Schedule | undefined>;
  remove(id: number): Pending<boolean>;
  /** Moves `checkedThrough` forward to `through` (never back). */
  advance(id: number, through: number): Pending<void>;
  /**
   * Claims a run: true for exactly one caller per (schedule, slot, run-now or not), across every
   * node sharing the store. The run is recorded, with no job yet.
   */
  claim(id: number, slotAt: number, kind: RunKind, firedAt: number, node: number): Pending<boolean>;
  /** Records the job a claimed run made, or why it made none. */
  finish(id: number, slotAt: number, kind: RunKind, jobId: number | null, error: string | null): Pending<void>;
  /** The latest runs of schedule `id`, newest first (at most RUNS_KEPT). */
  runs(id: number): Pending<ScheduleRun[]>;
}
