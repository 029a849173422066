/**
 * The Gearman realm's own statements, beside the ones it shares with the beanstalkd realm
 * (sql.ts over GEARMAN_REALM's tables): submits that coalesce on a unique id, the nodes waiting
 * on a foreground job, and WORK_* packets relayed to them through the database.
 */
import { GEARMAN_REALM, GEARMAN_TABLES } from './realm.js';
import type { Statement } from './sql.js';

const JOBS = GEARMAN_REALM.tables.jobs;
const TOTALS = GEARMAN_REALM.tables.totals;
const TUBES = GEARMAN_REALM.tables.tubes;
const { waiters: WAITERS, updates: UPDATES } = GEARMAN_TABLES;
const s = (name: string, text: string): Statement => ({ name: `${GEARMAN_REALM.prefix}${name}`, text });
/** Nodes that are gone: every one ($1 null), or the one leaving ($1 its id). */
const GONE = `SELECT id FROM beanpole_nodes WHERE gone_at IS NOT NULL AND ($1::integer IS NULL OR id = $1::integer)`;

export const GEARMAN_SQL = {
  /**
   * One submit with a unique id, or a foreground one: the job is made unless one of the same
   * function and unique id exists (the unique index decides, whichever node asks first), and a
   * foreground submit's node is recorded as waiting on it in the same statement, so no WORK_*
   * packet can be sent before the node is known to want it. No row back: a job of that unique id
   * was made by a statement this one could not see yet (ask again).
   * $1 tube, $2 state, $3 priority, $4 delay, $5 TTR, $6 created_at, $7 due_at, $8 body,
   * $9 node, $10 unique id (null: none), $11 foreground, $12 the submitting connection.
   */
  submit: s(
    'submit',
    `WITH made AS (
       INSERT INTO ${JOBS} (tube, state, priority, delay_ms, ttr_ms, created_at, due_at, body, uniq, foreground)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, $11)
       ON CONFLICT (tube, uniq) WHERE uniq IS NOT NULL DO NOTHING
       RETURNING id
     ),
     found AS (
       SELECT id FROM ${JOBS} WHERE $10::bytea IS NOT NULL AND tube = $1 AND uniq = $10 AND NOT EXISTS (SELECT 1 FROM made)
     ),
     job AS (SELECT id, true AS created FROM made UNION ALL SELECT id, false FROM found),
     totals AS (
       INSERT INTO ${TOTALS} (node, tube, total_jobs) SELECT $9, $1, 1 FROM made
       ON CONFLICT (node, tube) DO UPDATE SET total_jobs = ${TOTALS}.total_jobs + 1
     ),
     waiting AS (
       INSERT INTO ${WAITERS} (job, node, conn) SELECT id, $9, $12 FROM job WHERE $11::boolean
       ON CONFLICT DO NOTHING
     )
     SELECT id, created FROM job`,
  ),

  /**
   * A submit under a queue limit (`maxqueue`), taken in one transaction with `submit`: the
   * function's lock (so that submits on every node count and add one at a time), then whether a
   * job of the unique id is there to join (a join is never refused), then the queued jobs,
   * counted up to the limit only. $1 tube, $2 unique id (null: none), $3 the limit.
   */
  lockFunction: s('lock_function', `SELECT pg_advisory_xact_lock(hashtext('${JOBS}'), hashtext($1))`),
  queuedUpTo: s(
    'queued_up_to',
    `SELECT EXISTS (SELECT 1 FROM ${JOBS} WHERE $2::bytea IS NOT NULL AND tube = $1 AND uniq = $2) AS joins,
            (SELECT count(*)::integer FROM (SELECT 1 FROM ${JOBS} WHERE tube = $1 AND state IN (0, 2) LIMIT $3) q) AS queued`,
  ),

  /**
   * WORK_* packets of one batch, in the order workers sent them, for every other node that waits
   * on their jobs; WORK_STATUS's numbers are also kept on the job. Answers the nodes to tell.
   * $1 jobs, $2 packet types, $3 packet data, $4-$6 statuses (job, numerator, denominator), $7 this node.
   */
  relay: s(
    'relay',
    `WITH statuses AS (
       UPDATE ${JOBS} j SET status_numerator = st.numerator, status_denominator = st.denominator
       FROM unnest($4::bigint[], $5::bytea[], $6::bytea[]) AS st(id, numerator, denominator)
       WHERE j.id = st.id
     ),
     sent AS (
       INSERT INTO ${UPDATES} (node, job, type, data)
       SELECT w.node, p.job, p.type, p.data
       FROM unnest($1::bigint[], $2::smallint[], $3::bytea[]) WITH ORDINALITY AS p(job, type, data, ord)
       JOIN (SELECT DISTINCT job, node FROM ${WAITERS} WHERE job = ANY($1::bigint[]) AND node <> $7) w ON w.job = p.job
       ORDER BY p.ord, w.node
       RETURNING node
     )
     SELECT DISTINCT node FROM sent`,
  ),

  /**
   * Clients' deletes of one turn (as sql.ts's deleteMany, $1-$5) with the final packets of the
   * jobs they finish ($6 jobs, $7 types, $8 data; $9 this node): a packet goes to the waiting
   * nodes in the statement that ends its job, so no client anywhere hears of the result while
   * the job still shows as running. Rows: each job deleted, then each node to tell (node set).
   * Runs after lockJobs in one transaction: its snapshot then has every waiter committed before.
   */
  finish: s(
    'finish',
    `WITH gone AS (
       DELETE FROM ${JOBS} j
       USING unnest($1::bigint[], $2::integer[], $3::bigint[], $4::integer[], $5::bigint[]) AS t(id, node, conn, reserves, client)
       WHERE j.id = t.id AND (j.state <> 1 OR (j.holder_node = t.node AND j.holder_conn = t.conn AND j.reserves = t.reserves))
       RETURNING j.id, j.tube, t.client, length(j.body) AS bytes
     ),
     -- The waiters' rows go with their jobs only once the statement ends: still read here.
     sent AS (
       INSERT INTO ${UPDATES} (node, job, type, data)
       SELECT w.node, p.job, p.type, p.data
       FROM unnest($6::bigint[], $7::smallint[], $8::bytea[]) WITH ORDINALITY AS p(job, type, data, ord)
       JOIN (SELECT DISTINCT job, node FROM ${WAITERS} WHERE job = ANY($6::bigint[]) AND node <> $9) w ON w.job = p.job
       WHERE p.job IN (SELECT id FROM gone)
       ORDER BY p.ord, w.node
       RETURNING node
     )
     SELECT id, tube, client, bytes, NULL::integer AS node FROM gone
     UNION ALL
     (SELECT DISTINCT NULL::bigint, NULL::text, NULL::bigint, NULL::integer, node FROM sent)`,
  ),

  /**
   * The packets waiting for this node ($1), taken, and which of the jobs its clients wait on
   * ($2) are gone: in one statement, so a job seen gone has had every packet sent before its
   * end taken here first.
   */
  receive: s(
    'receive',
    `WITH taken AS (DELETE FROM ${UPDATES} WHERE node = $1 RETURNING seq, job, type, data)
     SELECT seq, job, type, data FROM taken
     UNION ALL
     SELECT NULL, w.id, NULL, NULL FROM unnest($2::bigint[]) AS w(id)
     WHERE NOT EXISTS (SELECT 1 FROM ${JOBS} j WHERE j.id = w.id)`,
  ),

  /**
   * Locks jobs $1 before a statement that reads who waits on them (finish, leave): a waiter row
   * being added (its foreign key check) is committed first and seen, or fails after (the job
   * is gone, and its submit makes a new one).
   */
  lockJobs: s('lock_jobs', `SELECT id FROM ${JOBS} WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`),
  /** The jobs connection $2 of node $1 waits on. */
  waitedOn: s('waited_on', `SELECT job FROM ${WAITERS} WHERE node = $1 AND conn = $2`),

  /**
   * Connection $2 of node $1 left: it waits on nothing more; of the jobs it waited on ($3,
   * locked), foreground ones that nobody else waits on and no worker runs are dropped.
   */
  leaveConnection: s(
    'leave_connection',
    `WITH left_jobs AS (DELETE FROM ${WAITERS} WHERE node = $1 AND conn = $2 AND job = ANY($3::bigint[]) RETURNING job)
     DELETE FROM ${JOBS} j
     WHERE j.id IN (SELECT job FROM left_jobs) AND j.foreground AND j.state <> 1
       AND NOT EXISTS (SELECT 1 FROM ${WAITERS} w WHERE w.job = j.id AND NOT (w.node = $1 AND w.conn = $2))
     RETURNING j.id, length(j.body) AS bytes`,
  ),

  /**
   * Gone nodes no longer wait on anything, and packets for them go: their clients' foreground
   * jobs that nobody else waits on and no worker runs are dropped. $1 as in GONE.
   */
  reclaimWaiters: s(
    'reclaim_waiters',
    `WITH gone AS (${GONE}),
     packets AS (DELETE FROM ${UPDATES} WHERE node IN (SELECT id FROM gone)),
     left_jobs AS (DELETE FROM ${WAITERS} WHERE node IN (SELECT id FROM gone) RETURNING job)
     DELETE FROM ${JOBS} j
     WHERE j.id IN (SELECT job FROM left_jobs) AND j.foreground AND j.state <> 1
       AND NOT EXISTS (SELECT 1 FROM ${WAITERS} w WHERE w.job = j.id AND w.node NOT IN (SELECT id FROM gone))
     RETURNING length(j.body) AS bytes`,
  ),

  /** GET_STATUS: the job's state and last WORK_STATUS ($1 id). */
  jobStatus: s('job_status', `SELECT state, status_numerator, status_denominator FROM ${JOBS} WHERE id = $1`),
  statuses: s(
    'statuses',
    `SELECT id, status_numerator, status_denominator FROM ${JOBS} WHERE id = ANY($1::bigint[]) AND status_numerator IS NOT NULL`,
  ),

  /**
   * GET_STATUS_UNIQUE: the oldest job of unique id $1, whatever its function, its last
   * WORK_STATUS and how many clients (on any node) wait on it.
   */
  uniqueStatus: s(
    'unique_status',
    `SELECT j.state, j.status_numerator, j.status_denominator,
       (SELECT count(*) FROM ${WAITERS} w WHERE w.job = j.id)::integer AS clients
     FROM ${JOBS} j WHERE j.uniq = $1 ORDER BY j.id LIMIT 1`,
  ),

  maxQueues: s(
    'max_queues',
    `SELECT name, max_queue_high, max_queue, max_queue_low FROM ${TUBES}
     WHERE max_queue IS NOT NULL OR max_queue_high IS NOT NULL OR max_queue_low IS NOT NULL`,
  ),
  /** $1 function; $2-$4 the HIGH, NORMAL and LOW limits (null: none). */
  setMaxQueue: s(
    'set_max_queue',
    `INSERT INTO ${TUBES} (name, max_queue_high, max_queue, max_queue_low) VALUES ($1, $2, $3, $4)
     ON CONFLICT (name) DO UPDATE
     SET max_queue_high = EXCLUDED.max_queue_high, max_queue = EXCLUDED.max_queue, max_queue_low = EXCLUDED.max_queue_low`,
  ),
} as const;
