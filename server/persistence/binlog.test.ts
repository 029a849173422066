/**
 * The Binlog with a real Engine in-process: a full disk (ENOSPC past a byte budget), group
 * commit and the fsync policy, segment rolls, compaction, write errors, and restarts through
 * recover() into the engine + Binlog.open, as a start does.
 */
import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Job } from '../engine/records.js';
import { Harness, fieldsOf } from '../engine/testing.js';
import { Binlog } from './binlog.js';
import { Cleanups, KiB, MAX_PAYLOAD, MiB, dirBytes, patternBody, startBinlog, turn, durableFields, waitFor } from './testing.js';
import { nodeFileSystem, type FileSystem } from './file-system.js';
import { FORMAT_VERSION, SEGMENT_HEADER_BYTES, encodeJob, encodeSegmentHeader, jobRecordBytes, segmentFileName } from './format.js';
import { countLive, recover, type Recovery } from './recovery.js';
import { jobState, jobCounters, jobFile, jobBody, jobDeadlineAt, jobImageOf } from '../engine/records.js';

/** The checksum salt of the segments these tests write by hand. */
const SALT = 0x5a17_0001;

const silent = pino({ level: 'silent' });

const cleanups = new Cleanups();

afterEach(() => cleanups.run());

const tmpDir = (): string => cleanups.tmpDir('beanpole-binlog-');

function errnoError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}

/**
 * nodeFileSystem with faults: a byte budget for the whole directory (a write that would grow
 * the files past it writes what fits, then fails with ENOSPC, like a full disk), EIO on record
 * writes, fsyncs held back or failed, a count of writes per file, and a simulated crash.
 */
class FaultFs implements FileSystem {
  /** Most bytes all files in the directory may hold. */
  budget = Number.POSITIVE_INFINITY;
  /** Fail writes of data (not the zeros that claim space) to segments with EIO. */
  eio = false;
  /** Hold fsyncs until `releaseSyncs()`. */
  holdSyncs = false;
  /** Fail fsyncs with this error. */
  syncError: Error | null = null;
  readonly writes = new Map<number, number>();
  /** Bytes that reached the files (ENOSPC partial writes included). */
  bytesWritten = 0;
  readonly paths = new Map<number, string>();
  /** fdatasyncs started and not finished, by fd; the most at once; fds closed under one. */
  readonly syncing = new Map<number, number>();
  maxSyncsInFlight = 0;
  /** The most syncs of one descriptor in flight at once (a round syncs several files, each once). */
  maxSyncsPerFd = 0;
  readonly closedWhileSyncing: number[] = [];
  private readonly held: (() => void)[] = [];
  private crashed = false;

  constructor(readonly dir: string) {}

  /** Bytes all files in the directory hold. */
  usage(): number {
    return dirBytes(this.dir);
  }

  /** The fd of the open segment with this index. */
  fdOf(index: number): number {
    const file = path.join(this.dir, segmentFileName(index));
    for (const [fd, p] of this.paths) if (p === file) return fd;
    throw new Error(`segment ${index} is not open`);
  }

  writesTo(index: number): number {
    return this.writes.get(this.fdOf(index)) ?? 0;
  }

  releaseSyncs(): void {
    for (const fn of this.held.splice(0)) fn();
  }

  get heldSyncs(): number {
    return this.held.length;
  }

  /** The process dies: every file it had open is closed, and nothing more reaches the disk. */
  crash(): void {
    this.crashed = true;
    this.held.length = 0;
    for (const fd of this.paths.keys()) fs.closeSync(fd);
    this.paths.clear();
  }

  private alive(): void {
    if (this.crashed) throw errnoError('EBADF', 'the process crashed');
  }

  openAppend(p: string): number {
    this.alive();
    const fd = nodeFileSystem.openAppend(p);
    this.paths.set(fd, p);
    return fd;
  }

  openRead(p: string): number {
    this.alive();
    return nodeFileSystem.openRead(p);
  }

  writeAll(fd: number, buf: Buffer, position: number): void {
    this.alive();
    this.writes.set(fd, (this.writes.get(fd) ?? 0) + 1);
    if (this.eio && this.paths.has(fd) && buf.some((b) => b !== 0)) throw errnoError('EIO', 'i/o error, write');
    if (this.budget !== Number.POSITIVE_INFINITY) {
      const size = fs.fstatSync(fd).size;
      const growth = position + buf.length - size;
      const free = this.budget - this.usage();
      if (growth > free) {
        const fits = Math.max(0, Math.min(buf.length, size + Math.max(0, free) - position));
        if (fits > 0) nodeFileSystem.writeAll(fd, buf.subarray(0, fits), position);
        this.bytesWritten += fits;
        throw errnoError('ENOSPC', 'no space left on device, write');
      }
    }
    nodeFileSystem.writeAll(fd, buf, position);
    this.bytesWritten += buf.length;
  }

  truncate(fd: number, length: number): void {
    this.alive();
    nodeFileSystem.truncate(fd, length);
  }

  close(fd: number): void {
    if (this.crashed) return;
    if ((this.syncing.get(fd) ?? 0) > 0) this.closedWhileSyncing.push(fd);
    this.paths.delete(fd);
    nodeFileSystem.close(fd);
  }

  unlink(p: string): void {
    this.alive();
    nodeFileSystem.unlink(p);
  }

  syncNow(fd: number): void {
    this.alive();
    if (this.syncError !== null) throw this.syncError;
    nodeFileSystem.syncNow(fd);
  }

  sync(fd: number, done: (err: Error | null) => void): void {
    this.alive();
    this.syncing.set(fd, (this.syncing.get(fd) ?? 0) + 1);
    let inFlight = 0;
    for (const n of this.syncing.values()) inFlight += n;
    this.maxSyncsInFlight = Math.max(this.maxSyncsInFlight, inFlight);
    this.maxSyncsPerFd = Math.max(this.maxSyncsPerFd, this.syncing.get(fd)!);
    const finish = (err: Error | null): void => {
      this.syncing.set(fd, this.syncing.get(fd)! - 1);
      done(err);
    };
    const run = (): void => {
      if (this.crashed) return;
      if (this.syncError !== null) {
        const err = this.syncError;
        setImmediate(() => finish(err));
      } else nodeFileSystem.sync(fd, finish);
    };
    if (this.holdSyncs) this.held.push(run);
    else run();
  }

  read(fd: number, buf: Buffer, position: number, done: (err: Error | null, bytesRead: number) => void): void {
    this.alive();
    nodeFileSystem.read(fd, buf, position, done);
  }
}



/** Replays DIR into a fresh engine without opening a binlog: what a restart would find. */
function replay(dir: string): Recovery & { h: Harness; jobs: Map<number, Job> } {
  const h = new Harness();
  const rec = recover(dir, MAX_PAYLOAD, h.engine);
  h.engine.finishRestore(rec.nextId);
  countLive(rec.segments, h.engine.allJobs());
  return { ...rec, h, jobs: new Map([...h.engine.allJobs()].map((j) => [j.id, j])) };
}


/** Waits until every appended record is durable (written, or synced with fsync 0); bounded. */
async function settle(binlog: Binlog, ms = 5000): Promise<void> {
  const seq = binlog.appendedSeq;
  let timer: NodeJS.Timeout | undefined;
  const durable = await new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    binlog.whenDurable(seq, () => resolve(true));
  });
  clearTimeout(timer);
  expect(durable, `records up to ${seq} durable (durableSeq ${binlog.durableSeq})`).toBe(true);
}



/** Every job of `before` is in `after` with the same durable fields, and nothing else is. */
function expectSameJobs(before: Harness, after: Harness): void {
  const a = new Map([...before.engine.allJobs()].map((j) => [j.id, durableFields(j)]));
  const b = new Map([...after.engine.allJobs()].map((j) => [j.id, durableFields(j)]));
  expect(b).toEqual(a);
}


describe('a full disk', () => {
  it('fails puts with OUT_OF_MEMORY and changes nothing; other commands use the headroom; puts resume when space returns', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    // 4 MiB segments: space is claimed in 1 MiB chunks, with 64 KiB kept back for deletes.
    const s = startBinlog(dir, cleanups, { segmentBytes: 4 * MiB, fs: ffs });
    const { h, c, binlog } = s;
    await settle(binlog);
    ffs.budget = ffs.usage() + 200 * KiB;

    const acked: Job[] = [];
    let failed: { code: string } | null = null;
    for (let i = 0; i < 2000 && failed === null; i++) {
      const r = c.tryPut({ body: patternBody(4000, i), priority: i });
      if (r.ok) acked.push(r.value);
      else failed = r;
      if (i % 50 === 0) await settle(binlog);
    }
    expect(failed).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    // The first MiB, then the 200 KiB that were left, claimed in smaller pieces; minus the headroom.
    expect(acked.length).toBeGreaterThan((MiB + 100 * KiB) / 4100);
    expect(acked.length).toBeLessThan((MiB + 200 * KiB) / 4000);
    expect(binlog.stats().failure).toMatch(/^cannot claim binlog space: ENOSPC/);
    expect(s.logs.at(-1)).toBe('error binlog: no space; puts get OUT_OF_MEMORY until it can write again');
    expect(ffs.usage()).toBeLessThanOrEqual(ffs.budget);
    await settle(binlog);

    // More puts fail and change nothing but the id counter.
    const stats = JSON.stringify(h.engine.stats);
    const jobTotal = h.engine.jobTotal;
    const bodyBytes = h.engine.bodyBytes;
    const tubeTotal = h.engine.defaultTube.totalJobs;
    const idBefore = h.engine.nextId;
    for (let i = 0; i < 5; i++) expect(c.tryPut({ body: patternBody(4000, i) })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    await new Promise((r) => setTimeout(r, 120)); // past the retry pause: the disk is tried again
    expect(c.tryPut({ body: patternBody(4000, 9) })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(JSON.stringify(h.engine.stats)).toBe(stats);
    expect(h.engine.jobTotal).toBe(jobTotal);
    expect(h.engine.bodyBytes).toBe(bodyBytes);
    expect(h.engine.defaultTube.totalJobs).toBe(tubeTotal);
    expect(h.engine.nextId).toBe(idBefore + 6);
    for (let id = idBefore; id < idBefore + 6; id++) expect(h.engine.job(id)).toBeUndefined();
    expect(h.problems(idBefore + 10)).toEqual([]);
    expect(ffs.usage()).toBeLessThanOrEqual(ffs.budget);
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('binlog.'))).toEqual([segmentFileName(1)]);

    // Deletes, buries, kicks, releases still work in the headroom.
    const w = h.open();
    const ids = acked.map((j) => j.id);
    for (const id of ids.slice(0, 20)) expect(h.engine.delete(null, id).ok).toBe(true);
    for (const id of ids.slice(20, 30)) {
      expect(h.engine.reserveJob(w.session, id).ok).toBe(true);
      expect(h.engine.bury(w.session, id, 5).ok).toBe(true);
    }
    for (const id of ids.slice(20, 25)) expect(h.engine.kickJob(id).ok).toBe(true);
    for (const id of ids.slice(30, 35)) {
      expect(h.engine.reserveJob(w.session, id).ok).toBe(true);
      expect(h.engine.release(w.session, id, 9, 10_000).ok).toBe(true);
    }
    for (let i = 0; i < 3; i++) w.reserveNow(); // reserving from ready needs no record
    expect(h.engine.stats).toMatchObject({ buried: 5, delayed: 5, reserved: 3 });
    for (const id of w.reservedIds()) expect(h.engine.release(w.session, id, 1, 0).ok).toBe(true);
    expect(c.tryPut({ body: patternBody(4000, 1) })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    await settle(binlog);
    expect(s.fatal).toEqual([]);

    // Until the headroom runs out too: then changes fail and leave the job as it was.
    const spin = ids[60]!;
    let refused: string | null = null;
    for (let i = 0; i < 5000 && refused === null; i++) {
      const r = h.engine.reserveJob(w.session, spin);
      if (!r.ok) {
        expect(r).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
        expect(jobState(h.engine.job(spin)!)).toBe(i === 0 ? 'ready' : 'buried');
        refused = 'reserve-job';
        break;
      }
      const b = h.engine.bury(w.session, spin, 1);
      if (!b.ok) {
        expect(b).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
        expect(jobState(h.engine.job(spin)!)).toBe('reserved');
        refused = 'bury';
      }
      if (i % 100 === 0) await settle(binlog);
    }
    expect(refused).not.toBeNull();
    const spun = h.engine.job(spin)!;
    expect(jobCounters(spun).buries).toBeGreaterThan(400); // 64 KiB of headroom: ~450 reserve-job + bury pairs
    expect(h.problems(idBefore + 10)).toEqual([]);
    expect(ffs.usage()).toBeLessThanOrEqual(ffs.budget);
    await settle(binlog);

    // Space returns: after the retry pause, puts succeed again.
    ffs.budget = Number.POSITIVE_INFINITY;
    await new Promise((r) => setTimeout(r, 120));
    const again = c.tryPut({ body: 'back', priority: 1 });
    expect(again.ok).toBe(true);
    expect(binlog.stats().failure).toBeNull();
    expect(s.logs.at(-1)).toBe('info binlog: space is available again; writes resume');
    for (let i = 0; i < 300; i++) expect(c.tryPut({ body: patternBody(4000, i) }).ok).toBe(true);
    await settle(binlog);
    expect(s.fatal).toEqual([]);

    // Crash and restart: every acknowledged job is back as it was; nothing that failed exists.
    ffs.crash();
    const after = startBinlog(dir, cleanups);
    expect(after.recovery.problems).toEqual([]);
    expectSameJobs(h, after.h);
    expect(after.h.engine.nextId).toBe(h.engine.nextId);
    for (let id = idBefore; id < idBefore + 6; id++) expect(after.h.engine.job(id)).toBeUndefined();
    expect(after.h.problems(h.engine.nextId)).toEqual([]);
  });

  it('near a full disk, claims what is left without rewriting the free space or logging a failure per put', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { segmentBytes: 4 * MiB, fs: ffs });
    const { c, binlog } = s;
    await settle(binlog);
    // 512 KiB are free: not enough for another 1 MiB chunk, enough for ~100 more jobs.
    ffs.budget = ffs.usage() + 512 * KiB;
    // Fill the first 1 MiB chunk up to its headroom, until the first (smaller) claim past it.
    let n = 0;
    while (n < 1000 && binlog.stats().diskBytes === MiB) {
      expect(c.tryPut({ body: patternBody(4000, n) }).ok).toBe(true);
      n++;
    }
    await settle(binlog);
    expect(binlog.stats().diskBytes).toBeGreaterThan(MiB);
    expect(binlog.stats().diskBytes).toBeLessThan(MiB + 64 * KiB);
    const logsBefore = 0;
    const writtenBefore = ffs.bytesWritten;
    let more = 0;
    for (let i = 0; i < 50; i++) {
      if (c.tryPut({ body: patternBody(4000, i) }).ok) more++;
      await settle(binlog);
    }
    expect(more).toBe(50);
    const written = ffs.bytesWritten - writtenBefore;
    const logged = s.logs.slice(logsBefore);
    // 50 jobs of ~4 KiB: about 200 KiB of records and claimed zeros, not 50 x 512 KiB of
    // zeros written and cut off again.
    expect.soft(written, `${written} bytes written for 50 puts`).toBeLessThan(2 * MiB);
    // Every put succeeded: no "no space" error (each followed by "space is available again").
    expect.soft(logged.filter((l) => l.startsWith('error ')).length, logged.slice(0, 2).join(' / ')).toBe(0);
  });

  it('fails a put when a new segment cannot be created, and leaves no file behind', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { segmentBytes: 64 * KiB, fs: ffs });
    await settle(s.binlog);
    ffs.budget = ffs.usage() + 10 * KiB;
    let n = 0;
    while (n < 1000 && s.c.tryPut({ body: patternBody(1000, n) }).ok) n++;
    // A 64 KiB segment keeps 16 KiB of headroom, so about 47 KiB of jobs fit.
    expect(n).toBeGreaterThan(40);
    expect(n).toBeLessThan(50);
    expect(fs.readdirSync(dir).filter((f) => f.startsWith('binlog.'))).toEqual([segmentFileName(1)]);
    expect(ffs.usage()).toBeLessThanOrEqual(ffs.budget);
    expect(s.binlog.stats()).toMatchObject({ currentIndex: 1, failure: expect.stringMatching(/ENOSPC/) });
    await settle(s.binlog);
    ffs.crash();
    const after = startBinlog(dir, cleanups);
    expectSameJobs(s.h, after.h);
    expect(after.h.engine.jobTotal).toBe(n);
  });

  it('starts on a nearly full disk with only the segment header claimed, refusing puts', () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    ffs.budget = 100;
    const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined, fs: ffs });
    const h = new Harness({ journal: binlog });
    const recovery = recover(dir, MAX_PAYLOAD, h.engine);
    binlog.open(recovery.segments, 0, h.engine);
    expect(fs.statSync(path.join(dir, segmentFileName(1))).size).toBe(SEGMENT_HEADER_BYTES);
    expect(h.open().tryPut()).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(binlog.stats().failure).toMatch(/ENOSPC/);
    binlog.close();
  });

  it('refuses to start when not even a segment header can be written', () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    ffs.budget = 10;
    const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined, fs: ffs });
    const h = new Harness({ journal: binlog });
    const recovery = recover(dir, MAX_PAYLOAD, h.engine);
    expect(() => binlog.open(recovery.segments, 0, h.engine)).toThrow(/cannot create a binlog segment .*ENOSPC/);
    expect(fs.readdirSync(dir).filter((f) => f.startsWith('binlog.'))).toEqual([]);
  });
});

describe('group commit', () => {
  it('writes the records of one turn with one write, and advances durableSeq only at the commit', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const { binlog, c } = startBinlog(dir, cleanups, { fs: ffs });
    await settle(binlog);
    const writesBefore = ffs.writesTo(1);
    const seqBefore = binlog.appendedSeq;
    const durableBefore = binlog.durableSeq;
    const told: number[] = [];

    for (let i = 0; i < 200; i++) c.put({ body: `job ${i}` });
    const seq = binlog.appendedSeq;
    expect(seq).toBe(seqBefore + 200);
    binlog.whenDurable(seqBefore + 1, () => told.push(seqBefore + 1));
    binlog.whenDurable(seq, () => told.push(seq));
    expect(ffs.writesTo(1)).toBe(writesBefore);
    expect(binlog.durableSeq).toBe(durableBefore);
    expect(told).toEqual([]);

    await turn();
    expect(ffs.writesTo(1)).toBe(writesBefore + 1);
    expect(binlog.durableSeq).toBe(seq);
    expect(told).toEqual([seqBefore + 1, seq]);

    // The records are on disk now, before any close.
    const rec = replay(dir);
    expect(rec.jobs.size).toBe(200);
    expect(rec.problems).toEqual([]);

    // A record already durable is acknowledged at once; an idle turn writes nothing.
    binlog.whenDurable(seq, () => told.push(-1));
    expect(told.at(-1)).toBe(-1);
    await turn();
    await turn();
    expect(ffs.writesTo(1)).toBe(writesBefore + 1);
  });

  it('with fsync 0, advances durableSeq only after the fsync callback', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const { binlog, c } = startBinlog(dir, cleanups, { fs: ffs, fsyncMs: 0 });
    await settle(binlog);
    ffs.holdSyncs = true;
    const durableBefore = binlog.durableSeq;
    for (let i = 0; i < 50; i++) c.put({ body: `job ${i}` });
    const seq = binlog.appendedSeq;
    let told = false;
    binlog.whenDurable(seq, () => (told = true));

    const writesBefore = ffs.writesTo(1);
    await turn();
    expect(ffs.writesTo(1)).toBe(writesBefore + 1); // written...
    expect(ffs.heldSyncs).toBe(1); // ...and being synced
    for (let i = 0; i < 5; i++) await turn();
    expect(binlog.durableSeq).toBe(durableBefore);
    expect(told).toBe(false);

    // More records while the sync is in flight: they wait for a second sync.
    c.put({ body: 'late' });
    const late = binlog.appendedSeq;
    let lateTold = false;
    binlog.whenDurable(late, () => (lateTold = true));
    await turn();
    expect(ffs.heldSyncs).toBe(1);

    ffs.releaseSyncs();
    expect(await waitFor(() => told, 5000)).toBe(true); // a real fdatasync, in the thread pool
    expect(binlog.durableSeq).toBeGreaterThanOrEqual(seq);
    expect(binlog.durableSeq).toBeLessThan(late);
    expect(lateTold).toBe(false);

    expect(await waitFor(() => ffs.heldSyncs === 1, 5000)).toBe(true);
    ffs.holdSyncs = false;
    ffs.releaseSyncs();
    expect(await waitFor(() => lateTold, 5000)).toBe(true);
    expect(binlog.durableSeq).toBe(late);
  });

  it('with fsync every N ms, acknowledges at the write and syncs in the background', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const { binlog, c } = startBinlog(dir, cleanups, { fs: ffs, fsyncMs: 20 });
    await settle(binlog);
    ffs.holdSyncs = true;
    c.put();
    await turn();
    expect(binlog.durableSeq).toBe(binlog.appendedSeq);
    expect(await waitFor(() => ffs.heldSyncs === 1, 5000)).toBe(true); // started by the 20 ms timer
    ffs.holdSyncs = false;
    ffs.releaseSyncs();
  });
});

describe('segments and stats', () => {
  it('rolls to a new segment at segmentBytes, trimming the full one; job.file names the segment', async () => {
    const dir = tmpDir();
    const segmentBytes = 16 * KiB;
    const { binlog, c, h } = startBinlog(dir, cleanups, { segmentBytes });
    expect(binlog.stats()).toMatchObject({ oldestIndex: 1, currentIndex: 1, recordsWritten: 0, recordsMigrated: 0, maxSize: segmentBytes, failure: null });
    const jobs: Job[] = [];
    for (let i = 0; i < 60; i++) {
      jobs.push(c.put({ body: patternBody(1000, i) }));
      if (i % 7 === 0) await settle(binlog);
    }
    await settle(binlog);
    const st = binlog.stats();
    expect(st.oldestIndex).toBe(1);
    expect(st.currentIndex).toBeGreaterThanOrEqual(4);
    expect(st.recordsWritten).toBe(60);
    expect(st.recordsMigrated).toBe(0);
    expect(jobFile(jobs[0]!)).toBe(1);
    expect(jobFile(jobs.at(-1)!)).toBe(st.currentIndex);
    for (let i = 1; i < jobs.length; i++) expect(jobFile(jobs[i]!)).toBeGreaterThanOrEqual(jobFile(jobs[i - 1]!));

    // Closed segments are cut to their records and stay within segmentBytes.
    const sizes = new Map<number, number>();
    for (let i = 1; i <= st.currentIndex; i++) sizes.set(i, fs.statSync(path.join(dir, segmentFileName(i))).size);
    for (let i = 1; i < st.currentIndex; i++) {
      expect(sizes.get(i)).toBeLessThanOrEqual(segmentBytes);
      expect(sizes.get(i)).toBeGreaterThan(segmentBytes / 2);
    }
    let disk = 0;
    for (const v of sizes.values()) disk += v;
    expect(st.diskBytes).toBe(disk);

    // A state change and a delete are records too.
    const w = h.open();
    expect(h.engine.reserveJob(w.session, jobs[0]!.id).ok).toBe(true);
    expect(h.engine.bury(w.session, jobs[0]!.id, 1).ok).toBe(true);
    expect(h.engine.delete(null, jobs[1]!.id).ok).toBe(true);
    await settle(binlog);
    expect(binlog.stats().recordsWritten).toBe(62); // a reserve from ready writes nothing

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    for (const i of [...sizes.keys()].slice(0, -1)) expect(rec.segments.find((sg) => sg.index === i)!.bytes).toBe(sizes.get(i));
    for (const job of h.engine.allJobs()) expect(jobFile(rec.jobs.get(job.id)!)).toBe(jobFile(job));
    expect(fieldsOf(rec.jobs.get(jobs[0]!.id))).toMatchObject({ state: 'buried', file: 1 });
  });

  it.skipIf(process.getuid?.() !== 0)('gives every segment it creates to the owner it was given (-u as root)', async () => {
    const dir = tmpDir();
    const owner = { uid: 65534, gid: 65534 };
    const { binlog, c } = startBinlog(dir, cleanups, { segmentBytes: 16 * KiB, owner });
    for (let i = 0; i < 60; i++) c.put({ body: patternBody(1000, i) });
    await settle(binlog);
    const segments = fs.readdirSync(dir).filter((name) => name.endsWith('.bp'));
    expect(segments.length).toBeGreaterThanOrEqual(4);
    for (const name of segments) expect(fs.statSync(path.join(dir, name)), name).toMatchObject(owner);
  });

  it('gives a record larger than a segment a segment of its own', async () => {
    const dir = tmpDir();
    const { binlog, c, h } = startBinlog(dir, cleanups, { segmentBytes: 16 * KiB });
    const a = c.put({ body: 'a' });
    const big = c.put({ body: patternBody(40 * KiB, 1) });
    const b = c.put({ body: 'b' });
    await settle(binlog);
    expect(jobFile(a)).toBe(1);
    expect(jobFile(big)).toBe(2);
    expect(jobFile(b)).toBe(2);
    expect(fs.statSync(path.join(dir, segmentFileName(1))).size).toBe(SEGMENT_HEADER_BYTES + jobRecordBytes(7, 1));
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    const after = rec.h;
    expectSameJobs(h, after);
  });

  it('writes a record larger than the batch buffer in place, in order with the batched ones', async () => {
    for (const segmentBytes of [MiB, 8 * MiB]) {
      const dir = tmpDir();
      const { binlog, c, h } = startBinlog(dir, cleanups, { segmentBytes });
      const a = c.put({ body: 'first' });
      const big = c.put({ body: patternBody(MiB + 512 * KiB, 7), priority: 3 });
      const b = c.put({ body: 'after' });
      expect(h.engine.delete(null, a.id).ok).toBe(true);
      const w = h.open();
      expect(h.engine.reserveJob(w.session, big.id).ok).toBe(true);
      expect(h.engine.bury(w.session, big.id, 4).ok).toBe(true);
      await settle(binlog);
      const rec = replay(dir);
      expect(rec.problems, `segmentBytes ${segmentBytes}`).toEqual([]);
      expect([...rec.jobs.keys()].sort((x, y) => x - y)).toEqual([big.id, b.id]);
      expect(fieldsOf(rec.jobs.get(big.id))).toMatchObject({ state: 'buried', priority: 4, buries: 1 });
      expect(jobBody(rec.jobs.get(big.id)!).equals(jobBody(big))).toBe(true);
      expect(jobFile(rec.jobs.get(b.id)!)).toBe(jobFile(b));
      expect(binlog.stats().recordsWritten).toBe(5); // put, put, put, delete, bury
    }
  });

  it('starts a fresh segment on every start, after the recovered ones', async () => {
    const dir = tmpDir();
    const first = startBinlog(dir, cleanups);
    first.c.put({ body: 'one' });
    await settle(first.binlog);
    first.binlog.close();
    const second = startBinlog(dir, cleanups);
    expect(second.binlog.stats()).toMatchObject({ oldestIndex: 1, currentIndex: 2, recordsWritten: 0 });
    expect(jobFile(second.h.engine.job(1)!)).toBe(1);
    second.c.put({ body: 'two' });
    await settle(second.binlog);
    second.binlog.close();
    const third = startBinlog(dir, cleanups);
    expect(third.h.engine.jobTotal).toBe(2);
    expect(jobFile(third.h.engine.job(2)!)).toBe(2);
    expect(third.binlog.stats().currentIndex).toBe(3);
  });

  it('never writes into a segment that recovery skipped for its bad header', async () => {
    const dir = tmpDir();
    const first = startBinlog(dir, cleanups);
    first.c.put({ body: 'kept' });
    await settle(first.binlog);
    first.binlog.close();
    // A later segment of a future format version: recovery leaves it in place for a human.
    const img = [...first.h.engine.allJobs()][0]!;
    const rec = Buffer.alloc(jobRecordBytes(7, 5));
    const fields = { ...jobImageOf(img), id: 50, body: Buffer.from('stale') };
    encodeJob(rec, 0, fields, 'ready', 'default', SALT);
    const damaged = Buffer.concat([encodeSegmentHeader(2, 0, SALT), rec]);
    damaged.writeUInt32LE(FORMAT_VERSION + 1, 8);
    damaged.writeUInt32LE(crc32(damaged.subarray(0, 28), 0), 28);
    const badPath = path.join(dir, segmentFileName(2));
    fs.writeFileSync(badPath, damaged);

    const second = startBinlog(dir, cleanups);
    expect(second.recovery.problems).toEqual([`${badPath}:0: unknown format version ${FORMAT_VERSION + 1}; the whole file is skipped and left in place`]);
    second.c.put({ body: 'new' });
    await settle(second.binlog);
    expect(second.binlog.stats().currentIndex).toBeGreaterThan(2);
    const now = fs.readFileSync(badPath);
    expect(now.length).toBe(damaged.length);
    expect(now.equals(damaged)).toBe(true);
  });
});

describe('compaction', () => {
  it('keeps the directory bounded under put/delete churn, moving a buried job forward', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const s = startBinlog(dir, cleanups, { segmentBytes });
    const { h, c, binlog } = s;
    const w = h.open();
    const buried = c.put({ body: 'the one that stays', priority: 9 });
    expect(h.engine.reserveJob(w.session, buried.id).ok).toBe(true);
    expect(h.engine.bury(w.session, buried.id, 11).ok).toBe(true);
    await settle(binlog);

    // Segments may reach max(2 x live, 3 segments) before compaction starts, plus the chunk
    // claimed ahead in the current one.
    const bound = 3 * segmentBytes + segmentBytes + 64;
    let maxSettled = 0;
    let maxSeen = 0;
    for (let round = 0; round < 250; round++) {
      for (let i = 0; i < 20; i++) {
        const job = c.put({ body: patternBody(1000, round + i) });
        expect(h.engine.delete(null, job.id).ok).toBe(true);
      }
      for (let t = 0; t < 20; t++) {
        await turn();
        maxSeen = Math.max(maxSeen, dirBytes(dir));
      }
      maxSettled = Math.max(maxSettled, dirBytes(dir));
    }
    await settle(binlog);
    const st = binlog.stats();
    expect(st.currentIndex).toBeGreaterThan(50); // ~5 MB went through 64 KiB segments
    expect(st.oldestIndex).toBeGreaterThan(1);
    expect(st.recordsMigrated).toBeGreaterThan(0);
    expect(maxSettled).toBeLessThanOrEqual(bound);
    expect(maxSeen).toBeLessThanOrEqual(bound);
    expect(fs.existsSync(path.join(dir, segmentFileName(1)))).toBe(false);
    expect(jobFile(buried)).toBeGreaterThan(1);
    expect(s.fatal).toEqual([]);
    // Compaction keeps its live counts right: nothing to warn about.
    expect(s.logs.filter((l) => !l.startsWith('info '))).toEqual([]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect([...rec.jobs.keys()]).toEqual([buried.id]);
    expect(fieldsOf(rec.jobs.get(buried.id))).toMatchObject({
      state: 'buried',
      priority: 11,
      reserves: 1,
      buries: 1,
      buriedSeq: jobCounters(buried).buriedSeq,
      file: jobFile(buried),
      body: Buffer.from('the one that stays'),
    });
    expect(rec.nextId).toBe(h.engine.nextId);
    const after = rec.h;
    expect(after.engine.peekBuried(after.engine.defaultTube)!.id).toBe(buried.id);
    expectSameJobs(h, after);
  });

  it('keeps every live job exact while many of them move, and the directory near twice the live bytes', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { segmentBytes, fsyncMs: 0, fs: ffs });
    const { h, c, binlog } = s;
    const w = h.open();
    // 300 live jobs (~330 KiB) in every durable state, then churn around them.
    const keep: Job[] = [];
    for (let i = 0; i < 300; i++) keep.push(c.put({ body: patternBody(1000, i), priority: i, delayMs: i % 5 === 0 ? 1_000_000 + i : 0 }));
    for (const job of keep.filter((_, i) => i % 7 === 1)) {
      expect(h.engine.reserveJob(w.session, job.id).ok).toBe(true);
      expect(h.engine.bury(w.session, job.id, 2).ok).toBe(true);
    }
    await settle(binlog);
    let liveBytes = 0;
    for (const job of keep) liveBytes += jobRecordBytes(7, jobBody(job).length);
    const bound = Math.max(2 * liveBytes, 3 * segmentBytes) + segmentBytes + 64;

    let maxSettled = 0; // above the bound only if compaction did not get there
    let putFailed: string | null = null;
    for (let round = 0; round < 200 && putFailed === null; round++) {
      for (let i = 0; i < 20; i++) {
        const r = c.tryPut({ body: patternBody(1000, round) });
        if (!r.ok) {
          putFailed = `round ${round}: ${r.code} (${binlog.stats().failure})`;
          break;
        }
        expect(h.engine.delete(null, r.value.id).ok).toBe(true);
      }
      if (putFailed !== null) break;
      // Some live jobs change state as compaction moves them.
      const k = keep[(round * 13) % keep.length]!;
      if (jobState(k) === 'buried') expect(h.engine.kickJob(k.id).ok).toBe(true);
      else if (jobState(k) === 'ready') {
        expect(h.engine.reserveJob(w.session, k.id).ok).toBe(true);
        expect(h.engine.bury(w.session, k.id, 3).ok).toBe(true);
      }
      await settle(binlog);
      // Compaction waits for an fsync before it deletes a segment; give it the time it needs.
      if (!(await waitFor(() => dirBytes(dir) <= bound))) maxSettled = Math.max(maxSettled, dirBytes(dir));
    }
    // One sync round at a time (never two syncs of one file at once), and no segment closed
    // under a sync in flight (EBADF, or a sync of
    // whatever file reused the descriptor).
    expect(ffs.closedWhileSyncing).toEqual([]);
    expect(ffs.maxSyncsPerFd).toBe(1);
    expect(s.fatal).toEqual([]);
    expect(putFailed).toBeNull();
    // Two jobs are reserved at the "crash".
    expect(h.engine.reserveJob(w.session, keep[2]!.id).ok).toBe(true);
    expect(h.engine.reserveJob(w.session, keep[3]!.id).ok).toBe(true);
    await settle(binlog);
    expect(binlog.stats().recordsMigrated).toBeGreaterThan(300);
    expect(maxSettled).toBe(0);
    // Compaction keeps its live counts right: nothing to warn about.
    expect(s.logs.filter((l) => !l.startsWith('info '))).toEqual([]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    const after = rec.h;
    // keep[2] and keep[3] were reserved from ready (no record), so their reserves count is the last recorded one.
    const reservedAtCrash = new Set([keep[2]!.id, keep[3]!.id]);
    for (const job of h.engine.allJobs()) {
      const want = durableFields(job);
      if (reservedAtCrash.has(job.id)) want.reserves = job.reserves - 1;
      expect(durableFields(after.engine.job(job.id)!), `job ${job.id}`).toEqual(want);
    }
    expect(after.engine.jobTotal).toBe(h.engine.jobTotal);
    for (const job of h.engine.allJobs()) expect(jobFile(rec.jobs.get(job.id)!)).toBe(jobFile(job));
  });

  it('moves the jobs of a segment recovered from a damaged header forward and deletes it; a restart then finds them all', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const first = startBinlog(dir, cleanups, { segmentBytes });
    const w = first.h.open();
    const kept: Job[] = [];
    for (let i = 0; i < 50; i++) kept.push(first.c.put({ body: patternBody(100, i), priority: i, delayMs: i % 10 === 0 ? 3_600_000 : 0 }));
    for (const job of kept.filter((_, i) => i % 10 === 5)) {
      expect(first.h.engine.reserveJob(w.session, job.id).ok).toBe(true);
      expect(first.h.engine.bury(w.session, job.id, 7).ok).toBe(true);
    }
    await settle(first.binlog);
    first.binlog.close();
    const want = new Map([...first.h.engine.allJobs()].map((j) => [j.id, durableFields(j)]));
    // The index field of the only segment's header: the file name still says 1.
    const seg1 = path.join(dir, segmentFileName(1));
    const data = fs.readFileSync(seg1);
    data[12]! ^= 0x01;
    fs.writeFileSync(seg1, data);

    const second = startBinlog(dir, cleanups, { segmentBytes });
    expect(second.recovery.problems).toHaveLength(1);
    expect(second.recovery.problems[0]).toMatch(/^.*binlog\.1\.bp:0: header damaged .* 55 records \(50 jobs\) recovered, 32 bytes skipped/);
    for (const job of second.h.engine.allJobs()) expect(jobFile(job)).toBe(1);
    expect(second.binlog.stats()).toMatchObject({ oldestIndex: 1, currentIndex: 2 });
    // Churn until compaction has moved the 50 jobs out of segment 1 and deleted it.
    for (let round = 0; round < 100 && fs.existsSync(seg1); round++) {
      for (let i = 0; i < 20; i++) expect(second.h.engine.delete(null, second.c.put({ body: patternBody(1000, i) }).id).ok).toBe(true);
      await settle(second.binlog);
      for (let t = 0; t < 20; t++) await turn();
    }
    expect(fs.existsSync(seg1), 'segment 1 deleted by compaction').toBe(false);
    expect(second.binlog.stats().recordsMigrated).toBeGreaterThanOrEqual(50);
    expect(second.fatal).toEqual([]);
    expect(second.logs.filter((l) => !l.startsWith('info '))).toEqual([]);
    for (const job of second.h.engine.allJobs()) expect(jobFile(job)).toBeGreaterThan(1);
    second.binlog.close();

    const third = startBinlog(dir, cleanups, { segmentBytes });
    expect(third.recovery.problems).toEqual([]);
    expect(third.h.engine.jobTotal).toBe(50);
    for (const job of third.h.engine.allJobs()) expect(durableFields(job), `job ${job.id}`).toEqual(want.get(job.id));
  });

  it('continues after a restart over many old segments', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const first = startBinlog(dir, cleanups, { segmentBytes });
    const keeper = first.c.put({ body: 'keeper', delayMs: 60_000 });
    for (let round = 0; round < 40; round++) {
      const ids: number[] = [];
      for (let i = 0; i < 20; i++) ids.push(first.c.put({ body: patternBody(1000, i) }).id);
      for (const id of ids) expect(first.h.engine.delete(null, id).ok).toBe(true);
      await settle(first.binlog);
    }
    first.binlog.close();
    const second = startBinlog(dir, cleanups, { segmentBytes });
    expect(fieldsOf(second.h.engine.job(keeper.id))).toMatchObject({ state: 'delayed', deadlineAt: jobDeadlineAt(keeper) });
    for (let t = 0; t < 200; t++) await turn();
    expect(dirBytes(dir)).toBeLessThanOrEqual(4 * segmentBytes + 64);
    second.c.put({ body: 'more' });
    await settle(second.binlog);
    second.binlog.close();
    const third = startBinlog(dir, cleanups, { segmentBytes });
    expect(third.recovery.problems).toEqual([]);
    expect(third.h.engine.jobTotal).toBe(2);
    expect(fieldsOf(third.h.engine.job(keeper.id))).toMatchObject({ state: 'delayed', deadlineAt: jobDeadlineAt(keeper), body: Buffer.from('keeper') });
  });
});

describe('the dead-letter rule across restarts', () => {
  it('keeps strikes, bury causes and tube settings, and moves a tube setting forward when its segment is compacted', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const s = startBinlog(dir, cleanups, { segmentBytes });
    const { h, c, binlog } = s;
    expect(h.engine.setTubeSettings('default', { deadLetterAfter: 3 }).ok).toBe(true);
    expect(h.engine.setTubeSettings('gone', { deadLetterAfter: 9 }).ok).toBe(true);
    expect(h.engine.setTubeSettings('cleared', { deadLetterAfter: 4 }).ok).toBe(true);
    expect(h.engine.setTubeSettings('cleared', null).ok).toBe(true);
    const w = h.open();
    const struck = c.put({ body: 'released twice' });
    const dead = c.put({ body: 'released three times' });
    for (const job of [struck, struck, dead, dead, dead]) {
      expect(h.engine.reserveJob(w.session, job.id).ok).toBe(true);
      expect(h.engine.release(w.session, job.id, 0, 0).ok).toBe(true);
    }
    expect(jobState(dead)).toBe('buried');
    // Churn until the segment holding the settings records is compacted away.
    for (let round = 0; round < 150; round++) {
      for (let i = 0; i < 20; i++) {
        const job = c.put({ body: patternBody(1000, round + i) });
        expect(h.engine.delete(null, job.id).ok).toBe(true);
      }
      for (let t = 0; t < 20; t++) await turn();
    }
    await settle(binlog);
    expect(fs.existsSync(path.join(dir, segmentFileName(1)))).toBe(false);
    expect(s.logs.filter((l) => !l.startsWith('info '))).toEqual([]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(rec.h.engine.ownTubeSettings('default')).toEqual({ deadLetterAfter: 3 });
    expect(rec.h.engine.ownTubeSettings('gone')).toEqual({ deadLetterAfter: 9 });
    expect(rec.h.engine.ownTubeSettings('cleared')).toBeNull();
    expect([...rec.tubeFiles.keys()].sort()).toEqual(['default', 'gone']);
    expect(fieldsOf(rec.jobs.get(struck.id))).toMatchObject({ state: 'ready', strikes: 2, buryCause: 0 });
    expect(fieldsOf(rec.jobs.get(dead.id))).toMatchObject({ state: 'buried', strikes: 3, buryCause: 3 - 1 });
    expectSameJobs(h, rec.h);
    // After the restart the limit holds: one more release of the struck job buries it.
    const after = rec.h;
    const worker = after.open();
    expect(after.engine.reserveJob(worker.session, struck.id).ok).toBe(true);
    expect(after.engine.release(worker.session, struck.id, 0, 0).ok).toBe(true);
    expect(jobState(after.engine.job(struck.id)!)).toBe('buried');
  });
});

describe('write errors', () => {
  it('calls onFatal when a batch write fails with EIO, and acknowledges nothing after', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { fs: ffs });
    const { binlog, c, h } = s;
    c.put({ body: 'safe' });
    await settle(binlog);
    const durableBefore = binlog.durableSeq;

    ffs.eio = true;
    const doomed = c.put({ body: 'doomed' }); // accepted into the batch: its space is claimed
    let told = false;
    binlog.whenDurable(binlog.appendedSeq, () => (told = true));
    expect(s.fatal).toEqual([]);
    await turn();
    expect(s.fatal).toHaveLength(1);
    expect((s.fatal[0] as NodeJS.ErrnoException).code).toBe('EIO');
    expect(binlog.durableSeq).toBe(durableBefore);
    expect(told).toBe(false);
    expect(binlog.stats().failure).toMatch(/^binlog write failed: EIO/);

    // Nothing more is accepted, and onFatal is not called again.
    expect(c.tryPut({ body: 'x' })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(h.engine.delete(null, doomed.id)).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    for (let i = 0; i < 5; i++) await turn();
    expect(s.fatal).toHaveLength(1);
    expect(told).toBe(false);
  });

  it('calls onFatal when an fsync fails, before acknowledging with fsync 0', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { fs: ffs, fsyncMs: 0 });
    await settle(s.binlog);
    ffs.syncError = errnoError('EIO', 'i/o error, fsync');
    s.c.put();
    let told = false;
    s.binlog.whenDurable(s.binlog.appendedSeq, () => (told = true));
    for (let i = 0; i < 20 && s.fatal.length === 0; i++) await turn();
    expect(s.fatal.map((e) => (e as NodeJS.ErrnoException).code)).toEqual(['EIO']);
    expect(told).toBe(false);
    expect(s.binlog.durableSeq).toBeLessThan(s.binlog.appendedSeq);
  });

  it('treats EIO while claiming space like a full disk, not as fatal', async () => {
    const dir = tmpDir();
    const ffs = new FaultFs(dir);
    const s = startBinlog(dir, cleanups, { fs: ffs, segmentBytes: 64 * KiB });
    await settle(s.binlog);
    ffs.budget = ffs.usage();
    let n = 0;
    while (n < 200 && s.c.tryPut({ body: patternBody(1000, n) }).ok) n++;
    expect(n).toBeLessThan(200);
    expect(s.fatal).toEqual([]);
    await settle(s.binlog);
    expect(s.fatal).toEqual([]);
  });
});
