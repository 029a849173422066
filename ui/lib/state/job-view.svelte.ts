/** One job page: the job's stats and body, live updates, and the full body loaded on request. */

import type { BodyDto, JobDto, NextJobDto } from '../../../shared/dto.js';
import { ApiError, api, describeError, isAbort } from '../api.js';
import { BodyContent } from '../body.js';
import { onConnected, onServerEvent, viewJob } from '../socket.js';

function sameBody(a: BodyDto, b: BodyDto): boolean {
  if (a.bytes !== b.bytes || a.truncated !== b.truncated) return false;
  if (a.encoding === 'utf8' && b.encoding === 'utf8') return a.text === b.text;
  if (a.encoding === 'base64' && b.encoding === 'base64') return a.base64 === b.base64;
  return false;
}

export class JobView {
  readonly id: number;
  job = $state.raw<JobDto | null>(null);
  /** When `job` arrived (epoch ms): age and time left count from here. */
  receivedAt = $state(0);
  /** The preview (or, once loaded, the whole body). */
  body = $state.raw<BodyContent | null>(null);
  notFound = $state(false);
  deleted = $state(false);
  /** A worker reserved the job while the page was open (the operator should know before acting). */
  takenByWorker = $state(false);
  /** What the operator just did here, and the job to look at next (the triage flow). */
  after = $state.raw<{ verb: string; next: NextJobDto | null } | null>(null);
  loading = $state(false);
  error = $state<string | null>(null);
  fullLoading = $state(false);
  fullError = $state<string | null>(null);
  private abort: AbortController | null = null;
  private fullAbort: AbortController | null = null;
  private seq = 0;

  constructor(id: number) {
    this.id = id;
  }

  attach(): () => void {
    const leave = viewJob(this.id);
    const offUpdated = onServerEvent('job:updated', (job) => {
      if (job.id === this.id) this.apply(job);
    });
    const offDeleted = onServerEvent('job:deleted', (id) => {
      if (id === this.id) this.markDeleted();
    });
    const offConnected = onConnected(() => {
      if (!this.deleted) void this.load();
    });
    void this.load();
    return () => {
      this.abort?.abort();
      this.fullAbort?.abort();
      offUpdated();
      offDeleted();
      offConnected();
      leave();
    };
  }

  async load(): Promise<void> {
    this.abort?.abort();
    const abort = new AbortController();
    this.abort = abort;
    const seq = ++this.seq;
    this.loading = true;
    try {
      const job = await api.job(this.id, abort.signal);
      if (seq !== this.seq) return;
      this.notFound = false;
      this.deleted = false;
      this.error = null;
      this.apply(job);
    } catch (error) {
      if (isAbort(error) || seq !== this.seq) return;
      if (error instanceof ApiError && error.status === 404) {
        if (this.job !== null) this.deleted = true;
        else this.notFound = true;
        this.error = null;
      } else {
        this.error = describeError(error);
      }
    } finally {
      if (seq === this.seq) this.loading = false;
    }
  }

  /** A new DTO (REST answer, PATCH answer or job:updated): keeps a loaded full body if the body is unchanged. */
  apply(job: JobDto): void {
    const previous = this.job;
    if (previous !== null && previous.state !== 'reserved' && job.state === 'reserved') this.takenByWorker = true;
    if (job.state !== 'reserved') this.takenByWorker = false;
    this.job = job;
    this.receivedAt = Date.now();
    this.deleted = false;
    const keepFull = previous !== null && this.body?.complete === true && sameBody(previous.body, job.body);
    if (!keepFull) {
      this.fullAbort?.abort();
      this.fullLoading = false;
      this.body = BodyContent.fromDto(job.body);
    }
  }

  markDeleted(): void {
    this.deleted = true;
    this.fullAbort?.abort();
    this.fullLoading = false;
  }

  /** Fetches the whole body (only when asked: it may be large). */
  async loadFull(): Promise<void> {
    if (this.fullLoading || this.body?.complete === true) return;
    this.fullAbort?.abort();
    const abort = new AbortController();
    this.fullAbort = abort;
    this.fullLoading = true;
    this.fullError = null;
    try {
      const bytes = await api.jobBody(this.id, abort.signal);
      if (abort.signal.aborted) return;
      this.body = BodyContent.fromBytes(bytes);
    } catch (error) {
      if (isAbort(error)) return;
      this.fullError = describeError(error);
    } finally {
      if (this.fullAbort === abort) this.fullLoading = false;
    }
  }
}
