/**
 * Jobs in and out per second for each tube, from the counts the live updates bring (total jobs
 * put, deletes). The server pushes a tube only when it changes, so a tube with no update for a
 * while had no traffic: its rates fall to zero. Rates are over the last RATE_WINDOW_MS.
 */
import type { TubeDto } from '../../../shared/dto.js';

const RATE_WINDOW_MS = 10_000;
/** Samples kept per tube (updates come at most four times a second). */
const KEPT = 64;

interface Sample {
  at: number;
  put: number;
  deleted: number;
}

const samples = new Map<string, Sample[]>();

/** Notes a tube's counts as received at `at` (epoch ms). */
export function observeTube(tube: TubeDto, at: number): void {
  let list = samples.get(tube.name);
  if (list === undefined) samples.set(tube.name, (list = []));
  list.push({ at, put: tube.totalJobs, deleted: tube.cmdDelete });
  if (list.length > KEPT) list.splice(0, list.length - KEPT);
}

export function forgetTube(name: string): void {
  samples.delete(name);
}

/** Jobs per second put into (`in`) or deleted from (`out`) the tube over the last window, as of `now`. */
export function tubeRate(name: string, which: 'in' | 'out', now: number): number {
  const list = samples.get(name);
  if (list === undefined || list.length < 2) return 0;
  const from = now - RATE_WINDOW_MS;
  let base: Sample | undefined;
  for (const s of list) {
    if (s.at <= from) base = s;
    else break;
  }
  base ??= list[0]!;
  const last = list[list.length - 1]!;
  if (last.at <= base.at) return 0;
  const delta = which === 'in' ? last.put - base.put : last.deleted - base.deleted;
  // Over the whole window up to now: no update since the last one means no traffic since.
  return Math.max(0, delta) / (Math.max(now - base.at, 1000) / 1000);
}
