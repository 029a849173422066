/**
 * The audit log in cluster mode: the beanpole_audit table (schema.ts), written and read by every
 * node, so each dashboard shows the changes made through any of them. Bounded as the job
 * history is: each insert deletes what falls out of the newest CLUSTER_AUDIT_ROWS.
 */
import type { Logger } from 'pino';
import type { AuditEntryDto, AuditPageDto, AuditTargetDto } from '../../shared/dto.js';
import { isRole } from '../../shared/roles.js';
import type { AuditLog, AuditRecord } from '../common/audit-log.js';
import { run, type Queryable } from './pool.js';
import type { Statement } from './sql.js';

/** Entries the cluster keeps (about 300 bytes each: some 30 MB). */
export const CLUSTER_AUDIT_ROWS = 100_000;

const APPEND: Statement = {
  name: 'audit_append',
  text: `WITH added AS (
           INSERT INTO beanpole_audit (at, node, username, role, action, target, result)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq
         )
         DELETE FROM beanpole_audit WHERE seq <= (SELECT seq FROM added) - $8::bigint`,
};
const PAGE: Statement = {
  name: 'audit_page',
  text: `SELECT seq, at, node, username, role, action, target, result FROM beanpole_audit
         WHERE seq < $1::bigint ORDER BY seq DESC LIMIT $2`,
};

interface AuditRow {
  seq: number;
  at: number;
  node: number;
  username: string | null;
  role: string;
  action: string;
  target: AuditTargetDto;
  result: AuditEntryDto['result'];
}

export class ClusterAuditLog implements AuditLog {
  /**
   * The last write queued. Writes go one after another: on separate pool connections two of them
   * could commit, and take their sequence numbers, in the other order than the actions they record.
   */
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: Queryable,
    private readonly nodeId: () => number,
    private readonly log: Logger,
    private readonly rows = CLUSTER_AUDIT_ROWS,
  ) {}

  append(record: AuditRecord): void {
    const { at, user, role, action, target, result } = record;
    const params = [at, this.nodeId(), user, role, action, JSON.stringify(target), JSON.stringify(result), this.rows];
    this.tail = this.tail
      .then(() => run(this.pool, APPEND, params))
      .then(
        () => undefined,
        (err: unknown) => {
          // The change is made; only its record is lost.
          this.log.error({ err: (err as Error).message, action }, 'audit log: writing to PostgreSQL failed');
        },
      );
  }

  async page(before: number | null, limit: number): Promise<AuditPageDto> {
    // One more than asked: whether there is a next page.
    const rows = await run<AuditRow>(this.pool, PAGE, [before ?? Number.MAX_SAFE_INTEGER, limit + 1]);
    const entries = rows.slice(0, limit).map(
      (r): AuditEntryDto => ({
        seq: r.seq,
        at: r.at,
        user: r.username,
        role: isRole(r.role) ? r.role : 'viewer',
        action: r.action,
        target: r.target,
        result: r.result,
        node: r.node,
      }),
    );
    return { entries, next: rows.length > limit ? entries[entries.length - 1]!.seq : null };
  }

  async close(): Promise<void> {
    await this.tail;
  }
}
