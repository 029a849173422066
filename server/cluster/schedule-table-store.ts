import { RUNS_KEPT, type RunKind, type Schedule, type ScheduleFields, type ScheduleRun } from '../schedules/schedule.js';
import type { ScheduleStore } from '../schedules/schedule-store.js';
import type pg from 'pg';
import { AutomationTableStore } from './automation-tables.js';

interface ScheduleRow {
  id: number;
  name: string;
  cron: string;
  time_zone: string;
  tube: string;
  body: Buffer;
  encoding: 'utf8' | 'base64';
  priority: number;
  delay_ms: number;
  ttr_ms: number;
  paused: boolean;
  missed: Schedule['missed'];
  created_at: number;
  updated_at: number;
  checked_through: number;
}

interface RunRow {
  schedule_id: number;
  slot_at: number;
  kind: RunKind;
  fired_at: number;
  node: number;
  job_id: number | null;
  error: string | null;
}

const scheduleOf = (r: ScheduleRow): Schedule => ({
  id: r.id,
  name: r.name,
  cron: r.cron,
  timeZone: r.time_zone,
  tube: r.tube,
  body: r.body,
  encoding: r.encoding,
  priority: r.priority,
  delayMs: r.delay_ms,
  ttrMs: r.ttr_ms,
  paused: r.paused,
  missed: r.missed,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  checkedThrough: r.checked_through,
});

const fieldValues = (f: ScheduleFields): unknown[] => [f.name, f.cron, f.timeZone, f.tube, f.body, f.encoding, f.priority, f.delayMs, f.ttrMs, f.paused, f.missed];

/** Schedules shared by every node of a cluster; the runs' primary key is the slot's claim. */
export class ScheduleTableStore extends AutomationTableStore<ScheduleRow, Schedule> implements ScheduleStore {
  constructor(pool: pg.Pool, ready: Promise<void>) {
    super(pool, ready, 'beanpole_schedules', scheduleOf);
  }

  async create(fields: ScheduleFields, now: number): Promise<Schedule> {
    const { rows } = await this.query<ScheduleRow>(
      `INSERT INTO beanpole_schedules (name, cron, time_zone, tube, body, encoding, priority, delay_ms, ttr_ms, paused, missed, created_at, updated_at, checked_through)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $12) RETURNING *`,
      [...fieldValues(fields), now],
    );
    return scheduleOf(rows[0]!);
  }

  async update(id: number, fields: ScheduleFields, now: number): Promise<Schedule | undefined> {
    // Resumed: slots while paused are not missed ones.
    const { rows } = await this.query<ScheduleRow>(
      `UPDATE beanpole_schedules SET name = $1, cron = $2, time_zone = $3, tube = $4, body = $5, encoding = $6, priority = $7,
         delay_ms = $8, ttr_ms = $9, missed = $11, updated_at = $12,
         checked_through = CASE WHEN paused AND NOT $10 THEN greatest(checked_through, $12) ELSE checked_through END,
         paused = $10
       WHERE id = $13 RETURNING *`,
      [...fieldValues(fields), now, id],
    );
    return rows[0] === undefined ? undefined : scheduleOf(rows[0]);
  }

  async remove(id: number): Promise<boolean> {
    const r = await this.query('DELETE FROM beanpole_schedules WHERE id = $1', [id]);
    return (r.rowCount ?? 0) > 0;
  }

  async advance(id: number, through: number): Promise<void> {
    await this.query('UPDATE beanpole_schedules SET checked_through = $2 WHERE id = $1 AND checked_through < $2', [id, through]);
  }

  async claim(id: number, slotAt: number, kind: RunKind, firedAt: number, node: number): Promise<boolean> {
    const r = await this.query(
      `INSERT INTO beanpole_schedule_runs (schedule_id, slot_at, manual, kind, fired_at, node)
       SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM beanpole_schedules WHERE id = $1)
       ON CONFLICT DO NOTHING`,
      [id, slotAt, kind === 'run-now', kind, firedAt, node],
    );
    if ((r.rowCount ?? 0) === 0) return false;
    // Older runs are forgotten: their slots are long past checked_through.
    await this.query(
      `DELETE FROM beanpole_schedule_runs WHERE schedule_id = $1 AND (slot_at, manual) NOT IN
         (SELECT slot_at, manual FROM beanpole_schedule_runs WHERE schedule_id = $1 ORDER BY fired_at DESC, slot_at DESC LIMIT $2)`,
      [id, RUNS_KEPT],
    );
    return true;
  }

  async finish(id: number, slotAt: number, kind: RunKind, jobId: number | null, error: string | null): Promise<void> {
    await this.query('UPDATE beanpole_schedule_runs SET job_id = $4, error = $5 WHERE schedule_id = $1 AND slot_at = $2 AND manual = $3', [
      id,
      slotAt,
      kind === 'run-now',
      jobId,
      error,
    ]);
  }

  async runs(id: number): Promise<ScheduleRun[]> {
    const { rows } = await this.query<RunRow>(
      'SELECT * FROM beanpole_schedule_runs WHERE schedule_id = $1 ORDER BY fired_at DESC, slot_at DESC LIMIT $2',
      [id, RUNS_KEPT],
    );
    return rows.map((r) => ({ scheduleId: r.schedule_id, slotAt: r.slot_at, kind: r.kind, firedAt: r.fired_at, jobId: r.job_id, error: r.error, node: r.node }));
  }
}
