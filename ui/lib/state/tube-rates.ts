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

/** How far back "lately" reaches for a tube's trend (buried and ready jobs gained). */
export const TREND_WINDOW_MS = 5 * 60_000;
/** Trend samples are taken at most this often, so TREND_WINDOW_MS needs few of them. */
const TREND_STEP_MS = 5_000;

interface TrendSample {
  at: number;
  buried: number;
  ready: number;
}

const trends = new Map<string, TrendSample[]>();

function observeTrend(tube: TubeDto, at: number): void {
  let list = trends.get(tube.name);
  if (list === undefined) trends.set(tube.name, (list = []));
  const last = list[list.length - 1];
  const sample = { at, buried: tube.buried, ready: tube.ready };
  // Within a step the newest counts replace the last sample's, so the trend ends at the latest update.
  if (last !== undefined && at - last.at < TREND_STEP_MS && list.length > 1) list[list.length - 1] = sample;
  else list.push(sample);
  while (list.length > 2 && list[1]!.at <= at - TREND_WINDOW_MS) list.shift();
}

/**
 * Buried or ready jobs the tube gained over the last TREND_WINDOW_MS as of `now`, from the live
 * updates seen since the page opened (0 when it did not grow, or nothing was seen).
 */
export function tubeGained(name: string, which: 'buried' | 'ready', now: number): number {
  const list = trends.get(name);
  if (list === undefined || list.length < 2) return 0;
  let base = list[0]!;
  for (const s of list) {
    if (s.at <= now - TREND_WINDOW_MS) base = s;
    else break;
  }
  return Math.max(0, list[list.length - 1]![which] - base[which]);
}

/** Notes a tube's counts as received at `at` (epoch ms). */
export function observeTube(tube: TubeDto, at: number): void {
  let list = samples.get(tube.name);
  if (list === undefined) samples.set(tube.name, (list = []));
  list.push({ at, put: tube.totalJobs, deleted: tube.cmdDelete });
  if (list.length > KEPT) list.splice(0, list.length - KEPT);
  observeTrend(tube, at);
}

export function forgetTube(name: string): void {
  samples.delete(name);
  trends.delete(name);
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
