/** Which tubes need an operator, worst first: what the overview's attention list shows. */

import type { TubeDto, TubeHealthDto } from '../../shared/dto.js';

/** A ready job that has waited this long means workers are missing or too slow. */
export const STALE_READY_SECONDS = 60;

export interface Attention {
  tube: TubeDto;
  /** Higher is worse. */
  score: number;
  reasons: string[];
}

/** What a tube's counts say plus what the server's walk over its jobs found (GET /api/tube-health). */
export interface TubeAges {
  /** The next ready job's age in seconds as of now (counted up between updates). */
  nextReady: number;
  /** The oldest ready job's age in seconds as of now; null before the first health answer. */
  oldestReady: number | null;
  health: TubeHealthDto | undefined;
}

/**
 * Buried jobs first (each one is a failure nobody has looked at), then ready jobs nobody
 * watches, then reservations about to time out (their workers are stuck or too slow), then a
 * ready job that has waited long, then a backlog that keeps growing, then paused tubes that hold
 * jobs.
 */
export function needsAttention(tubes: Iterable<TubeDto>, agesOf: (tube: TubeDto) => TubeAges): Attention[] {
  const out: Attention[] = [];
  for (const tube of tubes) {
    const reasons: string[] = [];
    let score = 0;
    const ages = agesOf(tube);
    if (tube.buried > 0) {
      reasons.push(`${tube.buried} buried`);
      score += 1_000_000 + tube.buried;
    }
    if (tube.ready > 0 && tube.watching === 0) {
      reasons.push('ready jobs, no worker watching');
      score += 500_000 + tube.ready;
    }
    const nearTtr = tube.reserved > 0 ? (ages.health?.reservedNearTtr ?? 0) : 0;
    if (nearTtr > 0) {
      reasons.push(`${nearTtr} reserved close to their TTR`);
      score += 200_000 + nearTtr;
    }
    const age = tube.ready > 0 ? Math.max(ages.nextReady, ages.oldestReady ?? 0) : 0;
    if (age >= STALE_READY_SECONDS) {
      reasons.push(`oldest ready job ${Math.floor(age)} s old`);
      score += 100_000 + age;
    }
    const rise = ages.health?.backlogRise ?? 0;
    if (rise > 0) {
      reasons.push(`backlog rising: +${rise} in 5 min`);
      score += 50_000 + rise;
    }
    if (tube.pauseSeconds > 0 && tube.ready + tube.delayed > 0) {
      reasons.push('paused');
      score += 10_000;
    }
    if (reasons.length > 0) out.push({ tube, score, reasons });
  }
  return out.sort((a, b) => b.score - a.score || a.tube.name.localeCompare(b.tube.name));
}
