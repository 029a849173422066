/** A job's counters, as stats-job shows them; every store and the binlog keep the same six. */
export interface JobCounts {
  reserves: number;
  timeouts: number;
  releases: number;
  buries: number;
  kicks: number;
  /** Releases plus timeouts since the job was put or last kicked (what the dead-letter rule counts). */
  strikes: number;
}

/** A new job's counters. */
export const NO_COUNTS: Readonly<JobCounts> = { reserves: 0, timeouts: 0, releases: 0, buries: 0, kicks: 0, strikes: 0 };

/** The six counters' names. */
const COUNT_NAMES: readonly (keyof JobCounts)[] = ['reserves', 'timeouts', 'releases', 'buries', 'kicks', 'strikes'];

/** Copies `from`'s counters onto `to` (a view reused for many jobs). */
export function copyCounts(to: JobCounts, from: Readonly<JobCounts>): void {
  for (const name of COUNT_NAMES) to[name] = from[name];
}
