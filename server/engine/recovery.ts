import {
  type Job,
  type JobImage,
  makeJob,
  setJobState,
  setJobPriority,
  setJobDelayMs,
  setJobDeadlineAt,
  setJobCounters,
  jobCounters,
  jobState,
  jobDeadlineAt,
  setJobFile,
} from './records.js';
import type { JobQueues } from './queues.js';
import type { JobTable } from './job-table.js';
import type { ServerStats } from './stats.js';
import type { TubeRegistry } from './tube-registry.js';

/**
 * Replaying a binlog, before the engine serves anyone: jobs come in as the records describe
 * them (full records, state changes, deletes, in any number of versions), sit only in the id
 * index, and go to their queues once every record is read.
 */
export class Recovery {
  constructor(
    private readonly jobs: JobTable,
    private readonly tubes: TubeRegistry,
    private readonly queues: JobQueues,
    private readonly stats: ServerStats,
  ) {}

  /** A full record: the job as it describes it, replacing an earlier version. */
  job(img: JobImage, file: number): void {
    this.delete(img.id);
    const job = makeJob(img.id, this.tubes.findOrCreate(img.tube), img.priority, img.delayMs, img.ttrMs, img.createdAt);
    this.jobs.bodies.place(job, img.body);
    this.state(img, job);
    setJobFile(job, file);
    this.jobs.add(job);
  }

  /** A state record; one for an id with no full record is ignored. */
  state(img: Omit<JobImage, 'tube' | 'ttrMs' | 'createdAt' | 'body'>, job = this.jobs.get(img.id)): void {
    if (job === undefined) return;
    setJobState(job, img.state);
    setJobPriority(job, img.priority);
    setJobDelayMs(job, img.delayMs);
    setJobDeadlineAt(job, img.deadlineAt);
    job.reserves = img.reserves;
    setJobCounters(job, img);
  }

  /** A delete record. */
  delete(id: number): void {
    const old = this.jobs.get(id);
    if (old !== undefined) this.jobs.remove(old);
  }

  /**
   * Every record read: each job goes to its queue (delayed jobs keep their absolute deadline;
   * buried jobs are ordered by when they were buried). Counts nothing in the cumulative stats.
   * Later puts get ids above `nextId` and above every restored id. Returns the number of jobs.
   */
  finish(nextId: number): number {
    const buried: Job[] = [];
    for (const job of this.jobs.values()) {
      this.jobs.raiseNextId(job.id + 1);
      this.queues.sawBuriedSeq(jobCounters(job).buriedSeq);
      if (jobState(job) === 'buried') buried.push(job);
      else if (jobState(job) === 'delayed') this.queues.enqueueDelayed(job, null, jobDeadlineAt(job));
      else this.queues.enqueueReady(job, null);
    }
    buried.sort((a, b) => jobCounters(a).buriedSeq - jobCounters(b).buriedSeq || a.id - b.id);
    for (const job of buried) {
      job.tube.buried.push(job);
      this.stats.buried++;
    }
    // Tubes created for jobs that are all gone again are dropped.
    for (const tube of [...this.tubes.list()]) this.tubes.removeIfUnused(tube);
    this.jobs.raiseNextId(nextId);
    return this.jobs.size;
  }
}
