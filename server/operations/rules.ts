import { MIN_TTR_MS } from '../../shared/limits.js';

/** protocol: a TTR below one second is raised to one second (for every door and store). */
export function ttrWithFloor(ttrMs: number): number {
  return ttrMs < MIN_TTR_MS ? MIN_TTR_MS : ttrMs;
}
