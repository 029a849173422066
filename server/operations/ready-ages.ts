import type { JobScan, JobView, TubeAges } from './operations.js';

/** Jobs looked at per turn of the event loop, so a million jobs never hold up the job ports. */
const SLICE = 2048;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * `readyAges` for a store without indexes for it (in memory): one walk over every job, a slice
 * per turn, tallying each tube's oldest ready job and its reservations with less than
 * `nearShare` of their TTR left as of `startedAt`.
 */
export async function walkReadyAges(scan: JobScan, startedAt: number, nearShare: number): Promise<Map<string, TubeAges>> {
  const tubes = new Map<string, TubeAges>();
  const visit = (job: JobView): boolean => {
    if (job.state !== 'ready' && job.state !== 'reserved') return true;
    let tally = tubes.get(job.tube);
    if (tally === undefined) {
      tally = { oldestReadyCreatedAt: Infinity, nearTtr: 0 };
      tubes.set(job.tube, tally);
    }
    if (job.state === 'ready') {
      if (job.createdAt < tally.oldestReadyCreatedAt) tally.oldestReadyCreatedAt = job.createdAt;
    } else if (Number.isFinite(job.deadlineAt) && job.deadlineAt - startedAt < job.ttrMs * nearShare) {
      tally.nearTtr++;
    }
    return true;
  };
  while (!(await scan.next(SLICE, visit))) await nextTurn();
  return tubes;
}
