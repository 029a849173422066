/**
 * The tables of schedules and alert rules in cluster mode. Created here, under an advisory lock
 * of their own, rather than as a numbered migration in schema.ts: they are read and written only
 * by server/schedules and server/alerts through the stores below, never by a job statement, and
 * `CREATE ... IF NOT EXISTS` under the lock is idempotent whichever node starts first.
 */
import type pg from 'pg';
import { inTransaction } from './pool.js';

/** "sche": the lock key nodes take while creating these tables (schema.ts uses "bean"). */
const TABLES_LOCK = 0x7363_6865;

const TABLES = `
  CREATE TABLE IF NOT EXISTS beanpole_schedules (
    id serial PRIMARY KEY,
    name text NOT NULL,
    cron text NOT NULL,
    time_zone text NOT NULL,
    tube text NOT NULL,
    body bytea NOT NULL,
    encoding text NOT NULL,
    priority bigint NOT NULL,
    delay_ms bigint NOT NULL,
    ttr_ms bigint NOT NULL,
    paused boolean NOT NULL,
    missed text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    -- Slots at or before this are dealt with (schedule.ts).
    checked_through bigint NOT NULL
  );
  -- One row per run: its primary key is the claim that makes a slot fire on one node only.
  CREATE TABLE IF NOT EXISTS beanpole_schedule_runs (
    schedule_id integer NOT NULL REFERENCES beanpole_schedules ON DELETE CASCADE,
    slot_at bigint NOT NULL,
    manual boolean NOT NULL,
    kind text NOT NULL,
    fired_at bigint NOT NULL,
    node integer NOT NULL,
    job_id bigint,
    error text,
    PRIMARY KEY (schedule_id, slot_at, manual)
  );
  CREATE TABLE IF NOT EXISTS beanpole_alert_rules (
    id serial PRIMARY KEY,
    name text NOT NULL,
    condition text NOT NULL,
    threshold bigint NOT NULL,
    for_ms bigint NOT NULL,
    tubes text NOT NULL,
    webhook_url text NOT NULL,
    format text NOT NULL,
    min_interval_ms bigint NOT NULL,
    enabled boolean NOT NULL,
    created_at bigint NOT NULL
  );
  -- A rule's state on a tube: flipping 'active' is the claim of a start or a clear.
  CREATE TABLE IF NOT EXISTS beanpole_alert_states (
    rule_id integer NOT NULL REFERENCES beanpole_alert_rules ON DELETE CASCADE,
    tube text NOT NULL,
    active boolean NOT NULL,
    notified boolean NOT NULL,
    notified_at bigint,
    changed_at bigint NOT NULL,
    PRIMARY KEY (rule_id, tube)
  );
  CREATE TABLE IF NOT EXISTS beanpole_alert_events (
    id bigserial PRIMARY KEY,
    rule_id integer NOT NULL,
    rule_name text NOT NULL,
    tube text NOT NULL,
    kind text NOT NULL,
    at bigint NOT NULL,
    value bigint NOT NULL,
    delivery text NOT NULL,
    attempts integer NOT NULL,
    last_error text,
    node integer NOT NULL
  );
`;

/** Creates the tables if missing (once, whichever node comes first). */
export async function createAutomationTables(pool: pg.Pool): Promise<void> {
  // One transaction on a connection held through checkOut: its errors are listened for while held.
  await inTransaction(pool, async (db) => {
    await db.query('SELECT pg_advisory_xact_lock($1)', [TABLES_LOCK]);
    await db.query(TABLES);
  });
}

/**
 * A store over one automation table (`table`, its rows read as records by `of`): every statement
 * waits until the tables exist (`ready`).
 */
export abstract class AutomationTableStore<R extends pg.QueryResultRow, T> {
  constructor(
    protected readonly pool: pg.Pool,
    private readonly ready: Promise<void>,
    private readonly table: string,
    private readonly of: (row: R) => T,
  ) {}

  protected async query<Q extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<Q>> {
    await this.ready;
    return this.pool.query<Q>(text, values);
  }

  /** Every record, by id. */
  async list(): Promise<T[]> {
    const { rows } = await this.query<R>(`SELECT * FROM ${this.table} ORDER BY id`);
    return rows.map(this.of);
  }

  /** Record `id`, or undefined. */
  async get(id: number): Promise<T | undefined> {
    const { rows } = await this.query<R>(`SELECT * FROM ${this.table} WHERE id = $1`, [id]);
    return rows[0] === undefined ? undefined : this.of(rows[0]);
  }
}
