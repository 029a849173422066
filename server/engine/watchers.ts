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
