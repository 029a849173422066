/** A schedule as the schedules' store and service keep it: durations in ms, times epoch ms. */
import type { MissedSlotPolicy } from '../../shared/dto.js';

export type { MissedSlotPolicy };

/** What an operator sets. */
export interface ScheduleFields {
  name: string;
  cron: string;
  timeZone: string;
  tube: string;
  body: Buffer;
  /** How the body was given, so the dashboard shows it back the same way. */
  encoding: 'utf8' | 'base64';
  priority: number;
  delayMs: number;
  ttrMs: number;
  paused: boolean;
  missed: MissedSlotPolicy;
}

export interface Schedule extends ScheduleFields {
  id: number;
  createdAt: number;
  updatedAt: number;
  /**
   * Slots at or before this time have been dealt with (fired, claimed elsewhere, or skipped as
   * missed). Set to now when the schedule is made or resumed: slots while paused are not missed.
   */
  checkedThrough: number;
}

export type RunKind = 'slot' | 'catch-up' | 'run-now';

/** One run: its claim, then the job it made (or why none). */
export interface ScheduleRun {
  scheduleId: number;
  slotAt: number;
  kind: RunKind;
  firedAt: number;
  jobId: number | null;
  error: string | null;
  node: number;
}

/** Runs kept per schedule (older ones are forgotten; their slots are long past checkedThrough). */
export const RUNS_KEPT = 20;
