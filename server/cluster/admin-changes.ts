/**
 * The dashboard's changes to a realm's jobs and tubes (the protocol's go through a client:
 * cluster-client.ts): puts, deletes, kicks, pauses, edits, a tube's settings and policy, and bulk
 * clears and moves in slices. Each tells the waiters, the body budget and the other nodes what
 * it changed, as the protocol's commands do.
 */
import type { TubePolicy } from '../../shared/policy.js';
import { fail, ok } from '../common/result.js';
import { ttrWithFloor } from '../common/rules.js';
import type {
  CountedCommand,
  JobChange,
  JobSnapshot,
  NewJob,
  QueuedState,
  Result,
  TubeCounts,
  TubePolicyView,
  TubeSettings,
  TubeSettingsView,
} from '../operations/operations.js';
import { tubeSettingsView } from '../operations/tube-settings-view.js';
import type { ClientStore } from './client-store.js';
import { jobSnapshot, type JobRow } from './job-row.js';
import { run } from './pool.js';
import { STATE } from './schema.js';
import type { ClusterPolicies } from './tube-policies.js';

/** Jobs a bulk kick, clear or move changes per statement. */
const BULK_SLICE = 1000;

/** What the changes need of their store: what a client needs of it, and the store's reads and news. */
export interface ChangeStore
  extends Pick<
    ClientStore<never>,
    | 'pool'
    | 'sql'
    | 'nodeId'
    | 'now'
    | 'draining'
    | 'defaultDeadLetterAfter'
    | 'isTooBig'
    | 'overBudget'
    | 'insert'
    | 'localTube'
    | 'jobsReady'
    | 'delayedDue'
    | 'jobEnded'
    | 'failed'
  > {
  readonly commands: Record<CountedCommand, number>;
  count(operation: CountedCommand): void;
  job(id: number): Promise<JobSnapshot | undefined>;
  tube(name: string): Promise<TubeCounts | undefined>;
  addedBytes(bytes: number): void;
  readonly policies: Pick<ClusterPolicies, 'read' | 'set'>;
  /** A tube's policy was set here: the other nodes hear of it. */
  policySet(): void;
  /** An operator removed jobs (the realm's hook: Gearman tells waiting clients on other nodes). */
  operatorRemoved(): void;
}

export class AdminChanges {
  constructor(private readonly s: ChangeStore) {}

  async put(tube: string, job: NewJob): Promise<Result<JobSnapshot>> {
    this.s.count('put');
    if (this.s.isTooBig(job.body.length)) return fail('JOB_TOO_BIG');
    if (this.s.draining) return fail('DRAINING');
    if (this.s.overBudget(job.body.length)) return fail('OUT_OF_MEMORY');
    // Connection 0: the dashboard, which has no command order to keep.
    const result = await this.s.insert(tube, { ...job, ttrMs: ttrWithFloor(job.ttrMs) }, 0);
    if (!result.ok) return fail(result.code);
    const snapshot = await this.s.job(result.value.id);
    return snapshot === undefined ? fail('NOT_FOUND') : ok(snapshot);
  }

  async delete(id: number): Promise<Result<void>> {
    try {
      const [row] = await run<{ tube: string; bytes: number }>(this.s.pool, this.s.sql.deleteUnheld, [id]);
      if (row !== undefined) this.s.addedBytes(-row.bytes);
      if (row === undefined) {
        return (await this.s.job(id))?.state === 'reserved' ? fail('JOB_RESERVED') : fail('NOT_FOUND');
      }
      this.s.count('delete');
      this.s.localTube(row.tube).deletes++;
      this.s.jobEnded(id);
      this.s.operatorRemoved();
      return ok(undefined);
    } catch (err) {
      return this.s.failed(err);
    }
  }

  async kickJob(id: number): Promise<Result<JobSnapshot>> {
    this.s.count('kick-job');
    try {
      const [row] = await run<JobRow>(this.s.pool, this.s.sql.kickJob, [id]);
      if (row === undefined) return fail('NOT_FOUND');
      this.s.jobsReady([row.tube], true);
      return ok(jobSnapshot(row, this.s.nodeId));
    } catch (err) {
      return this.s.failed(err);
    }
  }

  async kick(tube: string, bound: number): Promise<Result<number>> {
    if ((await this.s.tube(tube)) === undefined) return fail('NOT_FOUND');
    this.s.count('kick');
    return ok(await this.kickIn(tube, bound));
  }

  /** Kicks up to `bound` of `tube`'s buried jobs, or its delayed ones when none is buried. */
  async kickIn(tube: string, bound: number): Promise<number> {
    const [{ any }] = (await run<{ any: boolean }>(this.s.pool, this.s.sql.hasBuried, [tube])) as [{ any: boolean }];
    const statement = any ? this.s.sql.kickBuried : this.s.sql.kickDelayed;
    let kicked = 0;
    while (kicked < bound) {
      const rows = await run(this.s.pool, statement, [tube, Math.min(BULK_SLICE, bound - kicked)]);
      kicked += rows.length;
      if (rows.length < Math.min(BULK_SLICE, bound - kicked + rows.length)) break;
    }
    if (kicked > 0) this.s.jobsReady([tube], true);
    return kicked;
  }

  async pauseTube(tube: string, delayMs: number): Promise<Result<TubeCounts>> {
    this.s.count('pause-tube');
    // protocol: pausing a tube that does not exist answers NOT_FOUND and changes nothing.
    if ((await this.s.tube(tube)) === undefined) return fail('NOT_FOUND');
    const now = this.s.now();
    const unpauseAt = delayMs === 0 ? 0 : now + delayMs;
    await run(this.s.pool, this.s.sql.pauseTube, [tube, delayMs, unpauseAt]);
    this.s.localTube(tube).pauses++;
    if (delayMs === 0) this.s.jobsReady([tube], true);
    // When it ends, reserves waiting on any node look again: every node times its due moments.
    else this.s.delayedDue(unpauseAt + 1);
    const counts = await this.s.tube(tube);
    return counts === undefined ? fail('NOT_FOUND') : ok(counts);
  }

  async tubeSettings(tube: string): Promise<TubeSettingsView> {
    const [row] = await run<{ dead_letter_after: number | null }>(this.s.pool, this.s.sql.tubeSettings, [tube]);
    const own = row?.dead_letter_after == null ? null : { deadLetterAfter: row.dead_letter_after };
    return tubeSettingsView(tube, own, this.s.defaultDeadLetterAfter);
  }

  async setTubeSettings(tube: string, settings: TubeSettings | null): Promise<Result<TubeSettingsView>> {
    await run(this.s.pool, this.s.sql.setTubeSettings, [tube, settings?.deadLetterAfter ?? null]);
    return ok(await this.tubeSettings(tube));
  }

  async tubePolicy(tube: string): Promise<TubePolicyView> {
    const counts = await this.s.tube(tube);
    return { tube, policy: counts?.policy?.policy ?? (await this.s.policies.read(tube)), state: counts?.policy ?? null };
  }

  /** Sets a tube's policy for the cluster; every node hears of it (wakeups) and waiters look again. */
  async setTubePolicy(tube: string, policy: TubePolicy | null): Promise<Result<TubePolicyView>> {
    try {
      await this.s.policies.set(tube, policy, this.s.now());
    } catch (err) {
      return this.s.failed(err);
    }
    this.s.policySet();
    this.s.jobsReady([tube], true);
    return ok(await this.tubePolicy(tube));
  }

  async editJob(id: number, change: JobChange): Promise<Result<JobSnapshot>> {
    try {
      const ttr = change.ttrMs === undefined ? null : ttrWithFloor(change.ttrMs);
      const before = change.body === undefined ? undefined : await this.s.job(id);
      if (change.body !== undefined && before !== undefined && this.s.overBudget(change.body.length - before.bodyLength)) {
        return fail('OUT_OF_MEMORY');
      }
      const [row] = await run<JobRow>(this.s.pool, this.s.sql.edit, [
        id,
        change.body ?? null,
        change.priority ?? null,
        ttr,
        change.delayMs ?? null,
        change.tube ?? null,
        this.s.now(),
      ]);
      if (row === undefined) return (await this.s.job(id)) === undefined ? fail('NOT_FOUND') : fail('JOB_RESERVED');
      let job = jobSnapshot(row, this.s.nodeId);
      if (before !== undefined) this.s.addedBytes(job.bodyLength - before.bodyLength);
      if (job.state === 'delayed') this.s.delayedDue(job.deadlineAt);
      if (change.kick === true && (job.state === 'buried' || job.state === 'delayed')) {
        const kicked = await this.kickJob(id);
        if (!kicked.ok) return kicked;
        job = kicked.value;
      }
      if (job.state === 'ready') this.s.jobsReady([job.tube], true);
      return ok(job);
    } catch (err) {
      return this.s.failed(err);
    }
  }

  async clear(tube: string, state: QueuedState): Promise<Result<number>> {
    if ((await this.s.tube(tube)) === undefined) return fail('NOT_FOUND');
    let total = 0;
    for (;;) {
      const rows = await run<{ bytes: number }>(this.s.pool, this.s.sql.clearSome, [tube, STATE[state], BULK_SLICE]);
      this.s.addedBytes(-rows.reduce((n, row) => n + row.bytes, 0));
      total += rows.length;
      if (rows.length < BULK_SLICE) break;
    }
    this.s.commands.delete += total;
    this.s.localTube(tube).deletes += total;
    if (total > 0) this.s.operatorRemoved();
    return ok(total);
  }

  async move(tube: string, state: QueuedState, to: string, limit: number): Promise<Result<number>> {
    if ((await this.s.tube(tube)) === undefined) return fail('NOT_FOUND');
    if (to === tube) return ok(0);
    let moved = 0;
    while (moved < limit) {
      const want = Math.min(BULK_SLICE, limit - moved);
      const rows = await run(this.s.pool, this.s.sql.moveSome, [tube, STATE[state], want, to]);
      moved += rows.length;
      if (rows.length < want) break;
    }
    if (moved > 0 && state === 'ready') this.s.jobsReady([to], true);
    return ok(moved);
  }
}
