/** Which tubes need an operator, worst first: what the overview's attention list shows. */

import type { TubeDto, TubeHealthDto } from '../../shared/dto.js';

/** Ready jobs gained lately before a backlog counts as rising (as server/admin/tube-health.ts). */
const RISE_MIN_JOBS = 100;

/** A ready job that has waited this long means workers are missing or too slow. */
export const STALE_READY_SECONDS = 60;

export interface Attention {
  tube: TubeDto;
  /** How fast it is getting worse right now (0: not lately); ranked first. */
  worsening: number;
  /** How bad it is, whatever the trend; ranks tubes that worsen alike. */
  size: number;
  reasons: string[];
}

/** Tubes with only weak signals, folded into one line under the list. */
export interface WeakSignals {
  /** Tubes holding ready jobs that no worker watches (often between deploys, or a tube only peeked at). */
  unwatched: number;
  /** Paused tubes that hold jobs. */
  paused: number;
}

/** What a tube's counts say plus what the server's walk over its jobs found (GET /api/tube-health). */
export interface TubeAges {
  /** The next ready job's age in seconds as of now (counted up between updates). */
  nextReady: number;
  /** The oldest ready job's age in seconds as of now; null before the first health answer. */
  oldestReady: number | null;
  health: TubeHealthDto | undefined;
  /** Buried and ready jobs gained over the last few minutes (lib/state/tube-rates.ts). */
  buriedGained: number;
  readyGained: number;
}

/**
 * Ranks tubes by what is getting worse now, then by size. Getting worse: jobs buried lately
 * (each a failure happening now; weighed most), reservations about to time out (workers stuck or
 * too slow) and a backlog that keeps growing. Size: buried jobs, then how long the oldest ready
 * job has waited. "Ready jobs, no worker watching" and "paused" alone are weak signals, common
 * on a healthy server: counted in `weak`, not listed.
 */
export function needsAttention(tubes: Iterable<TubeDto>, agesOf: (tube: TubeDto) => TubeAges): { items: Attention[]; weak: WeakSignals } {
  const items: Attention[] = [];
  const weak: WeakSignals = { unwatched: 0, paused: 0 };
  for (const tube of tubes) {
    const reasons: string[] = [];
    const ages = agesOf(tube);
    let worsening = 0;
    let size = 0;
    if (ages.buriedGained > 0) {
      reasons.push(`+${ages.buriedGained} buried lately`);
      worsening += ages.buriedGained * 100;
    }
    const nearTtr = tube.reserved > 0 ? (ages.health?.reservedNearTtr ?? 0) : 0;
    if (nearTtr > 0) {
      reasons.push(`${nearTtr} reserved close to their TTR`);
      worsening += nearTtr * 10;
    }
    // The server's minute samples say it once it has grown for minutes; the live updates sooner.
    const rise = Math.max(ages.health?.backlogRise ?? 0, ages.readyGained >= RISE_MIN_JOBS ? ages.readyGained : 0);
    if (rise > 0) {
      reasons.push(`backlog rising: +${rise}`);
      worsening += rise;
    }
    if (tube.buried > 0) {
      reasons.push(`${tube.buried} buried`);
      size += 1_000_000 + tube.buried;
    }
    const age = tube.ready > 0 ? Math.max(ages.nextReady, ages.oldestReady ?? 0) : 0;
    if (age >= STALE_READY_SECONDS) {
      reasons.push(`oldest ready job ${Math.floor(age)} s old`);
      size += age;
    }
    const unwatched = tube.ready > 0 && tube.watching === 0;
    const paused = tube.pauseSeconds > 0 && tube.ready + tube.delayed > 0;
    if (reasons.length === 0) {
      if (unwatched) weak.unwatched++;
      if (paused) weak.paused++;
      continue;
    }
    // Said on a listed tube, as context for what is wrong with it.
    if (unwatched) reasons.push('no worker watching');
    if (paused) reasons.push('paused');
    items.push({ tube, worsening, size, reasons });
  }
  items.sort((a, b) => b.worsening - a.worsening || b.size - a.size || a.tube.name.localeCompare(b.tube.name));
  return { items, weak };
}
