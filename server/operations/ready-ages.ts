import type { JobView, Operations, TubeAges } from './operations.js';

/** Jobs visited per turn of the event loop: a million jobs never hold up the job ports. */
const SLICE = 2048;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Per tube: when its oldest ready job was put (the queue head is the most urgent, not the
 * oldest), and how many reservations have less than `nearShare` of their TTR left. From the
 * store's indexes when it has them (a database), else by a walk over every job in slices. Used
 * by the overview's attention list and by the alert rules, so both read the same ages.
 */
export async function readyAges(ops: Operations, nearShare: number): Promise<Map<string, TubeAges>> {
  if (ops.readyAges !== undefined) return ops.readyAges(nearShare);
  const tubes = new Map<string, TubeAges>();
  const scan = ops.scanJobs();
  const startedAt = ops.now();
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
