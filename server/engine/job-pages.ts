import type { JobPage } from '../common/job-page.js';
import type { Engine } from './engine.js';
import type { Job, JobState, Tube } from './records.js';
import { jobPriority, jobDeadlineAt, jobCounters } from './records.js';


/**
 * The jobs of `tube` in `state`, in the engine's order: ready by (priority, id), delayed by
 * (deadline, id), buried oldest first, reserved by id. `after` is an opaque cursor from an
 * earlier page; a cursor that does not parse starts from the beginning. Pages stay correct while
 * jobs come and go: a page starts after the last job the previous page showed, by order.
 */
export function listJobs(engine: Engine, tube: Tube, state: JobState, limit: number, after: string | null): JobPage<Job> {
  const key = parseCursor(after);
  let jobs: Job[];
  switch (state) {
    case 'ready':
      jobs = tube.ready.ordered(limit + 1, key === null ? undefined : (j) => beforeOrAt(jobPriority(j), j.id, key));
      break;
    case 'delayed':
      jobs = tube.delayed.ordered(limit + 1, key === null ? undefined : (j) => beforeOrAt(jobDeadlineAt(j), j.id, key));
      break;
    case 'buried':
      jobs = buriedAfter(tube, key?.[0] ?? 0, limit + 1);
      break;
    case 'reserved':
      jobs = reservedAfter(engine, tube, key?.[0] ?? 0, limit + 1);
      break;
  }
  const more = jobs.length > limit;
  if (more) jobs.pop();
  const last = jobs.at(-1);
  return { jobs, next: more && last !== undefined ? cursorOf(state, last) : null };
}

/** The cursor of a page that starts right after `job` in its `state` list. */
export function cursorOf(state: JobState, job: Job): string {
  switch (state) {
    case 'ready':
      return `${jobPriority(job)}_${job.id}`;
    case 'delayed':
      // Deadlines have fractions of a millisecond, hence a separator that is not a dot.
      return `${jobDeadlineAt(job)}_${job.id}`;
    case 'buried':
      return `${jobCounters(job).buriedSeq}`;
    case 'reserved':
      return `${job.id}`;
  }
}

function parseCursor(cursor: string | null): number[] | null {
  const m = cursor === null ? null : /^(\d+(?:\.\d+)?)(?:_(\d+))?$/.exec(cursor);
  if (m === null) return null;
  return m[2] === undefined ? [Number(m[1])] : [Number(m[1]), Number(m[2])];
}

function beforeOrAt(first: number, id: number, key: number[]): boolean {
  const [k0 = 0, k1 = 0] = key;
  return first < k0 || (first === k0 && id <= k1);
}

/** Buried jobs after sequence number `seq`, oldest first (the list is in sequence order). */
function buriedAfter(tube: Tube, seq: number, limit: number): Job[] {
  const out: Job[] = [];
  for (const job of tube.buried.values()) {
    if (jobCounters(job).buriedSeq <= seq) continue;
    out.push(job);
    if (out.length >= limit) break;
  }
  return out;
}

/** Reserved jobs of `tube` with ids above `id`; reservations live with the sessions holding them. */
function reservedAfter(engine: Engine, tube: Tube, id: number, limit: number): Job[] {
  const all: Job[] = [];
  for (const session of engine.allSessions()) {
    for (const job of session.reservedJobs.values()) if (job.tube === tube && job.id > id) all.push(job);
  }
  all.sort((a, b) => a.id - b.id);
  return all.slice(0, limit);
}
