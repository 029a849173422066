/** A job as a row of beanpole_jobs, and the snapshots the operations hand out. */
import { BURY_CAUSES } from '../../shared/bury-cause.js';
import type { JobCounts } from '../common/job-counts.js';
import type { JobBytes, JobSnapshot, JobState } from '../operations/operations.js';

/** The columns every job read selects (bigints arrive as numbers: see pool.ts). */
export const JOB_COLUMNS =
  'id, tube, state, priority, delay_ms, ttr_ms, created_at, due_at, holder_node, holder_conn, reserves, timeouts, releases, buries, kicks, strikes, bury_cause, bury_order, body_edits, body';

export interface JobRow extends JobCounts {
  id: number;
  tube: string;
  state: number;
  priority: number;
  delay_ms: number;
  ttr_ms: number;
  created_at: number;
  due_at: number;
  holder_node: number | null;
  holder_conn: number | null;
  bury_cause: number;
  bury_order: number;
  body_edits: number;
  body: Buffer;
}

/** Stored state codes, in schema.ts's STATE order. */
export const STATE_NAMES: readonly JobState[] = ['ready', 'reserved', 'delayed', 'buried'];

export function jobBytes(row: Pick<JobRow, 'id' | 'tube' | 'body'>): JobBytes {
  return { id: row.id, tubeName: row.tube, bodyBuf: row.body, bodyOffset: 0, bodyLength: row.body.length };
}

/**
 * `nodeId` is this node's: a job held through another node shows no connection (connection ids
 * are each node's own).
 */
export function jobSnapshot(row: JobRow, nodeId: number): JobSnapshot {
  const state = STATE_NAMES[row.state] ?? 'ready';
  return {
    id: row.id,
    tube: row.tube,
    state,
    priority: row.priority,
    delayMs: row.delay_ms,
    ttrMs: row.ttr_ms,
    createdAt: row.created_at,
    deadlineAt: state === 'delayed' || state === 'reserved' ? row.due_at : 0,
    file: 0,
    reservedBy: state === 'reserved' && row.holder_node === nodeId ? (row.holder_conn ?? 0) : 0,
    holderNode: state === 'reserved' ? (row.holder_node ?? 0) : 0,
    transient: false,
    reserves: row.reserves,
    timeouts: row.timeouts,
    releases: row.releases,
    buries: row.buries,
    kicks: row.kicks,
    strikes: row.strikes,
    buryCause: BURY_CAUSES[row.bury_cause] ?? 'none',
    bodyLength: row.body.length,
    bodyStamp: row.body_edits,
    body: row.body,
  };
}

/** Jobs of a tube (or the cluster) by state: what stats and stats-tube count. */
export interface CountsRow {
  urgent: number;
  ready: number;
  reserved: number;
  delayed: number;
  buried: number;
}

export function zeroCounts(): CountsRow {
  return { urgent: 0, ready: 0, reserved: 0, delayed: 0, buried: 0 };
}

/** A page cursor: the last job's position in its list ("a:b"). */
export function cursorFor(state: JobState, row: Pick<JobRow, 'id' | 'priority' | 'due_at' | 'bury_order'>): string {
  const first = state === 'ready' ? row.priority : state === 'buried' ? row.bury_order : row.due_at;
  return `${first}:${row.id}`;
}

/** The position a cursor names; [-1, -1] (the start) for none or one that does not parse. */
export function parseCursor(cursor: string | null): [number, number] {
  if (cursor === null) return [-1, -1];
  const [a, b] = cursor.split(':').map(Number);
  return Number.isFinite(a) && Number.isFinite(b) ? [a!, b!] : [-1, -1];
}
