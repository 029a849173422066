/**
 * The audit log of a server with -b: JSON lines in DIR/audit.log. Bounded: once the file would
 * grow past its cap it becomes audit.log.1 (the one before it is deleted) and a new one starts,
 * so the log takes at most twice the cap on disk and the newest entries are always there.
 *
 * Appending never waits on the disk: lines are queued and written by one chain of asynchronous
 * writes (a burst becomes one write). Without fsync: an entry may be lost with the machine, as
 * the binlog's -f window allows for jobs. A line torn by kill -9 is skipped when read, and the
 * next line starts on a line of its own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { open, rename, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AuditEntryDto, AuditPageDto } from '../../shared/dto.js';
import type { AuditLog, AuditRecord } from '../common/audit-log.js';
import { AuditEntries } from '../common/audit-entries.js';

/** The file's name in the binlog directory, and its predecessor's. */
export const AUDIT_FILE = 'audit.log';
/** Bytes a file may hold before it is rotated: 4 MiB, about 15,000 entries. */
export const AUDIT_FILE_MAX_BYTES = 4 * 1024 * 1024;

export class FileAuditLog implements AuditLog {
  private readonly file: string;
  private readonly previous: string;
  /** Both files' entries, for reading (bounded by the files' caps). */
  private readonly entries = new AuditEntries(Number.MAX_SAFE_INTEGER);
  private handle: FileHandle | null = null;
  /** Bytes in the current file, counting what is queued. */
  private size = 0;
  /** The first seq in the current file (null: it is empty); older ones are in the predecessor. */
  private firstSeq: number | null = null;
  /** The current file ends inside a line (torn): the next write starts a new one. */
  private torn = false;
  private queued: AuditEntryDto[] = [];
  private writing: Promise<void> = Promise.resolve();
  private flushing = false;

  constructor(
    dir: string,
    private readonly log: Logger,
    private readonly maxBytes = AUDIT_FILE_MAX_BYTES,
  ) {
    this.file = path.join(dir, AUDIT_FILE);
    this.previous = `${this.file}.1`;
    this.restore();
  }

  append(record: AuditRecord): void {
    this.queued.push(this.entries.add(record));
    if (this.flushing) return;
    this.flushing = true;
    // After the current turn: the changes of one tick go out in one write.
    this.writing = this.writing.then(() => new Promise<void>((resolve) => setImmediate(resolve))).then(() => this.flush());
  }

  page(before: number | null, limit: number): Promise<AuditPageDto> {
    return Promise.resolve(this.entries.page(before, limit));
  }

  async close(): Promise<void> {
    await this.writing;
    await this.handle?.close().catch(() => undefined);
    this.handle = null;
  }

  /** Writes what is queued, rotating first when the file would pass its cap. */
  private async flush(): Promise<void> {
    this.flushing = false;
    const batch = this.queued.splice(0);
    if (batch.length === 0) return;
    try {
      let text = '';
      let bytes = 0;
      for (const entry of batch) {
        const line = `${JSON.stringify(entry)}\n`;
        const lineBytes = Buffer.byteLength(line);
        if (this.size + bytes > 0 && this.size + bytes + lineBytes > this.maxBytes) {
          await this.write(text);
          text = '';
          bytes = 0;
          await this.rotate();
        }
        this.firstSeq ??= entry.seq;
        text += line;
        bytes += lineBytes;
      }
      await this.write(text);
    } catch (err) {
      // The change is made; only its record is lost. Said once per failed batch.
      this.log.error({ file: this.file, err: (err as Error).message, entries: batch.length }, 'audit log: writing failed');
    }
  }

  private async write(text: string): Promise<void> {
    if (text === '') return;
    this.handle ??= await open(this.file, 'a', 0o600);
    if (this.torn) {
      text = `\n${text}`;
      this.torn = false;
    }
    await this.handle.write(text);
    this.size += Buffer.byteLength(text);
  }

  /** The current file becomes the predecessor (the old one and its entries go); a new one starts. */
  private async rotate(): Promise<void> {
    await this.handle?.close();
    this.handle = null;
    await rename(this.file, this.previous);
    if (this.firstSeq !== null) this.entries.dropBelow(this.firstSeq);
    this.firstSeq = null;
    this.size = 0;
  }

  /** Reads both files back (at start): the predecessor, then the current one. */
  private restore(): void {
    for (const file of [this.previous, this.file]) {
      if (!existsSync(file)) continue;
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        this.log.warn({ file, err: (err as Error).message }, 'audit log: cannot read it; it starts afresh');
        continue;
      }
      let skipped = 0;
      for (const line of text.split('\n')) {
        if (line === '') continue;
        const entry = parseEntry(line);
        if (entry === null) skipped++;
        else {
          this.entries.keep(entry);
          if (file === this.file) this.firstSeq ??= entry.seq;
        }
      }
      if (skipped > 0) this.log.warn({ file, skipped }, 'audit log: skipped lines that are not whole entries (a torn write)');
      if (file === this.file) {
        this.size = Buffer.byteLength(text);
        this.torn = text.length > 0 && !text.endsWith('\n');
      }
    }
  }
}

/** An entry of a line, or null when the line is not one (torn, or not ours). */
function parseEntry(line: string): AuditEntryDto | null {
  try {
    const value = JSON.parse(line) as Partial<AuditEntryDto> | null;
    if (value === null || typeof value !== 'object' || typeof value.seq !== 'number' || typeof value.at !== 'number' || typeof value.action !== 'string') {
      return null;
    }
    return value as AuditEntryDto;
  } catch {
    return null;
  }
}

