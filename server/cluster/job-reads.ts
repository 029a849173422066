/**
 * The reads of a realm's jobs (the dashboard's and the protocol's peeks): one job, pages of a
 * tube's jobs in one state, a job's history, and scans of every job in slices. None changes a
 * job, and none needs anything of this node but its id and its clients' addresses.
 */
import type pg from 'pg';
import { HISTORY_KINDS, type JobHistoryDto } from '../../shared/history.js';
import { MAX_EVENTS_READ } from '../engine/history.js';
import type { JobBytes, JobPage, JobScan, JobSnapshot, JobState, JobView } from '../operations/operations.js';
import { cursorFor, jobBytes, jobSnapshot, parseCursor, type JobRow } from './job-row.js';
import { run } from './pool.js';
import type { ClusterSql } from './sql.js';

/** Jobs a scan reads per statement. */
const SCAN_SLICE = 1000;

/** What the reads need of their store. */
export interface JobReadsStore {
  readonly pool: pg.Pool;
  readonly sql: ClusterSql;
  readonly nodeId: number;
  /** The history ring's size (--history-events). */
  readonly historyEvents: number;
  /** True when the tube exists (has jobs, or a client here refers to it). */
  tubeExists(tube: string): Promise<boolean>;
  /** The address of this node's connection `conn`, if it is still open. */
  peerOf(conn: number): string | undefined;
}

export class JobReads {
  constructor(private readonly s: JobReadsStore) {}

  async peek(id: number): Promise<JobBytes | undefined> {
    const [row] = await run<Pick<JobRow, 'id' | 'tube' | 'body'>>(this.s.pool, this.s.sql.peek, [id]);
    return row === undefined ? undefined : jobBytes(row);
  }

  async job(id: number): Promise<JobSnapshot | undefined> {
    const [row] = await run<JobRow>(this.s.pool, this.s.sql.job, [id]);
    return row === undefined ? undefined : jobSnapshot(row, this.s.nodeId);
  }

  /** The job's newest events, oldest first, from the history table (schema.ts). */
  async jobHistory(id: number): Promise<JobHistoryDto> {
    const { pool, sql, nodeId } = this.s;
    const capacity = this.s.historyEvents;
    const [rows, [count]] = await Promise.all([
      run<{ at: number; kind: number; node: number | null; conn: number; note: string }>(pool, sql.history, [id, MAX_EVENTS_READ]),
      run<{ recorded: number }>(pool, sql.historyRecorded, []),
    ]);
    const events = rows.reverse().map((r) => {
      // A connection id is its node's own: named with the node, and with its address if it is here.
      const here = r.node === nodeId ? this.s.peerOf(r.conn) : undefined;
      return {
        at: r.at,
        kind: HISTORY_KINDS[r.kind] ?? 'put',
        connection: r.node === null ? 0 : r.conn,
        peer: here !== undefined ? here : r.node === null ? '' : `node ${r.node}`,
        note: r.note,
        // The history table does not keep who in the dashboard made a change (yet).
        actor: null,
      };
    });
    return { id, events, capacity, recorded: count?.recorded ?? 0 };
  }

  async visitJobs(ids: Iterable<number>, visit: (id: number, view: JobView | undefined) => void): Promise<void> {
    const wanted = [...ids];
    const rows = wanted.length === 0 ? [] : await run<JobRow>(this.s.pool, this.s.sql.jobs, [wanted]);
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of wanted) {
      const row = byId.get(id);
      visit(id, row === undefined ? undefined : jobSnapshot(row, this.s.nodeId));
    }
  }

  async eachJob(visit: (job: JobSnapshot) => void): Promise<void> {
    const scan = this.scanJobs();
    while (!(await scan.next(SCAN_SLICE, (view, body) => (visit({ ...view, body }), true))));
  }

  scanJobs(): JobScan {
    let after = 0;
    let rows: JobRow[] = [];
    let i = 0;
    let exhausted = false;
    return {
      next: async (max, visit) => {
        for (let n = 0; n < max; n++) {
          if (i >= rows.length) {
            if (exhausted) return true;
            rows = await run<JobRow>(this.s.pool, this.s.sql.scan, [after, SCAN_SLICE]);
            i = 0;
            if (rows.length < SCAN_SLICE) exhausted = true;
            if (rows.length === 0) return true;
          }
          const row = rows[i++]!;
          after = row.id;
          const snapshot = jobSnapshot(row, this.s.nodeId);
          if (!visit(snapshot, snapshot.body)) return false;
        }
        return i >= rows.length && exhausted;
      },
    };
  }

  async listJobs(tube: string, state: JobState, limit: number, cursor: string | null): Promise<JobPage<JobSnapshot> | undefined> {
    if (!(await this.s.tubeExists(tube))) return undefined;
    const { pool, sql } = this.s;
    const [a, b] = parseCursor(cursor);
    const statement = state === 'ready' ? sql.pageReady : state === 'delayed' ? sql.pageDelayed : state === 'buried' ? sql.pageBuried : sql.pageReserved;
    const rows = await run<JobRow>(pool, statement, [tube, a, b, limit + 1]);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      jobs: page.map((r) => jobSnapshot(r, this.s.nodeId)),
      next: rows.length > limit && last !== undefined ? cursorFor(state, last) : null,
    };
  }

  async nextInList(id: number): Promise<number | null> {
    const [row] = await run<JobRow>(this.s.pool, this.s.sql.job, [id]);
    if (row === undefined) return null;
    const state = jobSnapshot(row, this.s.nodeId).state;
    const page = await this.listJobs(row.tube, state, 1, cursorFor(state, row));
    return page?.jobs[0]?.id ?? null;
  }
}
