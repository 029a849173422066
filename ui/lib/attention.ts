/** Which tubes need an operator, worst first: what the overview's attention list shows. */

import type { TubeDto } from '../../shared/dto.js';

/** A ready job that has waited this long means workers are missing or too slow. */
export const STALE_READY_SECONDS = 60;

export interface Attention {
  tube: TubeDto;
  /** Higher is worse. */
  score: number;
  reasons: string[];
}

/**
 * Buried jobs first (each one is a failure nobody has looked at), then ready jobs nobody
 * watches, then a queue whose next job has waited long, then paused tubes that hold jobs.
 * `ageOf` gives a tube's next ready age as of now (the page counts it up between updates).
 */
export function needsAttention(tubes: Iterable<TubeDto>, ageOf: (tube: TubeDto) => number): Attention[] {
  const out: Attention[] = [];
  for (const tube of tubes) {
    const reasons: string[] = [];
    let score = 0;
    if (tube.buried > 0) {
      reasons.push(`${tube.buried} buried`);
      score += 1_000_000 + tube.buried;
    }
    if (tube.ready > 0 && tube.watching === 0) {
      reasons.push('ready jobs, no worker watching');
      score += 500_000 + tube.ready;
    }
    const age = tube.ready > 0 ? ageOf(tube) : 0;
    if (age >= STALE_READY_SECONDS) {
      reasons.push(`next job waiting ${Math.floor(age)} s`);
      score += 100_000 + age;
    }
    if (tube.pauseSeconds > 0 && tube.ready + tube.delayed > 0) {
      reasons.push('paused');
      score += 10_000;
    }
    if (reasons.length > 0) out.push({ tube, score, reasons });
  }
  return out.sort((a, b) => b.score - a.score || a.tube.name.localeCompare(b.tube.name));
}
