/**
 * News about a job that a worker sends while it runs it (Gearman's WORK_DATA, WORK_STATUS,
 * WORK_COMPLETE ...): `kind` is the front door's word for it, `data` its bytes, passed on as is.
 */
export interface JobUpdate {
  readonly kind: string;
  readonly data: Buffer;
}

/** Whoever waits on a job (a Gearman client that submitted it or attached by unique id). */
export interface JobWatcher {
  update(jobId: number, update: JobUpdate): void;
  /** The job is gone (deleted by any door); no more updates will come. */
  ended(jobId: number): void;
}

/** Who waits for news of which job, by job id (each job's watchers in attach order). */
export class JobWatchers {
  private readonly byJob = new Map<number, Set<JobWatcher>>();

  /** True while anyone watches any job: a delete then looks for the job's watchers. */
  get any(): boolean {
    return this.byJob.size > 0;
  }

  attach(id: number, watcher: JobWatcher): void {
    let watching = this.byJob.get(id);
    if (watching === undefined) this.byJob.set(id, (watching = new Set()));
    watching.add(watcher);
  }

  /** Returns how many watchers remain. */
  detach(id: number, watcher: JobWatcher): number {
    const watching = this.byJob.get(id);
    if (watching === undefined) return 0;
    watching.delete(watcher);
    if (watching.size === 0) this.byJob.delete(id);
    return watching.size;
  }

  count(id: number): number {
    return this.byJob.get(id)?.size ?? 0;
  }

  /** Passes `update` to every watcher of job `id`, in attach order; returns how many got it. */
  report(id: number, update: JobUpdate): number {
    const watching = this.byJob.get(id);
    if (watching === undefined) return 0;
    for (const w of watching) w.update(id, update);
    return watching.size;
  }

  /** Job `id` is gone: its watchers are told, and forgotten. */
  end(id: number): void {
    const watching = this.byJob.get(id);
    if (watching === undefined) return;
    this.byJob.delete(id);
    for (const w of watching) w.ended(id);
  }
}
