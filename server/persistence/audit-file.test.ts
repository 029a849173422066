/**
 * The file audit log on a real directory: entries come back after a reopen, newest first and
 * paged; the file rotates at its cap into one predecessor (older ones go), so the newest entries
 * always remain; a torn last line is skipped and the next entry starts on a line of its own.
 */
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../common/audit-log.js';
import { createLogger } from '../logger.js';
import { AUDIT_FILE, FileAuditLog } from './audit-file.js';

const log = createLogger(0);
log.level = 'silent';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'beanpole-audit-'));
  dirs.push(d);
  return d;
};
const record = (i: number): AuditRecord => ({
  at: 1_700_000_000_000 + i,
  user: 'ana',
  role: 'operator',
  action: 'job.delete',
  target: { jobIds: [i], jobCount: 1 },
  result: { status: 204 },
});

describe('FileAuditLog', () => {
  it('keeps entries across a reopen, newest first, in pages', async () => {
    const dir = tmp();
    const a = new FileAuditLog(dir, log);
    for (let i = 1; i <= 5; i++) a.append(record(i));
    await a.close();
    const b = new FileAuditLog(dir, log);
    const first = await b.page(null, 2);
    expect(first.entries.map((e) => e.seq)).toEqual([5, 4]);
    expect(first.entries[0]).toEqual({ seq: 5, ...record(5) });
    const second = await b.page(first.next, 2);
    expect(second.entries.map((e) => e.seq)).toEqual([3, 2]);
    const last = await b.page(second.next, 2);
    expect(last).toEqual({ entries: [{ seq: 1, ...record(1) }], next: null });
    // Numbering goes on where it stopped.
    b.append(record(6));
    await b.close();
    expect((await new FileAuditLog(dir, log).page(null, 1)).entries[0]!.seq).toBe(6);
  });

  it('rotates at its cap into one predecessor: at most twice the cap on disk, the newest entries kept', async () => {
    const dir = tmp();
    const lineBytes = Buffer.byteLength(`${JSON.stringify({ seq: 10, ...record(10) })}\n`);
    const cap = lineBytes * 10;
    const a = new FileAuditLog(dir, log, cap);
    for (let i = 1; i <= 35; i++) {
      a.append(record(i));
      // Several writes, not one batch: the cap is checked on each.
      if (i % 4 === 0) await new Promise((r) => setImmediate(r));
    }
    await a.close();
    const current = path.join(dir, AUDIT_FILE);
    expect(statSync(current).size).toBeLessThanOrEqual(cap);
    expect(statSync(`${current}.1`).size).toBeLessThanOrEqual(cap);
    expect(existsSync(`${current}.2`)).toBe(false);
    const seqs = (await new FileAuditLog(dir, log, cap).page(null, 100)).entries.map((e) => e.seq);
    expect(seqs[0]).toBe(35);
    // Consecutive down from the newest; the oldest ones are gone with the rotated file.
    expect(seqs).toEqual(seqs.map((_, i) => 35 - i));
    expect(seqs.length).toBeGreaterThan(10);
    expect(seqs.length).toBeLessThanOrEqual(20);
    // What is read is what remains on disk after rotations (the memory kept by the writer agrees).
    const b = new FileAuditLog(dir, log, cap);
    expect((await b.page(null, 100)).entries.map((e) => e.seq)).toEqual(seqs);
  });

  it('skips a torn last line, and the next entry starts on a line of its own', async () => {
    const dir = tmp();
    const a = new FileAuditLog(dir, log);
    a.append(record(1));
    a.append(record(2));
    await a.close();
    const file = path.join(dir, AUDIT_FILE);
    appendFileSync(file, '{"seq":3,"at":17000000000'); // what kill -9 mid-write leaves
    const b = new FileAuditLog(dir, log);
    expect((await b.page(null, 10)).entries.map((e) => e.seq)).toEqual([2, 1]);
    b.append(record(3));
    await b.close();
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines.at(-1)).toBe('');
    expect(JSON.parse(lines.at(-2)!)).toMatchObject({ seq: 3, action: 'job.delete' });
    expect((await new FileAuditLog(dir, log).page(null, 10)).entries.map((e) => e.seq)).toEqual([3, 2, 1]);
  });
});
