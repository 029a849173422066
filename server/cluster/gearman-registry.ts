/**
 * The Gearman registry of a cluster node: what a single node keeps in memory (registry.ts) is in
 * the database here, shared by every node (gearman-hooks.ts): unique ids coalesce in the jobs
 * table, WORK_STATUS is kept on the job, `maxqueue` limits in the functions table, and a
 * foreground job's waiting nodes in their own table. Handles name the cluster, not the node, so
 * a handle from one node means the same job on every other.
 */
import type { JobBytes, JobWatcher } from '../operations/operations.js';
import { JobHandles } from '../gearman/handles.js';
import {
  WorkerListings,
  kindOf,
  type GearmanRegistry,
  type JobStatus,
  type QueueLimits,
  type UniqueStatus,
  type WorkStatus,
  type WorkerListing,
} from '../gearman/registry.js';
import type { GearmanHooks } from './gearman-hooks.js';
import { STATE } from './schema.js';

export class ClusterGearmanRegistry implements GearmanRegistry {
  readonly handles: JobHandles;
  readonly declared = new Set<string>();
  private readonly listings = new WorkerListings();

  constructor(
    private readonly gearman: GearmanHooks,
    /** Every node's handles carry it (the database's name). */
    clusterName: string,
  ) {
    this.handles = new JobHandles(clusterName);
  }

  /** Nothing to rebuild: the database keeps it all. */
  async restore(): Promise<void> {}

  /** The store coalesces (the unique index decides, whichever node asks first). */
  jobForUnique(): undefined {
    return undefined;
  }

  /** The submit's statement recorded it all. */
  created(): void {}

  report(id: number, type: number, packet: Buffer, start: number, end: number, status: WorkStatus | null, final: boolean): Promise<void> | undefined {
    return this.gearman.relay(id, kindOf(type), type, packet.subarray(start, end), status, final);
  }

  async jobStatus(id: number): Promise<JobStatus> {
    const job = await this.gearman.jobStatus(id);
    return { known: job !== undefined, running: job?.state === STATE.reserved, status: job?.status ?? undefined };
  }

  async uniqueStatus(unique: Buffer): Promise<UniqueStatus> {
    const job = await this.gearman.uniqueStatus(unique);
    return { known: job !== undefined, running: job?.state === STATE.reserved, status: job?.status ?? undefined, clients: job?.clients ?? 0 };
  }

  statuses(ids: readonly number[]): Promise<Map<number, WorkStatus>> {
    return this.gearman.statuses(ids);
  }

  /** Here only: the client's rows in the database go when its connection ends (GearmanHooks.clientLeft). */
  stopWaiting(id: number, watcher: JobWatcher): void {
    this.gearman.stopWaiting(id, watcher);
  }

  abandoned(job: JobBytes): boolean {
    return this.gearman.takeAbandoned(job.id);
  }

  maxQueue(fn: string): QueueLimits | undefined {
    return this.gearman.maxQueue(fn);
  }

  setMaxQueue(fn: string, limits: QueueLimits | null): Promise<void> {
    return this.gearman.setMaxQueue(fn, limits);
  }

  list(listing: () => WorkerListing): () => void {
    return this.listings.add(listing);
  }

  /** This node's connections only (the admin protocol's `workers` is asked of one server). */
  workers(): WorkerListing[] {
    return this.listings.all();
  }
}
