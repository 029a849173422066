/**
 * News about a job that a worker sends while it runs it (Gearman's WORK_DATA, WORK_STATUS,
 * WORK_COMPLETE ...): `kind` is the front door's word for it, `data[start, end)` its bytes,
 * passed on as is (a range, so that the packet it came in needs no view per job). Valid only
 * during the call: a watcher copies what it keeps.
 */
export interface JobUpdate {
  readonly kind: string;
  readonly data: Buffer;
  readonly start: number;
  readonly end: number;
}

/** Whoever waits on a job (a Gearman client that submitted it or attached by unique id). */
export interface JobWatcher {
  update(jobId: number, update: JobUpdate): void;
  /** The job is gone (deleted by any door); no more updates will come. */
  ended(jobId: number): void;
}

/**
 * A job's watchers: one alone (the common case, a client waiting on its own submit) or several
 * in attach order. An array is never changed once stored: a watcher that detaches while a report
 * is being passed round (a client that has its final answer) leaves the list being walked intact.
 */
type Watching = JobWatcher | readonly JobWatcher[];

/**
 * Who waits for news of which job, by job id. A lone watcher is stored as it is: no collection
 * per job on the path of every foreground Gearman job (attach, report, detach, end).
 */
export class JobWatchers {
  private readonly byJob = new Map<number, Watching>();

  /** True while anyone watches any job: a delete then looks for the job's watchers. */
  get any(): boolean {
    return this.byJob.size > 0;
  }

  attach(id: number, watcher: JobWatcher): void {
    const watching = this.byJob.get(id);
    if (watching === undefined) this.byJob.set(id, watcher);
    else if (isList(watching)) {
      if (!watching.includes(watcher)) this.byJob.set(id, [...watching, watcher]);
    } else if (watching !== watcher) this.byJob.set(id, [watching, watcher]);
  }

  /** Returns how many watchers remain. */
  detach(id: number, watcher: JobWatcher): number {
    const watching = this.byJob.get(id);
    if (watching === undefined) return 0;
    if (!isList(watching)) {
      if (watching !== watcher) return 1;
      this.byJob.delete(id);
      return 0;
    }
    const rest = watching.filter((w) => w !== watcher);
    if (rest.length === watching.length) return rest.length;
    this.byJob.set(id, rest.length === 1 ? rest[0]! : rest);
    return rest.length;
  }

  count(id: number): number {
    const watching = this.byJob.get(id);
    return watching === undefined ? 0 : isList(watching) ? watching.length : 1;
  }

  /** Ids of the jobs someone watches. */
  ids(): IterableIterator<number> {
    return this.byJob.keys();
  }

  /** Passes `update` to every watcher of job `id`, in attach order; returns how many got it. */
  report(id: number, update: JobUpdate): number {
    const watching = this.byJob.get(id);
    if (watching === undefined) return 0;
    if (!isList(watching)) {
      watching.update(id, update);
      return 1;
    }
    for (const w of watching) w.update(id, update);
    return watching.length;
  }

  /** Job `id` is gone: its watchers are told, and forgotten. */
  end(id: number): void {
    const watching = this.byJob.get(id);
    if (watching === undefined) return;
    this.byJob.delete(id);
    if (!isList(watching)) watching.ended(id);
    else for (const w of watching) w.ended(id);
  }
}

function isList(watching: Watching): watching is readonly JobWatcher[] {
  return Array.isArray(watching);
}
