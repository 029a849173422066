/**
 * The protocol's admission rules that every store applies (the engine in memory, the cluster's
 * clients): written once, here, where the engine and the stores can both reach them.
 */
import { MIN_TTR_MS } from '../../shared/limits.js';

/** protocol: a TTR below one second is raised to one second (for every door and store). */
export function ttrWithFloor(ttrMs: number): number {
  return ttrMs < MIN_TTR_MS ? MIN_TTR_MS : ttrMs;
}

/**
 * protocol: a client may not ignore the last tube it watches (NOT_IGNORED), unless it was made
 * to watch nothing (Gearman's workers, which ask for functions one by one).
 */
export function mayIgnore(watchedCount: number, mayWatchNothing: boolean): boolean {
  return watchedCount > 1 || mayWatchNothing;
}
