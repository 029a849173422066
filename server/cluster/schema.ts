/**
 * The cluster's tables, created and migrated by whichever node starts first. Each migration runs
 * once, in its own transaction, in order; nodes that start together wait on one advisory lock,
 * so exactly one of them migrates and the others find the work done.
 *
 * Times are epoch milliseconds from the nodes' clocks (which must agree, as NTP keeps them);
 * job states are small integers (STATE below) so that each state's partial index stays small.
 */
import type pg from 'pg';
import { HISTORY_KINDS, type HistoryKind } from '../../shared/history.js';
import { BEANSTALK_REALM, GEARMAN_REALM, type Realm } from './realm.js';

/** Job states as stored. */
export const STATE = { ready: 0, reserved: 1, delayed: 2, buried: 3 } as const;

/** The advisory lock key migrations take (any constant no other application of the database uses). */
const MIGRATION_LOCK = 0x6265_616e; // "bean"

/**
 * Version N is MIGRATIONS[N - 1]. Append only: a released migration never changes, since
 * databases out there have already run it.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE SEQUENCE beanpole_job_ids;
  CREATE SEQUENCE beanpole_bury_order;
  CREATE TABLE beanpole_nodes (
    id serial PRIMARY KEY,
    address text NOT NULL,
    version text NOT NULL,
    started_at bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    lease_until bigint NOT NULL,
    connections integer NOT NULL DEFAULT 0,
    -- Set when the node stops, or when another node finds its lease run out.
    gone_at bigint
  );
  CREATE TABLE beanpole_jobs (
    id bigint PRIMARY KEY DEFAULT nextval('beanpole_job_ids'),
    tube text NOT NULL,
    state smallint NOT NULL,
    priority bigint NOT NULL,
    delay_ms bigint NOT NULL,
    ttr_ms bigint NOT NULL,
    created_at bigint NOT NULL,
    -- Delayed: when it becomes ready. Reserved: when its TTR runs out.
    due_at bigint NOT NULL DEFAULT 0,
    -- Buried: its place in the tube's buried list (kick and peek-buried take the oldest burial).
    bury_order bigint NOT NULL DEFAULT 0,
    -- Reserved: the fencing token, node and connection and the job's reserve count; a delete,
    -- release, bury or touch acts only while all three still match.
    holder_node integer,
    holder_conn bigint,
    reserves integer NOT NULL DEFAULT 0,
    timeouts integer NOT NULL DEFAULT 0,
    releases integer NOT NULL DEFAULT 0,
    buries integer NOT NULL DEFAULT 0,
    kicks integer NOT NULL DEFAULT 0,
    strikes integer NOT NULL DEFAULT 0,
    bury_cause smallint NOT NULL DEFAULT 0,
    -- Bumped when an operator replaces the body (a watcher tells a new body by it).
    body_edits integer NOT NULL DEFAULT 0,
    body bytea NOT NULL
  ) WITH (
    -- Every job is inserted, updated a few times and deleted: vacuum early and often, and leave
    -- room in each page for updates that keep the row in place.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
  );
  -- A tube's queue head is one probe of this index (priority, then id).
  CREATE INDEX beanpole_jobs_ready ON beanpole_jobs (tube, priority, id) WHERE state = 0;
  CREATE INDEX beanpole_jobs_delayed ON beanpole_jobs (due_at, id) WHERE state = 2;
  CREATE INDEX beanpole_jobs_delayed_tube ON beanpole_jobs (tube, due_at, id) WHERE state = 2;
  CREATE INDEX beanpole_jobs_buried ON beanpole_jobs (tube, bury_order) WHERE state = 3;
  CREATE INDEX beanpole_jobs_held ON beanpole_jobs (holder_node, due_at) WHERE state = 1;
  -- Counts per tube and state (stats-tube) read this index only.
  CREATE INDEX beanpole_jobs_tube_state ON beanpole_jobs (tube, state);
  -- Jobs ever put into each tube, one row per node and tube so that nodes never wait on each
  -- other's counters; stats-tube adds them up.
  CREATE TABLE beanpole_tube_totals (
    node integer NOT NULL,
    tube text NOT NULL,
    total_jobs bigint NOT NULL,
    PRIMARY KEY (node, tube)
  );
  -- Tubes that are paused or have settings of their own (a tube exists while it has jobs).
  CREATE TABLE beanpole_tubes (
    name text PRIMARY KEY,
    pause_ms bigint NOT NULL DEFAULT 0,
    unpause_at bigint NOT NULL DEFAULT 0,
    -- The tube's own dead-letter limit; null: the node's --dead-letter-after.
    dead_letter_after bigint
  );
  `,
  `
  -- Body bytes each node added and removed, written by the node every second (its own row, so
  -- that nodes never wait on each other): their sum is what the cluster's --max-job-bytes budget
  -- is checked against.
  CREATE TABLE beanpole_node_bytes (
    node integer PRIMARY KEY,
    bytes bigint NOT NULL
  );
  -- The safety net for overdue reservations looks for the soonest deadline of any holder.
  CREATE INDEX beanpole_jobs_deadline ON beanpole_jobs (due_at) WHERE state = 1;
  -- A connection's reservations, given back when it closes.
  CREATE INDEX beanpole_jobs_connection ON beanpole_jobs (holder_node, holder_conn) WHERE state = 1;
  -- stats-tube adds up a tube's totals over nodes.
  CREATE INDEX beanpole_tube_totals_tube ON beanpole_tube_totals (tube);
  `,
  `
  -- The Gearman realm: jobs, functions and counts of its own, as a single node keeps Gearman's
  -- jobs in an engine of their own. Its jobs table is the beanstalkd one (same columns, indexes
  -- and vacuum settings) with Gearman's fields beside it.
  CREATE SEQUENCE beanpole_gearman_job_ids;
  CREATE TABLE beanpole_gearman_jobs (
    LIKE beanpole_jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES,
    -- The unique id (null: none); the body still starts with it (gearman/job-body.ts).
    uniq bytea,
    -- A foreground job lives while a client waits on it (beanpole_gearman_waiters).
    foreground boolean NOT NULL DEFAULT false,
    -- What the job's last WORK_STATUS said (GET_STATUS on any node answers it).
    status_numerator bytea,
    status_denominator bytea
  ) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
  );
  ALTER TABLE beanpole_gearman_jobs ALTER COLUMN id SET DEFAULT nextval('beanpole_gearman_job_ids');
  ALTER SEQUENCE beanpole_gearman_job_ids OWNED BY beanpole_gearman_jobs.id;
  -- Unique ids coalesce across nodes: two submits of one function and unique id, on any nodes
  -- at the same instant, make one job.
  CREATE UNIQUE INDEX beanpole_gearman_jobs_unique ON beanpole_gearman_jobs (tube, uniq) WHERE uniq IS NOT NULL;
  CREATE TABLE beanpole_gearman_tube_totals (LIKE beanpole_tube_totals INCLUDING ALL);
  CREATE TABLE beanpole_gearman_tubes (
    LIKE beanpole_tubes INCLUDING ALL,
    -- The admin protocol's maxqueue (null: no limit).
    max_queue bigint
  );
  -- Clients waiting on a job (node, and the connection on that node): WORK_* packets go to
  -- their nodes. A client's rows go when it leaves; all of them go with their job.
  CREATE TABLE beanpole_gearman_waiters (
    job bigint NOT NULL REFERENCES beanpole_gearman_jobs (id) ON DELETE CASCADE,
    node integer NOT NULL,
    conn bigint NOT NULL,
    PRIMARY KEY (job, node, conn)
  );
  CREATE INDEX beanpole_gearman_waiters_client ON beanpole_gearman_waiters (node, conn);
  -- WORK_* packets on their way to a node's waiting clients, in the order the worker sent them.
  CREATE TABLE beanpole_gearman_updates (
    seq bigserial PRIMARY KEY,
    node integer NOT NULL,
    job bigint NOT NULL,
    type smallint NOT NULL,
    data bytea NOT NULL
  );
  CREATE INDEX beanpole_gearman_updates_node ON beanpole_gearman_updates (node, seq);
  `,
  historyMigration(BEANSTALK_REALM) + historyMigration(GEARMAN_REALM),
  `
  -- A reserve's update writes an entry into every index whose predicate the reserved row meets;
  -- the (holder_node, due_at) index of reserved jobs served only the give-back of a node's jobs,
  -- which the (holder_node, holder_conn) index serves as well: one index entry less per reserve.
  DROP INDEX IF EXISTS beanpole_jobs_held;
  DO $$
  DECLARE name text;
  BEGIN
    FOR name IN SELECT indexname FROM pg_indexes
      WHERE schemaname = current_schema() AND tablename = 'beanpole_gearman_jobs' AND indexdef LIKE '%(holder_node, due_at)%'
    LOOP
      EXECUTE format('DROP INDEX IF EXISTS %I', name);
    END LOOP;
  END $$;
  `,
  historyBatchesMigration(BEANSTALK_REALM) + historyBatchesMigration(GEARMAN_REALM),
  `
  -- GET_STATUS_UNIQUE finds a job by its unique id alone, whatever its function.
  CREATE INDEX beanpole_gearman_jobs_uniq ON beanpole_gearman_jobs (uniq) WHERE uniq IS NOT NULL;
  -- maxqueue takes a limit per priority: max_queue is NORMAL's; one number set all three before.
  ALTER TABLE beanpole_gearman_tubes ADD COLUMN max_queue_high bigint, ADD COLUMN max_queue_low bigint;
  UPDATE beanpole_gearman_tubes SET max_queue_high = max_queue, max_queue_low = max_queue;
  `,
  gearmanJobRetriesMigration(),
  `
  -- The dashboard's audit log, shared by the nodes: every change made through the admin API on
  -- any node, newest last. Each insert trims it to the newest rows (cluster-audit.ts), as the
  -- job history is trimmed to its ring.
  CREATE TABLE beanpole_audit (
    seq bigserial PRIMARY KEY,
    at bigint NOT NULL,
    node integer NOT NULL,
    -- A --admin-users name, '--admin-token', or null when the dashboard needs no token.
    username text,
    role text NOT NULL,
    action text NOT NULL,
    target jsonb NOT NULL,
    result jsonb NOT NULL
  ) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);
  `,
  policyMigration(),
];

/**
 * Tube policies (shared/policy.ts), shared by the nodes, in each realm's tubes table: the policy
 * as the API gave it; the rate's token bucket (tokens as of refilled_at, epoch ms), taken from by
 * every node's reserves under the row's lock; and what the policy did (puts the queue cap
 * refused, timeouts the backoff delayed).
 */
function policyMigration(): string {
  return [BEANSTALK_REALM, GEARMAN_REALM]
    .map(
      (realm) => `
  ALTER TABLE ${realm.tables.tubes}
    ADD COLUMN policy jsonb,
    ADD COLUMN tokens double precision NOT NULL DEFAULT 0,
    ADD COLUMN refilled_at bigint NOT NULL DEFAULT 0,
    ADD COLUMN refused_puts bigint NOT NULL DEFAULT 0,
    ADD COLUMN backoffs bigint NOT NULL DEFAULT 0;`,
    )
    .join('\n');
}

/**
 * --gearman-job-retries in a cluster: a Gearman job given back to ready by a statement of a node
 * started with the flag (`beanpole.gearman_job_retries` = N on its connections, pool.ts), at
 * its N-th reserve, is dropped. Every reserve of a Gearman job ends in its result (a delete), a
 * failure (its connection or node gone, its hold run out: a give-back), or an undone reserve
 * (which takes the count back), so that give-back is its N-th failure, whichever of the
 * statements that give jobs back made it. Its history says why (the history trigger records
 * a delete a trigger makes as nothing: this one writes the event), its bytes leave the
 * cluster's count (under node 0, which no node is), and waiting clients learn it is gone as
 * of any job that ends (gearman-hooks.ts, receive).
 */
function gearmanJobRetriesMigration(): string {
  const limit = "COALESCE(NULLIF(current_setting('beanpole.gearman_job_retries', true), '')::bigint, 0)";
  const history = `${GEARMAN_REALM.prefix}history`;
  return `
  CREATE FUNCTION beanpole_gearman_drop_exhausted() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    DELETE FROM beanpole_gearman_jobs WHERE id = NEW.id;
    INSERT INTO beanpole_node_bytes (node, bytes) VALUES (0, -length(NEW.body))
      ON CONFLICT (node) DO UPDATE SET bytes = beanpole_node_bytes.bytes + EXCLUDED.bytes;
    IF current_setting('beanpole.history', true) = 'on' THEN
      INSERT INTO ${history} (job, at, kind, node, conn, note) VALUES (NEW.id,
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint, ${kind('retries-exhausted')}, NULL, 0,
        NEW.reserves || ' ' || CASE WHEN NEW.timeouts > OLD.timeouts THEN 'timeout' ELSE 'disconnect' END);
    END IF;
    RETURN NULL;
  END;
  $$;
  CREATE TRIGGER beanpole_gearman_retries AFTER UPDATE OF state ON beanpole_gearman_jobs
    FOR EACH ROW WHEN (OLD.state = 1 AND NEW.state = 0 AND ${limit} > 0 AND NEW.reserves >= ${limit})
    EXECUTE FUNCTION beanpole_gearman_drop_exhausted();
  ${historyFunction(GEARMAN_REALM)}
  `;
}

/** The schema version this build needs. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings the database to SCHEMA_VERSION. A database newer than this build (another node was
 * upgraded first) is refused: this node could misread what the newer one writes.
 */
export async function migrate(client: pg.ClientBase): Promise<{ from: number; to: number }> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS beanpole_schema (version integer NOT NULL)');
    const { rows } = await client.query<{ version: number }>('SELECT version FROM beanpole_schema');
    const from = rows[0]?.version ?? 0;
    if (from > SCHEMA_VERSION) {
      throw new Error(`the database's schema is version ${from}, newer than this node's ${SCHEMA_VERSION}: upgrade this node`);
    }
    for (let version = from + 1; version <= SCHEMA_VERSION; version++) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version - 1]!);
        if (version === 1 && rows.length === 0) await client.query('INSERT INTO beanpole_schema (version) VALUES (1)');
        else await client.query('UPDATE beanpole_schema SET version = $1', [version]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
    return { from, to: SCHEMA_VERSION };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
  }
}

/** A history kind's code as stored (its index in HISTORY_KINDS, as the in-memory ring keeps it). */
function kind(k: HistoryKind): number {
  return HISTORY_KINDS.indexOf(k);
}

/** The history trigger's function of a realm (historyMigration), made or replaced. */
function historyFunction(realm: Realm): string {
  const history = `${realm.prefix}history`;
  const fn = `${realm.prefix}history_event`;
  const event = (k: HistoryKind, row: 'OLD' | 'NEW', note = "''", holder: 'OLD' | 'NEW' | null = null): string =>
    `INSERT INTO ${history} (job, at, kind, node, conn, note) VALUES (${row}.id, t, ${kind(k)}, ${holder === null ? 'NULL' : `${holder}.holder_node`}, ${holder === null ? '0' : `COALESCE(${holder}.holder_conn, 0)`}, ${note});`;
  return `
  CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    t bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  BEGIN
    IF TG_OP = 'INSERT' THEN
      ${event('put', 'NEW')}
      RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
      -- A delete another trigger makes (--gearman-job-retries) writes its own event.
      IF pg_trigger_depth() > 1 THEN RETURN NULL; END IF;
      IF OLD.state = 1 THEN ${event('delete', 'OLD', "''", 'OLD')} ELSE ${event('delete', 'OLD')} END IF;
      RETURN NULL;
    END IF;
    IF OLD.state <> 1 AND NEW.state <> 1 AND (NEW.body_edits <> OLD.body_edits OR NEW.priority <> OLD.priority
        OR NEW.ttr_ms <> OLD.ttr_ms OR NEW.delay_ms <> OLD.delay_ms) THEN
      ${event(
        'edit',
        'NEW',
        `concat_ws(', ', CASE WHEN NEW.body_edits <> OLD.body_edits THEN 'body' END, CASE WHEN NEW.priority <> OLD.priority THEN 'priority' END,
          CASE WHEN NEW.ttr_ms <> OLD.ttr_ms THEN 'ttr' END, CASE WHEN NEW.delay_ms <> OLD.delay_ms THEN 'delay' END)`,
      )}
    END IF;
    IF NEW.tube <> OLD.tube THEN ${event('move', 'NEW', 'OLD.tube')} END IF;
    IF NEW.reserves > OLD.reserves THEN ${event('reserve', 'NEW', "''", 'NEW')} END IF;
    IF NEW.releases > OLD.releases THEN ${event('release', 'NEW', "''", 'OLD')} END IF;
    IF NEW.timeouts > OLD.timeouts THEN ${event('timeout', 'NEW', "''", 'OLD')} END IF;
    IF NEW.buries > OLD.buries THEN
      IF NEW.bury_cause = 1 THEN ${event('bury', 'NEW', "''", 'OLD')}
      ELSE ${event('dead-letter', 'NEW', "CASE WHEN NEW.bury_cause = 2 THEN 'release' ELSE 'timeout' END")}
      END IF;
    END IF;
    IF NEW.kicks > OLD.kicks THEN ${event('kick', 'NEW')} END IF;
    -- Given back with no command of its holder's: the connection closed, its node left or died,
    -- or a reservation was undone for a client that had stopped waiting.
    IF OLD.state = 1 AND NEW.state <> 1 AND NEW.releases = OLD.releases AND NEW.timeouts = OLD.timeouts
        AND NEW.buries = OLD.buries THEN
      ${event('disconnect', 'NEW', "''", 'OLD')}
    END IF;
    RETURN NULL;
  END;
  $$;
  `;
}

/**
 * The job history ring of a realm (the dashboard's job page): a table of events written by a
 * trigger on the realm's jobs table, so that every change is recorded whichever node, statement
 * or path makes it (a reserve batch, a lease running out, an operator's edit). Only connections
 * that ask for it write (`beanpole.history` = on, set by nodes started with --history-events
 * above 0): the trigger's WHEN clause costs a node without history nothing more. Each node trims
 * the table to its --history-events newest rows every second.
 *
 * What happened is read off the row's old and new values: the counters a command bumps (reserves,
 * releases, timeouts, buries, kicks) and the fields an edit changes. The connection is the
 * holder's (node and that node's connection id); a put records none (the row does not say).
 */
function historyMigration(realm: Realm): string {
  const history = `${realm.prefix}history`;
  const fn = `${realm.prefix}history_event`;
  return `
  CREATE TABLE ${history} (
    seq bigserial PRIMARY KEY,
    job bigint NOT NULL,
    at bigint NOT NULL,
    kind smallint NOT NULL,
    node integer,
    conn bigint NOT NULL DEFAULT 0,
    note text NOT NULL DEFAULT ''
  ) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);
  CREATE INDEX ${history}_job ON ${history} (job, seq);
  ${historyFunction(realm)}
  CREATE TRIGGER ${realm.prefix}history AFTER INSERT OR UPDATE OR DELETE ON ${realm.tables.jobs}
    FOR EACH ROW WHEN (current_setting('beanpole.history', true) = 'on') EXECUTE FUNCTION ${fn}();
  `;
}

/** The sequence that numbers a realm's history events (the `seq` of its history table). */
export function historySequence(realm: Realm): string {
  return `${realm.prefix}history_seq_seq`;
}

/**
 * Migration 6: the events of the hot path's statements, one row per statement. A job's put,
 * reserve and delete written by the row trigger cost PostgreSQL an extra row, two index entries
 * and a trigger call each, about a third of its time per job. The batched put, reserve and
 * delete statements now run where the trigger does not fire (ClusterNode.hotPool) and write one
 * row for all the jobs they changed: their ids (and each one's holder) in arrays, an id range
 * indexed for finding a job's rows. Each event still draws its own number from the history's
 * sequence, so the ring's size and a job's order of events are counted as before.
 */
function historyBatchesMigration(realm: Realm): string {
  const batches = `${realm.prefix}history_batches`;
  return `
  CREATE TABLE ${batches} (
    -- The highest of the numbers its events drew from ${historySequence(realm)}.
    seq bigint PRIMARY KEY,
    at bigint NOT NULL,
    kind smallint NOT NULL,
    jobs bigint[] NOT NULL,
    -- Each job's holder (node and connection), null and 0 for none.
    nodes integer[] NOT NULL,
    conns bigint[] NOT NULL,
    -- From the lowest id in jobs to the highest: a job's rows are those whose span holds it.
    span int8range NOT NULL
  ) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);
  CREATE INDEX ${batches}_span ON ${batches} USING gist (span);
  `;
}
