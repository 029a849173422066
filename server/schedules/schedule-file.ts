import path from 'node:path';
import { z } from 'zod';
import { NUMBERED_ITEM, numberedFileFields, readJsonAs, writeJsonAtomically } from '../common/json-file.js';
import type { SchedulesState } from './memory-schedule-store.js';

/** DIR/schedules.json with -b. Version 1: change FILE_VERSION (and read the old one) when the shape changes. */
export const SCHEDULES_FILE = 'schedules.json';
const FILE_VERSION = 1;

const runKind = z.enum(['slot', 'catch-up', 'run-now']);
const fileSchema = z.object({
  ...numberedFileFields(FILE_VERSION),
  schedules: z.array(
    z.object({
      ...NUMBERED_ITEM,
      cron: z.string(),
      timeZone: z.string(),
      tube: z.string(),
      body: z.string(),
      encoding: z.enum(['utf8', 'base64']),
      priority: z.number(),
      delayMs: z.number(),
      ttrMs: z.number(),
      paused: z.boolean(),
      missed: z.enum(['skip', 'catch-up-once']),
      createdAt: z.number(),
      updatedAt: z.number(),
      checkedThrough: z.number(),
    }),
  ),
  runs: z.array(
    z.object({
      scheduleId: z.number().int(),
      slotAt: z.number(),
      kind: runKind,
      firedAt: z.number(),
      jobId: z.number().nullable(),
      error: z.string().nullable(),
      node: z.number(),
    }),
  ),
});

/** The saved schedules in `dir`, or null when none were saved. Throws when the file is damaged. */
export function loadSchedules(dir: string): SchedulesState | null {
  const data = readJsonAs(path.join(dir, SCHEDULES_FILE), fileSchema, 'a schedules file');
  if (data === null) return null;
  return {
    nextId: data.nextId,
    // Bodies are saved as base64 whatever their encoding: bytes survive exactly.
    schedules: data.schedules.map((s) => ({ ...s, body: Buffer.from(s.body, 'base64') })),
    runs: data.runs,
  };
}

/** Writes `state` to DIR/schedules.json (atomically). */
export function saveSchedules(dir: string, state: SchedulesState): void {
  writeJsonAtomically(path.join(dir, SCHEDULES_FILE), {
    version: FILE_VERSION,
    nextId: state.nextId,
    schedules: state.schedules.map((s) => ({ ...s, body: s.body.toString('base64') })),
    runs: state.runs,
  });
}
