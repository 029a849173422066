/** One tube page's job list: a state, a page of jobs, cursors back and forth, live refresh of page one. */

import type { JobState, JobSummaryDto } from '../../../shared/dto.js';
import { ApiError, api, describeError, isAbort } from '../api.js';
import { onConnected, onServerEvent, viewTube } from '../socket.js';

export const JOBS_PAGE_SIZE = 50;
/** Coalesces bursts of tube:jobs-changed into one refetch. */
const REFRESH_DEBOUNCE_MS = 300;

export class TubeJobs {
  readonly tube: string;
  state = $state<JobState>('ready');
  jobs = $state.raw<JobSummaryDto[]>([]);
  /** Cursors of the pages seen so far; the last one is the current page's (null: the first page). */
  cursors = $state.raw<(string | null)[]>([null]);
  next = $state.raw<string | null>(null);
  loading = $state(false);
  loaded = $state(false);
  error = $state<string | null>(null);
  /** Jobs of this state changed while a later page was shown (only page one refreshes by itself). */
  stale = $state(false);
  private requestSeq = 0;
  private abort: AbortController | null = null;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(tube: string, state: JobState) {
    this.tube = tube;
    this.state = state;
  }

  get pageIndex(): number {
    return this.cursors.length - 1;
  }

  /** Joins the tube's room and listens; returns the cleanup. */
  attach(): () => void {
    const leave = viewTube(this.tube);
    const offChanged = onServerEvent('tube:jobs-changed', (change) => {
      if (change.tube === this.tube && change.states.includes(this.state)) this.changed();
    });
    const offConnected = onConnected(() => void this.load());
    void this.load();
    return () => {
      clearTimeout(this.refreshTimer);
      this.abort?.abort();
      offChanged();
      offConnected();
      leave();
    };
  }

  showState(state: JobState): void {
    if (state === this.state) return;
    this.state = state;
    this.cursors = [null];
    this.jobs = [];
    this.loaded = false;
    void this.load();
  }

  nextPage(): void {
    if (this.next === null) return;
    this.cursors = [...this.cursors, this.next];
    void this.load();
  }

  previousPage(): void {
    if (this.cursors.length <= 1) return;
    this.cursors = this.cursors.slice(0, -1);
    void this.load();
  }

  firstPage(): void {
    this.cursors = [null];
    void this.load();
  }

  /** Refetches the current page. */
  async load(): Promise<void> {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
    this.abort?.abort();
    const abort = new AbortController();
    this.abort = abort;
    const seq = ++this.requestSeq;
    const cursor = this.cursors[this.cursors.length - 1] ?? null;
    this.loading = true;
    try {
      const page = await api.tubeJobs(
        this.tube,
        { state: this.state, limit: JOBS_PAGE_SIZE, cursor },
        abort.signal,
      );
      if (seq !== this.requestSeq) return;
      this.jobs = page.jobs;
      this.next = page.next;
      this.error = null;
      this.stale = false;
      this.loaded = true;
    } catch (error) {
      if (isAbort(error) || seq !== this.requestSeq) return;
      if (error instanceof ApiError && error.status === 404) {
        // No such tube (right now): an empty list, and the page says the tube is missing.
        this.jobs = [];
        this.next = null;
        this.error = null;
        this.loaded = true;
        return;
      }
      this.error = describeError(error);
    } finally {
      if (seq === this.requestSeq) this.loading = false;
    }
  }

  private changed(): void {
    if (this.pageIndex > 0) {
      this.stale = true;
      return;
    }
    // At most one refetch per interval, even while changes keep coming (a busy tube never starves).
    if (this.refreshTimer !== undefined) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      void this.load();
    }, REFRESH_DEBOUNCE_MS);
  }
}
