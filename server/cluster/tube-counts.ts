/**
 * A realm's tubes as the stats and the dashboard see them: each tube's job counts (from the
 * database, shared by every node), its tubes row (pause, own settings, policy) and this node's
 * own facts of it (clients using, watching, waiting; commands counted here). A tube is listed
 * while it has jobs or a client here refers to it; the default tube always.
 */
import type pg from 'pg';
import { DEFAULT_TUBE } from '../../shared/limits.js';
import type { TubeCounts } from '../operations/operations.js';
import type { LocalTube } from './batched.js';
import { zeroCounts, type CountsRow } from './job-row.js';
import { run } from './pool.js';
import type { ClusterSql } from './sql.js';
import { policyStateOf, type TubeRow } from './tube-policies.js';

/** How long the dashboard's list of every tube's counts is reused. */
const TUBES_MAX_AGE_MS = 1000;

/** True while a client of this node uses, watches or waits on the tube (which keeps it listed). */
export function referenced(local: LocalTube | undefined): boolean {
  return local !== undefined && local.using + local.watching + local.waiting > 0;
}

/** What a tube's counts are made of: its jobs' counts, and its tubes row when it has one. */
export interface TubeFacts {
  counts: CountsRow;
  totalJobs: number;
  row: TubeRow | undefined;
  nextReadyCreatedAt: number;
  /** This node's facts of the tube, if any. */
  local: LocalTube | undefined;
}

/** A tube's counts from its facts, at `now`; `defaultDeadLetter` where the tube has no limit of its own. */
export function tubeCountsOf(name: string, f: TubeFacts, now: number, defaultDeadLetter: number): TubeCounts {
  const { counts: c, totalJobs, row, local } = f;
  const unpauseAt = row?.unpause_at ?? 0;
  const paused = unpauseAt > now;
  const ownDeadLetter = row?.dead_letter_after ?? null;
  return {
    name,
    serial: 0,
    urgent: c.urgent,
    ready: c.ready,
    reserved: c.reserved,
    delayed: c.delayed,
    buried: c.buried,
    totalJobs,
    using: local?.using ?? 0,
    watching: local?.watching ?? 0,
    waiting: local?.waiting ?? 0,
    deletes: local?.deletes ?? 0,
    pauses: local?.pauses ?? 0,
    pauseMs: paused ? (row?.pause_ms ?? 0) : 0,
    unpauseAt: paused ? unpauseAt : 0,
    // No count of state changes is kept in the database: the counts stand in for them, so a
    // watcher of the tube (the dashboard's job list) sees a change when a count moves.
    stateChanges: [c.ready + totalJobs, c.reserved, c.delayed, c.buried],
    nextReadyCreatedAt: f.nextReadyCreatedAt,
    deadLetterAfter: ownDeadLetter ?? defaultDeadLetter,
    ownSettings: ownDeadLetter === null ? null : { deadLetterAfter: ownDeadLetter },
    policy: policyStateOf(row, c.reserved, now),
  };
}

export class TubeCountReader {
  private tubesRead: { at: number; value: Promise<TubeCounts[]> } | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly sql: ClusterSql,
    /** This node's facts of its tubes (the store's). */
    private readonly localTubes: ReadonlyMap<string, LocalTube>,
    private readonly now: () => number,
    private readonly defaultDeadLetter: number,
  ) {}

  /** Tubes with jobs, or referenced by this node's clients; the default tube always. */
  async names(): Promise<string[]> {
    const rows = await run<{ tube: string }>(this.pool, this.sql.tubesWithJobs, []);
    const names = new Set<string>([DEFAULT_TUBE]);
    for (const r of rows) names.add(r.tube);
    for (const [name, t] of this.localTubes) if (referenced(t)) names.add(name);
    return [...names];
  }

  async tube(name: string): Promise<TubeCounts | undefined> {
    const [row] = await run<CountsRow & { next_ready_created_at: number | null; total_jobs: number; tube_row: TubeRow | null }>(this.pool, this.sql.tubeCounts, [name]);
    const local = this.localTubes.get(name);
    const jobs = row === undefined ? 0 : row.ready + row.reserved + row.delayed + row.buried;
    if (jobs === 0 && !referenced(local) && name !== DEFAULT_TUBE) return undefined;
    return this.countsOf(name, {
      counts: row ?? zeroCounts(),
      totalJobs: row?.total_jobs ?? 0,
      row: row?.tube_row ?? undefined,
      nextReadyCreatedAt: row?.next_ready_created_at ?? 0,
      local,
    });
  }

  /**
   * Every tube's counts, read at most once a second: the dashboard asks four times a second
   * while it is open, and counting every job of the cluster is a pass over an index (the
   * protocol's stats-tube reads one tube, always afresh).
   */
  tubes(fresh = false): Promise<TubeCounts[]> {
    const now = this.now();
    if (fresh || this.tubesRead === null || now - this.tubesRead.at >= TUBES_MAX_AGE_MS) {
      const value = this.readTubes();
      this.tubesRead = { at: now, value };
      value.catch(() => {
        if (this.tubesRead?.value === value) this.tubesRead = null;
      });
    }
    return this.tubesRead.value;
  }

  private async readTubes(): Promise<TubeCounts[]> {
    const names = await this.names();
    const [counts, totals, settings, heads] = await Promise.all([
      run<CountsRow & { tube: string }>(this.pool, this.sql.allTubeCounts, []),
      run<{ tube: string; total_jobs: number }>(this.pool, this.sql.allTubeTotals, []),
      run<TubeRow & { name: string }>(this.pool, this.sql.allTubeRows, []),
      run<{ tube: string; created_at: number }>(this.pool, this.sql.nextReadyOf, [names]),
    ]);
    const headOf = new Map(heads.map((h) => [h.tube, h.created_at]));
    const countOf = new Map(counts.map((c) => [c.tube, c]));
    const totalOf = new Map(totals.map((t) => [t.tube, t.total_jobs]));
    const settingsOf = new Map(settings.map((s) => [s.name, s]));
    return names.map((name) =>
      this.countsOf(name, {
        counts: countOf.get(name) ?? zeroCounts(),
        totalJobs: totalOf.get(name) ?? 0,
        row: settingsOf.get(name),
        nextReadyCreatedAt: headOf.get(name) ?? 0,
        local: this.localTubes.get(name),
      }),
    );
  }

  private countsOf(name: string, facts: TubeFacts): TubeCounts {
    return tubeCountsOf(name, facts, this.now(), this.defaultDeadLetter);
  }
}
