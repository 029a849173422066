import type pg from 'pg';
import type { Logger } from 'pino';
import type { TubePolicy, TubePolicyState } from '../../shared/policy.js';
import { parsePolicy } from '../common/policy-schema.js';
import type { PolicySql } from './policy-sql.js';
import { inTransaction, run, type Queryable } from './pool.js';

/** A row of a realm's tubes table (sql.ts's TUBE_ROW): a tube's pause, own settings and policy. */
export interface TubeRow {
  pause_ms: number;
  unpause_at: number;
  dead_letter_after: number | null;
  policy: unknown;
  tokens: number;
  refilled_at: number;
  refused_puts: number;
  backoffs: number;
}

/**
 * What a tube's policy is doing, from its row and its reserved jobs at `now`. The cluster keeps
 * no "full since": capFullSince is 0 (the alert rules time a full cap themselves).
 */
export function policyStateOf(row: TubeRow | undefined | null, reserved: number, now: number): TubePolicyState | null {
  if (row === undefined || row === null || row.policy === null) return null;
  const parsed = parsePolicy(row.policy);
  if (!parsed.ok) return null;
  const policy = parsed.policy;
  const rate = policy.rate;
  const tokens = rate === null ? 0 : Math.min(rate.burst, row.tokens + (Math.max(0, now - row.refilled_at) * rate.perSecond) / 1000);
  return {
    policy,
    capHeld: policy.concurrency !== null && reserved >= policy.concurrency,
    rateHeld: rate !== null && tokens < 1,
    capFullSince: 0,
    refusedPuts: Number(row.refused_puts),
    backoffs: Number(row.backoffs),
  };
}

/** A rate-held tube's waiters look again at most this often, and at least this rarely (ms). */
const MIN_RETRY_MS = 10;
const MAX_RETRY_MS = 1000;

/**
 * This node's copy of the realm's tube policies, which decides which path a put or a reserve
 * takes (a tube with a cap or a rate reserves under its row's lock: policy-sql.ts). Read at
 * start, again when another node says a policy changed (wakeups.ts) and at every poll; the
 * statements themselves read the policy in force, so a copy a moment old costs only the path.
 */
export class ClusterPolicies {
  private byTube = new Map<string, TubePolicy>();
  private retry: NodeJS.Timeout | null = null;
  private retryAt = Number.POSITIVE_INFINITY;
  /** The rate-held tubes the timer wakes. */
  private retryTubes = new Set<string>();

  constructor(
    private readonly pool: Queryable,
    readonly sql: PolicySql,
    private readonly log: Logger,
  ) {}

  /** Sets `tube`'s policy for the cluster (null: none); the caller tells the other nodes. */
  async set(tube: string, policy: TubePolicy | null, now: number): Promise<void> {
    await run(this.pool, this.sql.setPolicy, [tube, policy === null ? null : JSON.stringify(policy), now]);
    this.noteSet(tube, policy);
  }

  /** The tube's policy as the database has it (this node's copy may be a moment old). */
  async read(tube: string): Promise<TubePolicy | null> {
    const [row] = await run<{ policy: unknown }>(this.pool, this.sql.policyOf, [tube]);
    if (row === undefined) return null;
    const parsed = parsePolicy(row.policy);
    return parsed.ok ? parsed.policy : null;
  }

  /**
   * A put into `tube` under its queue cap (`cap`): counted and made under the tube's row lock,
   * so puts on every node together stay within it. Null: refused (and counted as refused).
   */
  async underCap<T>(pool: pg.Pool, tube: string, cap: number, put: (db: pg.PoolClient) => Promise<T>): Promise<T | null> {
    return inTransaction(pool, async (db) => {
      await run(db, this.sql.lockTube, [tube]);
      const [row] = await run<{ n: number }>(db, this.sql.queued, [tube]);
      if (Number(row?.n ?? 0) < cap) return put(db);
      await run(db, this.sql.refused, [tube]);
      return null;
    });
  }

  /** Reads every policy of the realm. */
  async load(): Promise<void> {
    const rows = await run<{ name: string; policy: unknown }>(this.pool, this.sql.policies, []);
    const next = new Map<string, TubePolicy>();
    for (const row of rows) {
      const parsed = parsePolicy(row.policy);
      if (parsed.ok) next.set(row.name, parsed.policy);
      else this.log.warn({ tube: row.name, problem: parsed.problem }, 'cluster: a tube policy in the database is not one this node takes; ignored');
    }
    this.byTube = next;
  }

  /** Reads the policies again (another node changed one), then `changed()`; a failure is logged (the next poll tries again). */
  refresh(changed: () => void): void {
    this.load().then(changed, (err: unknown) => this.log.warn({ err: (err as Error).message }, 'cluster: reading tube policies failed'));
  }

  /** This node set `tube`'s policy (committed). */
  noteSet(tube: string, policy: TubePolicy | null): void {
    if (policy === null) this.byTube.delete(tube);
    else this.byTube.set(tube, policy);
  }

  /** True when a reserve over `tubes` must go through the gates (one of them has a cap or a rate). */
  gates(tubes: readonly string[]): boolean {
    if (this.byTube.size === 0) return false;
    for (const tube of tubes) {
      const p = this.byTube.get(tube);
      if (p !== undefined && (p.concurrency !== null || p.rate !== null)) return true;
    }
    return false;
  }

  /** True when a reservation that ends in `tube` may let a waiting reserve in (its cap). */
  capped(tube: string): boolean {
    return this.byTube.size > 0 && (this.byTube.get(tube)?.concurrency ?? null) !== null;
  }

  queueCap(tube: string): number | null {
    return this.byTube.size === 0 ? null : (this.byTube.get(tube)?.queueCap ?? null);
  }

  /**
   * Reserves over `tubes` left clients waiting: if a rate may be what holds them, `wake` them
   * when its next token is due (no node tells of tokens coming back). One timer for the node.
   */
  retryRated(tubes: readonly string[], wake: (tubes: Set<string>) => void): void {
    let every = Number.POSITIVE_INFINITY;
    const rated = new Set<string>();
    for (const tube of tubes) {
      const rate = this.byTube.get(tube)?.rate ?? null;
      if (rate === null) continue;
      rated.add(tube);
      every = Math.min(every, 1000 / rate.perSecond);
    }
    if (rated.size === 0) return;
    for (const tube of rated) this.retryTubes.add(tube);
    const delay = Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, Math.ceil(every)));
    const at = Date.now() + delay;
    if (this.retry !== null && this.retryAt <= at) return;
    if (this.retry !== null) clearTimeout(this.retry);
    this.retryAt = at;
    this.retry = setTimeout(() => {
      const tubes = this.retryTubes;
      this.retry = null;
      this.retryAt = Number.POSITIVE_INFINITY;
      this.retryTubes = new Set();
      wake(tubes);
    }, delay);
    this.retry.unref();
  }

  close(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
  }
}
