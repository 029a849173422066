/**
 * Where the dashboard's audit log is kept: in memory (audit-entries.ts), in a file of the binlog
 * directory (persistence/audit-file.ts), or in PostgreSQL shared by a cluster's nodes
 * (cluster/cluster-audit.ts). The admin API writes to it and reads it; it lives here because the
 * stores implement it and the dashboard knows no store.
 */
import type { AuditEntryDto, AuditPageDto } from '../../shared/dto.js';

/** An entry before it is numbered: the log gives it its `seq` (and a cluster its node). */
export type AuditRecord = Omit<AuditEntryDto, 'seq' | 'node'>;

/** Most entries one page of GET /api/audit holds. */
export const MAX_AUDIT_PAGE = 500;

export interface AuditLog {
  /**
   * Appends `record`. Returns at once: the write happens in the background, and a failure is
   * logged, never thrown (a change already made is not undone for want of its audit line).
   */
  append(record: AuditRecord): void;
  /** Up to `limit` entries with seq below `before` (null: the newest), newest first. */
  page(before: number | null, limit: number): Promise<AuditPageDto>;
  /** Waits for what was appended to be written, then lets go of files or connections. */
  close(): Promise<void>;
}
