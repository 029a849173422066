/**
 * The node's timing of delayed jobs: every node times the soonest due moment it knows of (its
 * own delayed puts, the other nodes' news, a pause's end) and then makes every due job of the
 * realm ready, whoever put it. Each promotion looks up the next due job and times it in turn.
 */
import type pg from 'pg';
import type { Logger } from 'pino';
import { run } from './pool.js';
import type { ClusterSql } from './sql.js';

/** setTimeout's longest delay; a later due time is timed again when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Jobs one promote statement makes ready at most (sql.ts); fewer means none is left. */
const PROMOTE_SLICE = 1000;

/** What the timer tells its store. */
export interface DueNews {
  /** Jobs became ready in these tubes. */
  jobsReady(tubes: string[]): void;
  /** A due moment passed: waiters look at every tube (a pause may have ended). */
  passed(): void;
}

export class DueTimer {
  private timer: NodeJS.Timeout | null = null;
  private dueAt = Number.POSITIVE_INFINITY;
  private stopped = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly sql: ClusterSql,
    private readonly now: () => number,
    private readonly news: DueNews,
    private readonly log: Logger,
  ) {}

  /** Times the promotion of delayed jobs for `at`, if sooner than what is timed now. */
  arm(at: number): void {
    if (this.stopped || at >= this.dueAt) return;
    this.dueAt = at;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.dueAt = Number.POSITIVE_INFINITY;
      // A due moment is a delayed job's or a pause's end: waiters look at every tube.
      void this.promote()
        .then(() => this.news.passed())
        .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'cluster: promoting delayed jobs failed'));
    }, Math.min(Math.max(0, at - this.now()), MAX_TIMER_MS));
    this.timer.unref();
  }

  /** Makes due delayed jobs ready, then times the next one. */
  async promote(): Promise<void> {
    for (;;) {
      const rows = await run<{ tube: string }>(this.pool, this.sql.promote, [this.now()]);
      if (rows.length > 0) this.news.jobsReady(rows.map((r) => r.tube));
      if (rows.length < PROMOTE_SLICE) break;
    }
    const [next] = await run<{ delayed: number | null }>(this.pool, this.sql.nextDue, []);
    if (next?.delayed != null) this.arm(next.delayed);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
  }
}
