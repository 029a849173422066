import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { z } from 'zod';

/**
 * A small JSON file in the binlog directory, replaced whole: written to FILE.tmp, fsynced, then
 * renamed over FILE, so a crash leaves the old file or the new one, never half of one. For
 * state that is small and changes rarely (schedules, alert rules), this is simpler than a record
 * type in the binlog, whose compaction would have to carry it along (see README "Schedules").
 */
export function writeJsonAtomically(file: string, value: unknown): void {
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify(value));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

/** The file's JSON, or null when there is no file. Throws on a file that is not JSON. */
export function readJson(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  return JSON.parse(text) as unknown;
}

/**
 * The file's JSON as `schema` reads it, or null when there is no file. Throws, naming the file,
 * on one this version cannot read (`what`: "an alerts file").
 */
export function readJsonAs<T>(file: string, schema: z.ZodType<T>, what: string): T | null {
  const raw = readJson(file);
  if (raw === null) return null;
  const r = schema.safeParse(raw);
  if (!r.success) throw new Error(`${file}: not ${what} this version reads: ${r.error.issues[0]?.message ?? ''}`);
  return r.data;
}

/**
 * What a file of numbered things (alert rules, schedules) starts with: its format `version` and
 * the next id to give. Each thing in it starts with NUMBERED_ITEM.
 */
export function numberedFileFields<V extends number>(version: V) {
  return { version: z.literal(version), nextId: z.number().int().min(1) };
}

/** The fields every thing in a numbered file starts with. */
export const NUMBERED_ITEM = { id: z.number().int(), name: z.string() };
