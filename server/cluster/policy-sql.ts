/**
 * The statements of tube policies in a cluster (shared/policy.ts), over a realm's tubes table
 * (schema.ts, policyMigration). A gated tube's reserves take its row's lock, so the cap and the
 * rate hold for the whole cluster: two nodes never both see the last free place or token. Tubes
 * without a policy never meet these statements.
 */
import type { Realm } from './realm.js';
import { reservePicked, type Statement } from './sql.js';

/** Candidates per tube beyond those wanted, for rows another reserve has locked (sql.ts's margin). */
const LOCK_MARGIN = 16;

export function policySql(realm: Realm) {
  const t = realm.tables;
  const s = (name: string, text: string): Statement => ({ name: `${realm.prefix}${name}`, text });
  /** The rate's tokens at `now` (a parameter) of a row `p` with a policy: refilled since refilled_at, up to the burst. */
  const tokensAt = (now: string): string => `LEAST((p.policy->'rate'->>'burst')::float8,
      p.tokens + GREATEST(0, ${now}::bigint - p.refilled_at) * (p.policy->'rate'->>'perSecond')::float8 / 1000.0)`;
  /** The node ($2) is still a member (sql.ts's NODE_ALIVE). */
  const NODE_ALIVE = 'EXISTS (SELECT 1 FROM beanpole_nodes n WHERE n.id = $2 AND n.gone_at IS NULL)';

  return {
    /** Every tube's policy, with what it has done (a node's cache, the dashboard's counts). */
    policies: s('policies', `SELECT name, policy, refused_puts, backoffs FROM ${t.tubes} WHERE policy IS NOT NULL`),

    /** Tube $1's policy and counters (no row: none). */
    policyOf: s('policy_of', `SELECT policy, refused_puts, backoffs FROM ${t.tubes} WHERE name = $1 AND policy IS NOT NULL`),

    /**
     * Sets tube $1's policy to $2 (null: none); $3 now. A new rate starts with a full bucket; a
     * rate set again as it was keeps its tokens.
     */
    setPolicy: s(
      'set_policy',
      `INSERT INTO ${t.tubes} AS p (name, policy, tokens, refilled_at)
       VALUES ($1, $2::jsonb, COALESCE(($2::jsonb->'rate'->>'burst')::float8, 0), $3::bigint)
       ON CONFLICT (name) DO UPDATE SET
         policy = EXCLUDED.policy,
         tokens = CASE WHEN p.policy->'rate' IS NOT DISTINCT FROM EXCLUDED.policy->'rate' THEN p.tokens ELSE EXCLUDED.tokens END,
         refilled_at = CASE WHEN p.policy->'rate' IS NOT DISTINCT FROM EXCLUDED.policy->'rate' THEN p.refilled_at ELSE EXCLUDED.refilled_at END`,
    ),

    /** Takes tube $1's row lock for the rest of the transaction (a put under its queue cap). */
    lockTube: s('lock_tube', `SELECT 1 FROM ${t.tubes} WHERE name = $1 FOR UPDATE`),

    /** Ready and delayed jobs of tube $1: what its queue cap counts. */
    queued: s('queued', `SELECT count(*)::bigint AS n FROM ${t.jobs} WHERE tube = $1 AND state IN (0, 2)`),

    /** A put the queue cap of tube $1 refused. */
    refused: s('refused', `UPDATE ${t.tubes} SET refused_puts = refused_puts + 1 WHERE name = $1`),

    /**
     * True when one of the tubes ($1) has a ready job a reserve could take at $2 (now): its cap
     * not full, its rate not spent. A sleeping Gearman worker is woken only then.
     */
    anyOpen: s(
      'any_open',
      `SELECT EXISTS (
         SELECT 1 FROM unnest($1::text[]) AS w(tube)
         WHERE EXISTS (SELECT 1 FROM ${t.jobs} WHERE tube = w.tube AND state = 0)
           AND NOT EXISTS (
             SELECT 1 FROM ${t.tubes} p WHERE p.name = w.tube AND p.policy IS NOT NULL AND (
               (jsonb_typeof(p.policy->'concurrency') = 'number'
                 AND (SELECT count(*) FROM ${t.jobs} r WHERE r.tube = w.tube AND r.state = 1) >= (p.policy->>'concurrency')::bigint)
               OR (jsonb_typeof(p.policy->'rate') = 'object' AND ${tokensAt('$2')} < 1)))
       ) AS any`,
    ),

    /**
     * sql.ts's reserveMany for a set of tubes some of which have a concurrency cap or a rate:
     * each such tube's row is locked, and it hands out no more than its free places (cap less
     * its reserved jobs) and its whole tokens; the tokens taken are spent in the same statement.
     * Parameters as reserveMany's: $1 tubes, $2 node, $3 connections, $4 now, $5 holds, $6 how
     * many clients. Runs where the history trigger records its reserves.
     */
    reserveGated: s(
      'reserve_gated',
      `WITH gate AS (
         SELECT p.name, p.policy, ${tokensAt('$4')} AS tokens_now
         FROM ${t.tubes} p
         WHERE p.name = ANY($1::text[]) AND p.policy IS NOT NULL
         ORDER BY p.name
         FOR UPDATE
       ),
       allowance AS (
         SELECT g.name,
           LEAST(
             CASE WHEN jsonb_typeof(g.policy->'concurrency') = 'number'
               THEN GREATEST(0, (g.policy->>'concurrency')::bigint - (SELECT count(*) FROM ${t.jobs} r WHERE r.tube = g.name AND r.state = 1))
               ELSE $6::bigint END,
             CASE WHEN jsonb_typeof(g.policy->'rate') = 'object' THEN GREATEST(0, floor(g.tokens_now))::bigint ELSE $6::bigint END
           ) AS n,
           CASE WHEN jsonb_typeof(g.policy->'rate') = 'object' THEN g.tokens_now END AS tokens_now
         FROM gate g
       ),
       heads AS (
         SELECT h.id FROM unnest($1::text[]) AS w(tube)
         LEFT JOIN allowance a ON a.name = w.tube
         CROSS JOIN LATERAL (
           SELECT id FROM ${t.jobs}
           WHERE tube = w.tube AND state = 0
           ORDER BY priority, id LIMIT LEAST($6::bigint, COALESCE(a.n, $6::bigint)) + ${LOCK_MARGIN}
         ) h
         WHERE COALESCE(a.n, $6::bigint) > 0
           AND NOT EXISTS (SELECT 1 FROM ${t.tubes} p WHERE p.name = w.tube AND p.unpause_at > $4::bigint)
           AND ${NODE_ALIVE}
       ),
       locked AS (
         SELECT j.id, j.priority, j.tube FROM ${t.jobs} j
         WHERE j.id IN (SELECT id FROM heads) AND j.state = 0
         FOR UPDATE SKIP LOCKED
       ),
       within AS (
         SELECT l.id, l.priority, row_number() OVER (PARTITION BY l.tube ORDER BY l.priority, l.id) AS k, a.n
         FROM locked l LEFT JOIN allowance a ON a.name = l.tube
       ),
       picked AS (
         SELECT id, row_number() OVER (ORDER BY priority, id) AS rn
         FROM (SELECT id, priority FROM within WHERE n IS NULL OR k <= n ORDER BY priority, id LIMIT $6) best
       ),
       ${reservePicked(realm)},
       spent AS (
         UPDATE ${t.tubes} p SET tokens = a.tokens_now - COALESCE(c.n, 0), refilled_at = $4::bigint
         FROM allowance a LEFT JOIN (SELECT tube, count(*) AS n FROM changed GROUP BY tube) c ON c.tube = a.name
         WHERE p.name = a.name AND a.tokens_now IS NOT NULL
       )
       SELECT rn, id, tube, reserves, due_at, ttr_ms, body, abandoned FROM changed`,
    ),
  } as const;
}

export type PolicySql = ReturnType<typeof policySql>;
