/**
 * The statements of the cluster store, each named so that node-postgres prepares it once per
 * connection. Job states are schema.ts's STATE codes: 0 ready, 1 reserved, 2 delayed, 3 buried.
 *
 * The reservation token is (holder_node, holder_conn, reserves): `reserves` grows with every
 * reserve of the job, so a token names one reservation, and a statement that needs the
 * reservation still to hold matches all three.
 */
import { HISTORY_KINDS, type HistoryKind } from '../../shared/history.js';
import { URGENT_BELOW } from '../../shared/limits.js';
import { JOB_COLUMNS } from './job-row.js';
import { GEARMAN_TABLES, type Realm } from './realm.js';
import { historySequence } from './schema.js';

export interface Statement {
  name: string;
  text: string;
}

/**
 * The end of a reserve statement (reserveMany, policy-sql.ts's reserveGated): the jobs a `picked`
 * CTE ranked (id, rn) go to the clients in the order they asked ($3 connections, $5 holds, $2
 * node, $4 now), in a `changed` CTE that returns each client's rank and job.
 */
export function reservePicked(realm: Realm): string {
  return `who AS (SELECT conn, hold, rn FROM unnest($3::bigint[], $5::bigint[]) WITH ORDINALITY AS c(conn, hold, rn)),
     changed AS (
       UPDATE ${realm.tables.jobs} j
       SET state = 1, holder_node = $2, holder_conn = who.conn, reserves = j.reserves + 1,
           due_at = $4::bigint + CASE WHEN who.hold < 0 THEN j.ttr_ms ELSE who.hold END
       FROM picked JOIN who USING (rn)
       WHERE j.id = picked.id
       RETURNING who.rn, j.id, j.tube, j.reserves, j.due_at, j.ttr_ms, j.body, ${takenColumn(realm)},
         j.holder_node AS node, j.holder_conn AS conn
     )`;
}

/**
 * What a reserve answers beside the job (of a row `j`): in the Gearman realm, whether it is a
 * foreground job nobody waits for any more (the worker drops it instead of running it).
 */
export function takenColumn(realm: Realm): string {
  return realm.name === 'gearman'
    ? `j.foreground AND NOT EXISTS (SELECT 1 FROM ${GEARMAN_TABLES.waiters} w WHERE w.job = j.id) AS abandoned`
    : 'false AS abandoned';
}

/** The statements of one realm (realm.ts): the same text over that realm's tables. */
export function clusterSql(realm: Realm) {
  const t = realm.tables;
  const s = (name: string, text: string): Statement => ({ name: `${realm.prefix}${name}`, text });

  /** The dead-letter limit of the job's tube (`j`), or the node's default ($DEFAULT). */
  const limitOf = (param: string): string =>
    `COALESCE((SELECT t.dead_letter_after FROM ${t.tubes} t WHERE t.name = j.tube), ${param})`;
  /** True when this strike reaches the limit: the job is buried instead. */
  const reachesLimit = (param: string): string => `(${limitOf(param)} > 0 AND j.strikes + 1 >= ${limitOf(param)})`;
  const TOKEN = 'j.state = 1 AND j.holder_node = $2 AND j.holder_conn = $3 AND j.reserves = $4';
  /**
   * This node ($2) is still a member: a node whose lease ran out (its reservations were given
   * back) takes no job under its old id before it notices and registers again.
   */
  const NODE_ALIVE = 'EXISTS (SELECT 1 FROM beanpole_nodes n WHERE n.id = $2 AND n.gone_at IS NULL)';
  /** Jobs of tube $1 in `state` after the cursor ($2 the order key, $3 the id), $4 of them, ordered by `key` then id. */
  const page = (name: string, state: number, key: string): Statement =>
    s(`page_${name}`, `SELECT ${JOB_COLUMNS} FROM ${t.jobs} WHERE tube = $1 AND state = ${state} AND (${key}, id) > ($2, $3) ORDER BY ${key}, id LIMIT $4`);

  /** Jobs by state, the urgent ready ones apart: stats and stats-tube. */
  const COUNTS = `count(*) FILTER (WHERE state = 0 AND priority < ${URGENT_BELOW}) AS urgent,
         count(*) FILTER (WHERE state = 0) AS ready,
         count(*) FILTER (WHERE state = 1) AS reserved,
         count(*) FILTER (WHERE state = 2) AS delayed,
         count(*) FILTER (WHERE state = 3) AS buried`;
  const TAKEN = takenColumn(realm);
  /** A tubes row's columns (tube-policies.ts's TubeRow): its pause, its own settings, its policy. */
  const TUBE_ROW = 'pause_ms, unpause_at, dead_letter_after, policy, tokens, refilled_at, refused_puts, backoffs';
  /** Candidates per tube beyond those wanted, for rows another reserve has locked. */
  const LOCK_MARGIN = 16;
  /**
   * A strike against the dead-letter rule ends a reservation (a release, or a TTR that ran out):
   * the columns for a job the rule buries (with `cause`, a BURY_CAUSES index), or else for one that
   * goes to `otherState` (with due_at `otherDue`). `limit` is the node's default's parameter.
   */
  const strike = (limit: string, cause: number, otherState: string, otherDue: string): string => {
    const buried = reachesLimit(limit);
    return `strikes = j.strikes + 1, holder_node = NULL, holder_conn = NULL,
           state = CASE WHEN ${buried} THEN 3 ELSE ${otherState} END,
           due_at = CASE WHEN ${buried} THEN 0 ELSE ${otherDue} END,
           buries = j.buries + CASE WHEN ${buried} THEN 1 ELSE 0 END,
           bury_cause = CASE WHEN ${buried} THEN ${cause} ELSE j.bury_cause END,
           bury_order = CASE WHEN ${buried} THEN nextval('beanpole_bury_order') ELSE j.bury_order END`;
  };


  /**
   * The history of the jobs the statement's `changed` CTE returns (id, and `node` and `conn`,
   * the holder, for each), written by the statement itself as one row of the realm's
   * history_batches (schema.ts, migration 6). Each job's event draws its own number from the
   * history's sequence, so the ring counts events as the trigger's rows do.
   */
  const record = (k: HistoryKind): string =>
    `, recorded AS (
       INSERT INTO ${realm.prefix}history_batches (seq, at, kind, jobs, nodes, conns, span)
       SELECT max(n), (extract(epoch FROM clock_timestamp()) * 1000)::bigint, ${HISTORY_KINDS.indexOf(k)},
         array_agg(id ORDER BY id), array_agg(node ORDER BY id), array_agg(conn ORDER BY id), int8range(min(id), max(id), '[]')
       FROM (SELECT id, node, conn, nextval('${historySequence(realm)}') AS n FROM changed) c
       HAVING count(*) > 0
     )`;

  /**
   * A job's delay after a timeout under its tube's timeout backoff (null: no backoff): the
   * formula of shared/policy.ts's backoffDelayMs, with the timeouts before this one as exponent.
   */
  const backoffMs = `(SELECT round(w.whole - w.whole * (x.b->>'jitter')::float8 * random())::bigint
       FROM (SELECT p.policy->'timeoutBackoff' AS b FROM ${t.tubes} p
             WHERE p.name = j.tube AND jsonb_typeof(p.policy->'timeoutBackoff') = 'object') x
       CROSS JOIN LATERAL (SELECT LEAST((x.b->>'maxMs')::float8, (x.b->>'baseMs')::float8 * power((x.b->>'factor')::float8, j.timeouts)) AS whole) w)`;

  /**
   * Reservations whose TTR ran out (the jobs `which` selects and locks): back to ready, buried
   * by the dead-letter rule (`limit`, the node's default), or delayed by the tube's timeout
   * backoff from `now`, which the tube counts. Returns each job's tube, state and due time.
   */
  const expire = (which: string, limit: string, now: string): string =>
    `WITH target AS (
       SELECT j.id, ${backoffMs} AS backoff FROM (${which}) picked JOIN ${t.jobs} j USING (id)
     ),
     changed AS (
       UPDATE ${t.jobs} j
       SET timeouts = j.timeouts + 1,
           delay_ms = CASE WHEN target.backoff IS NULL OR ${reachesLimit(`${limit}::bigint`)} THEN j.delay_ms ELSE target.backoff END,
           ${strike(`${limit}::bigint`, 3, 'CASE WHEN target.backoff IS NULL THEN 0 ELSE 2 END', `CASE WHEN target.backoff IS NULL THEN 0 ELSE ${now}::bigint + target.backoff END`)}
       FROM target WHERE j.id = target.id
       RETURNING j.tube, j.state, j.due_at
     ),
     counted AS (
       UPDATE ${t.tubes} p SET backoffs = p.backoffs + c.n
       FROM (SELECT tube, count(*) AS n FROM changed WHERE state = 2 GROUP BY tube) c WHERE p.name = c.tube
     )
     SELECT tube, state, due_at FROM changed`;

  /**
   * `guarded`: a batch that puts into a tube with a queue cap puts nothing and returns no row, so
   * a node that has not heard of a new cap yet cannot go round it (PutBatch then reads the
   * policies and puts those jobs under the cap, policy-sql.ts); the put under the cap itself is
   * not guarded.
   */
  const put = (recorded: boolean, guarded: boolean): string => {
    const capped = guarded
      ? `capped AS (
       SELECT 1 FROM ${t.tubes} p WHERE p.name = ANY($1::text[]) AND jsonb_typeof(p.policy->'queueCap') = 'number' LIMIT 1
     ),
     `
      : '';
    const uncapped = guarded ? 'WHERE NOT EXISTS (SELECT 1 FROM capped)' : '';
    return `WITH ${capped}totals AS (
       INSERT INTO ${t.totals} (node, tube, total_jobs)
       SELECT $9, t, count(*) FROM unnest($1::text[]) AS t ${uncapped} GROUP BY t
       ON CONFLICT (node, tube) DO UPDATE SET total_jobs = ${t.totals}.total_jobs + EXCLUDED.total_jobs
     ),
     changed AS (
       INSERT INTO ${t.jobs} (tube, state, priority, delay_ms, ttr_ms, created_at, due_at, body)
       SELECT * FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bytea[]) ${uncapped}
       RETURNING id, NULL::integer AS node, 0::bigint AS conn
     )${recorded ? record('put') : ''}
     SELECT id FROM changed`;
  };

  const reserveMany = (recorded: boolean): string =>
    `WITH heads AS (
       SELECT h.id FROM unnest($1::text[]) AS w(tube)
       CROSS JOIN LATERAL (
         SELECT id FROM ${t.jobs}
         WHERE tube = w.tube AND state = 0
         ORDER BY priority, id LIMIT $6::integer + ${LOCK_MARGIN}
       ) h
       -- A paused tube is passed by; so is one with a cap or a rate, which only policy-sql.ts's
       -- reserveGated serves (a node that does not know of a new policy yet cannot go round it).
       WHERE NOT EXISTS (
           SELECT 1 FROM ${t.tubes} p WHERE p.name = w.tube
             AND (p.unpause_at > $4::bigint OR jsonb_typeof(p.policy->'concurrency') = 'number' OR jsonb_typeof(p.policy->'rate') = 'object')
         )
         AND ${NODE_ALIVE}
     ),
     -- Only the rows taken are locked: rows locked and left would make other nodes' reserves
     -- skip jobs nobody takes. Rows another reserve holds are skipped; a few spare candidates
     -- per tube stand in for them.
     locked AS (
       SELECT j.id, j.priority FROM ${t.jobs} j
       WHERE j.id IN (SELECT id FROM heads) AND j.state = 0
       ORDER BY j.priority, j.id LIMIT $6
       FOR UPDATE SKIP LOCKED
     ),
     picked AS (SELECT id, row_number() OVER (ORDER BY priority, id) AS rn FROM locked),
     ${reservePicked(realm)}${recorded ? record('reserve') : ''}
     SELECT rn, id, tube, reserves, due_at, ttr_ms, body, abandoned FROM changed`;

  const deleteMany = (recorded: boolean): string =>
    `WITH changed AS (
       DELETE FROM ${t.jobs} j
       USING unnest($1::bigint[], $2::integer[], $3::bigint[], $4::integer[], $5::bigint[]) AS t(id, node, conn, reserves, client)
       WHERE j.id = t.id AND (j.state <> 1 OR (j.holder_node = t.node AND j.holder_conn = t.conn AND j.reserves = t.reserves))
       RETURNING j.id, j.tube, t.client, length(j.body) AS bytes,
         CASE WHEN j.state = 1 THEN j.holder_node END AS node, CASE WHEN j.state = 1 THEN COALESCE(j.holder_conn, 0) ELSE 0 END AS conn
     )${recorded ? record('delete') : ''}
     SELECT id, tube, client, bytes FROM changed`;

  return {
    /**
     * Many puts in one statement (those of every client in the same turn of the event loop): ids
     * come from the sequence in array order, so sorting the returned ids gives each put its own.
     * $1 tubes, $2 states, $3 priorities, $4 delays, $5 TTRs, $6 created_at, $7 due_at, $8 bodies, $9 node.
     */
    put: s('put', put(false, true)),
    /** put, recording the puts in the history itself (ClusterNode.hotPool). */
    putRecorded: s('put_recorded', put(true, true)),
    /** put, for one job under its tube's queue cap (the caller holds the tube's lock and counted). */
    putUnderCap: s('put_under_cap', put(false, false)),

    /** Draws $1 ids from the sequence unused (puts whose body never came, as beanstalkd uses them up). */
    useUpIds: s('use_up_ids', `SELECT nextval('${t.ids}') FROM generate_series(1, $1::integer)`),

    /**
     * Reserves for several clients of this node at once (one turn's reserves over the same watched
     * tubes): each tube's first $6 ready jobs are probed and locked, the best $6 of them go to the
     * clients in the order they asked. $1 tubes, $2 node, $3 connections, $4 now, $5 holds (ms;
     * -1: the job's TTR), $6 how many clients.
     */
    reserveMany: s('reserve_many', reserveMany(false)),
    /** reserveMany, recording the reserves in the history itself (ClusterNode.hotPool). */
    reserveManyRecorded: s('reserve_many_recorded', reserveMany(true)),

    /**
     * Clients' deletes of one turn: each deletes its job unless another reservation holds it.
     * $1 ids, $2-$4 the token each client holds (-1s when none), $5 the clients (of two clients
     * deleting one job in the same turn, one gets it).
     */
    deleteMany: s('delete_many', deleteMany(false)),
    /** deleteMany, recording the deletes in the history itself (ClusterNode.hotPool). */
    deleteManyRecorded: s('delete_many_recorded', deleteMany(true)),

    /** reserve-job: any job not reserved, whatever its state. $1 id, $2 node, $3 connection, $4 now, $5 hold. */
    reserveJob: s(
      'reserve_job',
      `UPDATE ${t.jobs} j
       SET state = 1, holder_node = $2, holder_conn = $3, reserves = j.reserves + 1,
           due_at = $4::bigint + CASE WHEN $5::bigint < 0 THEN j.ttr_ms ELSE $5::bigint END
       WHERE j.id = $1 AND j.state <> 1 AND ${NODE_ALIVE}
       RETURNING j.id, j.tube, j.reserves, j.due_at, j.ttr_ms, j.body, ${TAKEN}`,
    ),

    /** True when one of the tubes ($1) has a ready job, paused or not (the DEADLINE_SOON check). */
    anyReady: s('any_ready', `SELECT EXISTS (SELECT 1 FROM ${t.jobs} WHERE tube = ANY($1::text[]) AND state = 0) AS any`),

    /** The dashboard's delete: never a reserved job. */
    deleteUnheld: s('delete_unheld', `DELETE FROM ${t.jobs} WHERE id = $1 AND state <> 1 RETURNING tube, state, length(body) AS bytes`),

    /**
     * $1 id, $2-$4 token, $5 priority, $6 delay, $7 now, $8 the node's dead-letter default. Returns
     * the state it went to: 3 when the dead-letter rule buried it.
     */
    release: s(
      'release',
      `UPDATE ${t.jobs} j
       SET priority = $5::bigint, delay_ms = $6::bigint, releases = j.releases + 1,
           ${strike('$8::bigint', 2, 'CASE WHEN $6::bigint > 0 THEN 2 ELSE 0 END', 'CASE WHEN $6::bigint > 0 THEN $7::bigint + $6::bigint ELSE 0 END')}
       WHERE j.id = $1 AND ${TOKEN}
       RETURNING j.tube, j.state, j.due_at`,
    ),

    /** $1 id, $2-$4 token, $5 priority. */
    bury: s(
      'bury',
      `UPDATE ${t.jobs} j
       SET state = 3, priority = $5, due_at = 0, holder_node = NULL, holder_conn = NULL,
           buries = j.buries + 1, bury_cause = 1, bury_order = nextval('beanpole_bury_order')
       WHERE j.id = $1 AND ${TOKEN}
       RETURNING j.tube`,
    ),

    /** $1 id, $2-$4 token, $5 new deadline (null: now + the job's TTR). */
    touch: s(
      'touch',
      `UPDATE ${t.jobs} j SET due_at = COALESCE($5::bigint, $6::bigint + j.ttr_ms)
       WHERE j.id = $1 AND ${TOKEN}
       RETURNING j.due_at`,
    ),

    /**
     * A reservation whose TTR ran out goes back to ready (or is buried by the dead-letter rule):
     * only once its deadline has passed in the database too ($6 now), so a touch that committed
     * first wins. $1 id, $2-$4 token, $5 the node's dead-letter default.
     */
    expire: s('expire', expire(`SELECT j.id FROM ${t.jobs} j WHERE j.id = $1 AND ${TOKEN} AND j.due_at < $6::bigint FOR UPDATE`, '$5', '$6')),

    /**
     * Reservations past their deadline by more than $2 ms whoever holds them (a node that stopped
     * answering but whose lease has not run out yet): the safety net behind the holder's own timer.
     * $1 now, $2 grace, $3 dead-letter default.
     */
    expireOverdue: s(
      'expire_overdue',
      expire(`SELECT j.id FROM ${t.jobs} j WHERE j.state = 1 AND j.due_at < $1::bigint - $2::bigint ORDER BY j.due_at LIMIT 1000 FOR UPDATE SKIP LOCKED`, '$3', '$1'),
    ),

    /** A job reserved for a client that stopped waiting meanwhile: as if it had never been reserved. $1 id, $2-$4 token. */
    unreserve: s(
      'unreserve',
      `UPDATE ${t.jobs} j SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0, reserves = j.reserves - 1
       WHERE j.id = $1 AND ${TOKEN} RETURNING j.tube`,
    ),

    /** A connection ends: what it holds is ready again (no strike, as in beanstalkd). $1 node, $2 connection. */
    releaseConnection: s(
      'release_connection',
      `UPDATE ${t.jobs} SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0
       WHERE state = 1 AND holder_node = $1 AND holder_conn = $2
       RETURNING tube`,
    ),

    /**
     * What nodes that are gone held is ready again, as a disconnect would make it (no strike).
     * Each node runs it every heartbeat: its conditions are the reserved jobs' connection
     * index's, so it reads that small index, not every job.
     */
    reclaimGone: s(
      'reclaim_gone',
      `UPDATE ${t.jobs} SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0
       WHERE state = 1 AND holder_node IN (SELECT id FROM beanpole_nodes WHERE gone_at IS NOT NULL)
       RETURNING tube`,
    ),
    /** The same for one node that leaves ($1). */
    reclaimNode: s(
      'reclaim_node',
      `UPDATE ${t.jobs} SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0
       WHERE state = 1 AND holder_node = $1
       RETURNING tube`,
    ),

    /** Jobs ever put by nodes gone before $1 are counted under node 0 (which no node uses): their rows can go. */
    foldTotals: s(
      'fold_totals',
      `WITH gone AS (
         DELETE FROM ${t.totals} WHERE node IN (SELECT id FROM beanpole_nodes WHERE gone_at IS NOT NULL AND gone_at < $1)
         RETURNING tube, total_jobs
       )
       INSERT INTO ${t.totals} (node, tube, total_jobs) SELECT 0, tube, sum(total_jobs) FROM gone GROUP BY tube
       ON CONFLICT (node, tube) DO UPDATE SET total_jobs = ${t.totals}.total_jobs + EXCLUDED.total_jobs`,
    ),

    /** Delayed jobs whose time has come ($1 now), a thousand at a time. */
    promote: s(
      'promote',
      `UPDATE ${t.jobs} SET state = 0, due_at = 0
       WHERE id IN (SELECT id FROM ${t.jobs} WHERE state = 2 AND due_at <= $1 ORDER BY due_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
       RETURNING tube`,
    ),

    /** When the next delayed job is due (null: none). */
    nextDue: s('next_due', `SELECT (SELECT due_at FROM ${t.jobs} WHERE state = 2 ORDER BY due_at LIMIT 1) AS delayed`),

    kickJob: s(
      'kick_job',
      `UPDATE ${t.jobs} SET state = 0, due_at = 0, kicks = kicks + 1, strikes = 0, bury_cause = 0
       WHERE id = $1 AND state IN (2, 3)
       RETURNING ${JOB_COLUMNS}`,
    ),

    /** Up to $2 buried jobs of tube $1, oldest burial first. */
    kickBuried: s(
      'kick_buried',
      `UPDATE ${t.jobs} SET state = 0, kicks = kicks + 1, strikes = 0, bury_cause = 0
       WHERE id IN (SELECT id FROM ${t.jobs} WHERE tube = $1 AND state = 3 ORDER BY bury_order LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id`,
    ),

    /** Up to $2 delayed jobs of tube $1, soonest first. */
    kickDelayed: s(
      'kick_delayed',
      `UPDATE ${t.jobs} SET state = 0, due_at = 0, kicks = kicks + 1, strikes = 0, bury_cause = 0
       WHERE id IN (SELECT id FROM ${t.jobs} WHERE tube = $1 AND state = 2 ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id`,
    ),

    hasBuried: s('has_buried', `SELECT EXISTS (SELECT 1 FROM ${t.jobs} WHERE tube = $1 AND state = 3) AS any`),

    peek: s('peek', `SELECT id, tube, body FROM ${t.jobs} WHERE id = $1`),
    job: s('job', `SELECT ${JOB_COLUMNS} FROM ${t.jobs} WHERE id = $1`),
    jobs: s('jobs', `SELECT ${JOB_COLUMNS} FROM ${t.jobs} WHERE id = ANY($1::bigint[])`),
    peekReady: s('peek_ready', `SELECT id, tube, body FROM ${t.jobs} WHERE tube = $1 AND state = 0 ORDER BY priority, id LIMIT 1`),
    peekDelayed: s('peek_delayed', `SELECT id, tube, body FROM ${t.jobs} WHERE tube = $1 AND state = 2 ORDER BY due_at, id LIMIT 1`),
    peekBuried: s('peek_buried', `SELECT id, tube, body FROM ${t.jobs} WHERE tube = $1 AND state = 3 ORDER BY bury_order LIMIT 1`),

    /** Every tube that has a job: a skip scan of the (tube, state) index, one probe per tube. */
    tubesWithJobs: s(
      'tubes_with_jobs',
      `WITH RECURSIVE t AS (
         (SELECT tube FROM ${t.jobs} ORDER BY tube LIMIT 1)
         UNION ALL
         SELECT (SELECT tube FROM ${t.jobs} WHERE tube > t.tube ORDER BY tube LIMIT 1) FROM t WHERE t.tube IS NOT NULL
       )
       SELECT tube FROM t WHERE tube IS NOT NULL`,
    ),

    /** Counts of one tube ($1) by state, the urgent ready ones apart, with its pause and settings. */
    tubeCounts: s(
      'tube_counts',
      `SELECT
         ${COUNTS},
         (SELECT created_at FROM ${t.jobs} WHERE tube = $1 AND state = 0 ORDER BY priority, id LIMIT 1) AS next_ready_created_at,
         (SELECT COALESCE(sum(total_jobs), 0)::bigint FROM ${t.totals} WHERE tube = $1) AS total_jobs,
         (SELECT row_to_json(p) FROM (SELECT ${TUBE_ROW} FROM ${t.tubes} WHERE name = $1) p) AS tube_row
       FROM ${t.jobs} WHERE tube = $1`,
    ),

    /** Counts of every tube by state (the dashboard's list): one pass over the (tube, state) index. */
    allTubeCounts: s(
      'all_tube_counts',
      `SELECT tube,
         ${COUNTS}
       FROM ${t.jobs} GROUP BY tube`,
    ),
    /** Each listed tube's next ready job's put time ($1 tubes): one probe of its queue head. */
    nextReadyOf: s(
      'next_ready_of',
      `SELECT w.tube, h.created_at FROM unnest($1::text[]) AS w(tube)
       CROSS JOIN LATERAL (SELECT created_at FROM ${t.jobs} WHERE tube = w.tube AND state = 0 ORDER BY priority, id LIMIT 1) h`,
    ),
    /** Per tube: its oldest ready job's put time, and reservations with less than $2 of their TTR left at $1. */
    readyAges: s(
      'ready_ages',
      `SELECT tube,
         min(created_at) FILTER (WHERE state = 0) AS oldest_ready,
         count(*) FILTER (WHERE state = 1 AND due_at - $1::bigint < ttr_ms * $2::float8) AS near_ttr
       FROM ${t.jobs} WHERE state IN (0, 1) GROUP BY tube`,
    ),
    allTubeTotals: s('all_tube_totals', `SELECT tube, sum(total_jobs)::bigint AS total_jobs FROM ${t.totals} GROUP BY tube`),
    allTubeRows: s('all_tube_rows', `SELECT name, ${TUBE_ROW} FROM ${t.tubes}`),

    /** The server's job counts, and the jobs ever put (cluster-wide). */
    serverCounts: s(
      'server_counts',
      `SELECT
         ${COUNTS},
         (SELECT COALESCE(sum(total_jobs), 0)::bigint FROM ${t.totals}) AS total_jobs
       FROM ${t.jobs}`,
    ),

    pauseTube: s(
      'pause_tube',
      `INSERT INTO ${t.tubes} (name, pause_ms, unpause_at) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET pause_ms = EXCLUDED.pause_ms, unpause_at = EXCLUDED.unpause_at`,
    ),
    tubeSettings: s('tube_settings', `SELECT dead_letter_after FROM ${t.tubes} WHERE name = $1`),
    setTubeSettings: s(
      'set_tube_settings',
      `INSERT INTO ${t.tubes} (name, dead_letter_after) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET dead_letter_after = EXCLUDED.dead_letter_after`,
    ),

    /** The dashboard's edit of a job no worker holds. $1 id, then each field or null to keep it; $7 now. */
    edit: s(
      'edit',
      `UPDATE ${t.jobs} j SET
         body = COALESCE($2, j.body),
         body_edits = j.body_edits + CASE WHEN $2::bytea IS NULL THEN 0 ELSE 1 END,
         priority = COALESCE($3::bigint, j.priority),
         ttr_ms = COALESCE($4::bigint, j.ttr_ms),
         tube = COALESCE($6, j.tube),
         delay_ms = COALESCE($5::bigint, j.delay_ms),
         state = CASE WHEN $5::bigint IS NULL OR j.state = 3 THEN j.state WHEN $5::bigint > 0 THEN 2 ELSE 0 END,
         due_at = CASE WHEN $5::bigint IS NULL OR j.state = 3 THEN j.due_at WHEN $5::bigint > 0 THEN $7::bigint + $5::bigint ELSE 0 END
       WHERE j.id = $1 AND j.state <> 1
       RETURNING ${JOB_COLUMNS}`,
    ),

    /** A page of a tube's jobs in one state, in queue order, after a cursor (keyset pagination). */
    pageReady: page('ready', 0, 'priority'),
    pageDelayed: page('delayed', 2, 'due_at'),
    pageBuried: page('buried', 3, 'bury_order'),
    pageReserved: page('reserved', 1, 'due_at'),
    /** Jobs after id $1, by id (a walk over every job, a slice at a time). */
    scan: s('scan', `SELECT ${JOB_COLUMNS} FROM ${t.jobs} WHERE id > $1 ORDER BY id LIMIT $2`),
    /** Ids of up to $3 jobs of tube $1 in state $2 (a bulk clear or move takes them in slices). */
    idsInState: s('ids_in_state', `SELECT id FROM ${t.jobs} WHERE tube = $1 AND state = $2 ORDER BY id LIMIT $3`),
    clearSome: s(
      'clear_some',
      `DELETE FROM ${t.jobs} WHERE id IN (SELECT id FROM ${t.jobs} WHERE tube = $1 AND state = $2 LIMIT $3 FOR UPDATE SKIP LOCKED)
       RETURNING id, length(body) AS bytes`,
    ),
    /**
     * Job $1's newest $2 events, newest first: the history trigger's rows (schema.ts) and the
     * hot path's (one row per statement, `record`).
     */
    history: s(
      'history',
      `SELECT at, kind, node, conn, note FROM (
         SELECT seq, at, kind, node, conn, note FROM ${realm.prefix}history WHERE job = $1
         UNION ALL
         SELECT b.seq, b.at, b.kind, b.nodes[i], b.conns[i], '' FROM ${realm.prefix}history_batches b
         CROSS JOIN LATERAL array_position(b.jobs, $1::bigint) AS i
         WHERE b.span @> $1::bigint AND i IS NOT NULL
       ) e ORDER BY seq DESC LIMIT $2`,
    ),
    /** Events recorded so far (the ring's `recorded`): the numbers drawn from the history's sequence. */
    historyRecorded: s(
      'history_recorded',
      `SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS recorded FROM ${historySequence(realm)}`,
    ),
    /** Keeps the $1 newest events: the ring. */
    trimHistory: s(
      'trim_history',
      `WITH cut AS (SELECT last_value - $1::bigint AS seq FROM ${historySequence(realm)}),
       events AS (DELETE FROM ${realm.prefix}history WHERE seq <= (SELECT seq FROM cut))
       DELETE FROM ${realm.prefix}history_batches WHERE seq <= (SELECT seq FROM cut)`,
    ),
    /** How much the jobs table changed since its statistics were gathered, and its dead rows (ClusterStore.tidy). */
    staleness: s(
      'staleness',
      `SELECT n_mod_since_analyze AS changed, n_live_tup AS live, n_dead_tup AS dead FROM pg_stat_user_tables WHERE relid = '${t.jobs}'::regclass`,
    ),
    /** Body bytes node $1 added (or removed, negative) since it last said. */
    addBytes: s(
      'add_bytes',
      `INSERT INTO beanpole_node_bytes (node, bytes) VALUES ($1, $2)
       ON CONFLICT (node) DO UPDATE SET bytes = beanpole_node_bytes.bytes + EXCLUDED.bytes`,
    ),
    /** Body bytes in the cluster (the --max-job-bytes budget's use). */
    clusterBytes: s('cluster_bytes', 'SELECT COALESCE(sum(bytes), 0)::bigint AS bytes FROM beanpole_node_bytes'),
    moveSome: s(
      'move_some',
      `UPDATE ${t.jobs} SET tube = $4 WHERE id IN (SELECT id FROM ${t.jobs} WHERE tube = $1 AND state = $2 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id`,
    ),
  } as const;
}

export type ClusterSql = ReturnType<typeof clusterSql>;
