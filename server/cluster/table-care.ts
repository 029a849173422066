import type pg from 'pg';
import { run } from './pool.js';
import type { ClusterSql } from './sql.js';

/** A node gathers the jobs table's statistics at most this often, once this share of its live rows changed... */
const ANALYZE_EVERY_MS = 10_000;
const ANALYZE_SHARE = 0.2;
/** ...and vacuums it at most this often, once its dead rows are this share of the live ones... */
const VACUUM_EVERY_MS = 1000;
const VACUUM_SHARE = 0.1;
/** The longest wait between a node's vacuums after they failed (a statement timeout). */
const VACUUM_BACKOFF_MS = 10 * 60 * 1000;
/** ...and in both cases at least this many rows. */
const TIDY_MIN_ROWS = 1000;

/**
 * Keeps the jobs table fit for the reserve, as autovacuum would if its launcher looked more
 * often than once a minute (its default): the statistics are gathered when the table changed a
 * lot (a reserve planned on an empty table's statistics probes the (tube, state) index and
 * sorts instead of reading the ready index in order, so every reserve reads all of its tube's
 * entries: 1,841 jobs/s against 4,344 after an ANALYZE), and dead rows are vacuumed when there
 * are many (every reserved or deleted job leaves a dead entry at the queue's head, which each
 * reserve reads past until a vacuum: about 17% more jobs/s measured). SKIP_LOCKED: when another
 * node or autovacuum is at it, that is enough. A node whose role does not own the table gets a
 * warning from PostgreSQL and nothing else.
 */
export class TableCare {
  private analyzedAt = 0;
  private vacuumedAt = 0;
  private vacuumEvery = VACUUM_EVERY_MS;

  constructor(
    private readonly pool: pg.Pool,
    private readonly sql: ClusterSql,
    /** The realm's jobs table. */
    private readonly jobsTable: string,
    private readonly now: () => number,
  ) {}

  /** Runs once a second; does something only when the table needs it. */
  async tidy(): Promise<void> {
    const now = this.now();
    if (now - this.analyzedAt < ANALYZE_EVERY_MS && now - this.vacuumedAt < this.vacuumEvery) return;
    const [row] = await run<{ changed: number; live: number; dead: number }>(this.pool, this.sql.staleness, []);
    if (row === undefined) return;
    if (now - this.vacuumedAt >= this.vacuumEvery && row.dead >= Math.max(TIDY_MIN_ROWS, row.live * VACUUM_SHARE)) {
      this.vacuumedAt = now;
      try {
        await this.pool.query(`VACUUM (SKIP_LOCKED) ${this.jobsTable}`);
        this.vacuumEvery = VACUUM_EVERY_MS;
      } catch (err) {
        // A table too big to vacuum within the statement timeout is left to autovacuum for a
        // while: the node tries again ever less often, up to every VACUUM_BACKOFF_MS.
        this.vacuumEvery = Math.min(this.vacuumEvery * 2, VACUUM_BACKOFF_MS);
        throw err;
      }
    }
    if (now - this.analyzedAt >= ANALYZE_EVERY_MS && row.changed >= Math.max(TIDY_MIN_ROWS, row.live * ANALYZE_SHARE)) {
      this.analyzedAt = now;
      await this.pool.query(`ANALYZE (SKIP_LOCKED) ${this.jobsTable}`);
    }
  }
}
