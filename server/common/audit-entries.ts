import type { AuditEntryDto, AuditPageDto } from '../../shared/dto.js';
import type { AuditLog, AuditRecord } from './audit-log.js';

/** Entries a server without -b keeps (the oldest go first). */
export const MEMORY_AUDIT_ENTRIES = 10_000;

/**
 * Entries in memory, oldest first, numbered from 1: the log of a server without -b, and what
 * the file log (persistence/audit-file.ts) keeps of its files for reading.
 */
export class AuditEntries {
  private readonly entries: AuditEntryDto[] = [];
  private nextSeq = 1;

  constructor(private readonly capacity: number) {}

  /** Numbers and keeps `record`; returns the entry. */
  add(record: AuditRecord): AuditEntryDto {
    return this.keep({ seq: this.nextSeq, ...record });
  }

  /** Keeps an entry read back from a file (numbered already). */
  keep(entry: AuditEntryDto): AuditEntryDto {
    this.entries.push(entry);
    this.nextSeq = Math.max(this.nextSeq, entry.seq + 1);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
    return entry;
  }

  /** Forgets the entries numbered below `seq` (a rotated file's, once it is gone). */
  dropBelow(seq: number): void {
    const i = this.entries.findIndex((e) => e.seq >= seq);
    this.entries.splice(0, i < 0 ? this.entries.length : i);
  }

  page(before: number | null, limit: number): AuditPageDto {
    // Entries are in seq order: find the first at or after `before` by bisection.
    let hi = this.entries.length;
    if (before !== null) {
      let lo = 0;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.entries[mid]!.seq < before) lo = mid + 1;
        else hi = mid;
      }
    }
    const from = Math.max(0, hi - limit);
    const entries = this.entries.slice(from, hi).reverse();
    return { entries, next: from > 0 ? this.entries[from]!.seq : null };
  }
}

/** The audit log of a server without -b: the newest MEMORY_AUDIT_ENTRIES, gone on restart. */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditEntries;

  constructor(capacity = MEMORY_AUDIT_ENTRIES) {
    this.entries = new AuditEntries(capacity);
  }

  append(record: AuditRecord): void {
    this.entries.add(record);
  }

  page(before: number | null, limit: number): Promise<AuditPageDto> {
    return Promise.resolve(this.entries.page(before, limit));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
