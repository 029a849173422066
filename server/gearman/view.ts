import type { HistoryActor, JobHistoryDto } from '../../shared/history.js';
import type { GearmanJobState, GearmanSnapshotDto } from '../../shared/dto.js';
import type { JobSnapshot, JobState, Result } from '../operations/operations.js';
import type { GearmanStore } from './store.js';
import { dataOf, uniqueEnd } from './job-body.js';
import type { GearmanRegistry, WorkStatus } from './registry.js';

/** A Gearman job in Gearman's words: handle, function, unique id, data (the admin API makes JSON of it). */
export interface GearmanJobRecord {
  handle: string;
  function: string;
  unique: Buffer;
  state: GearmanJobState;
  priority: 'high' | 'normal' | 'low';
  runAt: number | null;
  createdAt: number;
  grabs: number;
  status: { numerator: string; denominator: string } | null;
  data: Buffer;
}

export interface GearmanJobPage {
  jobs: GearmanJobRecord[];
  next: string | null;
}

const PRIORITIES = ['high', 'normal', 'low'] as const;
/** The engine state behind each state the dashboard shows. */
const ENGINE_STATE: Readonly<Record<GearmanJobState, JobState>> = { queued: 'ready', scheduled: 'delayed', running: 'reserved' };
const GEARMAN_STATE: Readonly<Record<JobState, GearmanJobState>> = { ready: 'queued', delayed: 'scheduled', reserved: 'running', buried: 'queued' };

/**
 * What the dashboard shows of the Gearman side, read through the same operations as the door:
 * functions with their queued and running jobs and workers (gearmand's `status`), connections
 * (`workers`), a function's jobs page by page, one job by handle, and cancelling a queued job.
 */
export class GearmanView {
  constructor(
    private readonly ops: GearmanStore,
    private readonly registry: GearmanRegistry,
  ) {}

  async snapshot(): Promise<GearmanSnapshotDto> {
    const tubes = await this.ops.tubes();
    return {
      functions: tubes
        .filter((t) => !(t.name === 'default' && t.ready + t.delayed + t.reserved + t.buried === 0 && t.watching === 0))
        .map((t) => ({ name: t.name, queued: t.ready + t.delayed + t.buried, running: t.reserved, workers: t.watching })),
      workers: this.registry.workers().map((w) => ({ id: w.fd, address: w.address, clientId: w.clientId, functions: w.functions })),
    };
  }

  /** A page of a function's jobs in `state`; undefined when no such function exists. */
  async jobs(fn: string, state: GearmanJobState, limit: number, cursor: string | null): Promise<GearmanJobPage | undefined> {
    const page = await this.ops.listJobs(fn, ENGINE_STATE[state], limit, cursor);
    return page === undefined ? undefined : { jobs: await this.records(page.jobs), next: page.next };
  }

  async job(handle: string): Promise<GearmanJobRecord | undefined> {
    const id = this.registry.handles.idOf(handle);
    if (id === null) return undefined;
    const job = await this.ops.job(id);
    return job === undefined ? undefined : (await this.records([job]))[0];
  }

  /** What happened to the job lately (submit, grabs, requeues, completion); undefined for a handle not of this server. */
  async history(handle: string): Promise<JobHistoryDto | undefined> {
    const id = this.registry.handles.idOf(handle);
    return id === null ? undefined : this.ops.jobHistory(id);
  }

  /** Deletes a queued or scheduled job: NOT_FOUND, or JOB_RESERVED while a worker runs it. */
  async cancel(handle: string, by?: HistoryActor): Promise<Result<void>> {
    const id = this.registry.handles.idOf(handle);
    if (id === null) return { ok: false, code: 'NOT_FOUND' };
    return this.ops.delete(id, by);
  }

  /** Jobs of the Gearman store as the dashboard shows them, each with its last WORK_STATUS. */
  async records(jobs: readonly JobSnapshot[]): Promise<GearmanJobRecord[]> {
    const statuses = await this.registry.statuses(jobs.map((j) => j.id));
    return jobs.map((j) => this.recordOf(j, statuses.get(j.id)));
  }

  private recordOf(job: JobSnapshot, status: WorkStatus | undefined): GearmanJobRecord {
    const end = uniqueEnd(job.body, 0, job.body.length);
    return {
      handle: this.registry.handles.handle(job.id),
      function: job.tube,
      unique: job.body.subarray(0, end),
      state: GEARMAN_STATE[job.state],
      priority: PRIORITIES[job.priority] ?? 'low',
      runAt: job.state === 'delayed' ? job.deadlineAt : null,
      createdAt: job.createdAt,
      grabs: job.reserves,
      status: status === undefined ? null : { numerator: status.numerator.toString('latin1'), denominator: status.denominator.toString('latin1') },
      data: dataOf(job.body),
    };
  }
}
