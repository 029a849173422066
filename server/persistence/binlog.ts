import { fchownSync, readdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Job, JobState } from '../engine/records.js';
import type { Durability, Journal, TubeSettings } from '../engine/journal.js';
import type { TubePolicy } from '../../shared/policy.js';
import {
  DELETE_RECORD_BYTES,
  SEGMENT_HEADER_BYTES,
  STATE_RECORD_BYTES,
  encodeDelete,
  encodeJob,
  encodeJobHead,
  encodeSegmentHeader,
  encodeState,
  encodeTube,
  policyBytes,
  jobRecordBytes,
  parseSegmentFileName,
  segmentFileName,
  tubeRecordBytes,
  type TubeSettingsImage,
} from './format.js';
import { BinlogDirError } from './dir-error.js';
import { nodeFileSystem, type FileSystem } from './file-system.js';
import { IdMark } from './id-mark.js';
import type { SegmentOnDisk, TubeFile } from './recovery.js';
import { setJobFile, jobFile, jobBody, jobState, fillJobImage, newJobImage } from '../engine/records.js';
import { bodyLengthOf } from '../engine/body-store.js';

export interface BinlogOptions {
  dir: string;
  /** Target size of one segment file (`-s`); a single larger record gets a segment of its own. */
  segmentBytes: number;
  /** fsync at most every this many ms; 0 before every acknowledgement; null never (`-F`). */
  fsyncMs: number | null;
  log: Logger;
  fs?: FileSystem;
  /**
   * With -u as root: the user every new segment is given to. Root keeps its ids for a moment
   * after the binlog opens (until the ports are bound), and a segment made then must still
   * belong to the user the server becomes, or the next start could not open it.
   */
  owner?: { uid: number; gid: number } | null;
  /** A write or fsync failed on space the binlog already held: stop without acknowledging. */
  onFatal: (err: Error) => void;
}

/** What the binlog needs from the engine: the id counter and the live jobs (for compaction). */
export interface JobSource {
  readonly nextId: number;
  job(id: number): Job | undefined;
  allJobs(): IterableIterator<Job>;
}

export interface BinlogStats {
  oldestIndex: number;
  currentIndex: number;
  recordsWritten: number;
  recordsMigrated: number;
  maxSize: number;
  /** Bytes of all segment files, preallocated space included. */
  diskBytes: number;
  /** Why records cannot be written right now, or null. */
  failure: string | null;
}

interface Segment {
  index: number;
  path: string;
  /** Bytes the file holds, preallocated zeros included. */
  bytes: number;
  live: number;
}

interface OpenSegment extends Segment {
  fd: number;
  /** Seeds the checksums of the records in this segment (see format.ts). */
  salt: number;
  /** End of the records appended so far (written or in the batch). */
  used: number;
}

/** Records gathered in one turn of the event loop go out in one write. */
const BATCH_BYTES = 1 << 20;
/** Space is claimed ahead of use by writing zeros, so a full disk shows up before a change is made. */
const CHUNK_BYTES = 1 << 20;
/** Room that new jobs may not use, so deletes, buries and kicks still work when the disk is full. */
const HEADROOM_BYTES = 64 << 10;
/** After a failed claim, do not hit the disk again for this long. */
const RETRY_AFTER_MS = 100;
/** After a whole chunk did not fit, claim only what each record needs for this long. */
const SMALL_CLAIMS_MS = 1000;
/** Compaction starts when the segments outgrow max(2 x live bytes, this many segments). */
const MIN_SEGMENTS_KEPT = 3;
/** Per slice of compaction: jobs looked at and bytes rewritten, so one slice takes a few ms at most. */
const COMPACT_SCAN_SLICE = 4096;
const COMPACT_WRITE_SLICE = 512 << 10;

function roundUp(n: number, unit: number): number {
  return Math.ceil(n / unit) * unit;
}

/**
 * The append-only, crash-safe job log behind the engine's Journal interface.
 *
 * - Space is claimed before a change is made: a put that cannot be recorded fails with
 *   OUT_OF_MEMORY and nothing changes; the server keeps serving and retries as space returns.
 * - Group commit: records made in one turn are written with one write in the check phase, and
 *   replies wait for that write (and for the fsync with `-f 0`), see Durability.
 * - Compaction rewrites the live jobs of the oldest segment forward and deletes it, in slices.
 */
export class Binlog implements Journal, Durability {
  appendedSeq = 0;
  private writtenSeq = 0;
  private syncedSeq = 0;
  private readonly waiters: { seq: number; fn: () => void }[] = [];
  private waiterHead = 0;

  private readonly fs: FileSystem;
  private readonly log: Logger;
  private readonly segmentBytes: number;
  private readonly chunkBytes: number;
  private readonly headroom: number;
  private readonly fsyncMs: number | null;
  private closed: Segment[] = [];
  private readonly byIndex = new Map<number, Segment>();
  /** Tubes with settings of their own: the values and the segment of their latest record. */
  private readonly tubeFiles = new Map<string, TubeFile>();
  private current!: OpenSegment;
  private idMark!: IdMark;
  private source: JobSource | null = null;

  private readonly batch = Buffer.allocUnsafe(BATCH_BYTES);
  /** What a record is encoded from, refilled for each job (engine job records pack their fields). */
  private readonly image = newJobImage(NO_BODY);
  private batchLen = 0;
  private batchPos = 0;
  private commitQueued = false;

  private syncing = false;
  private lastSyncAt = 0;
  private syncTimer: NodeJS.Timeout | null = null;
  /** Rolled segments still to be synced once (then closed); the next sync covers them. */
  private rolledFds: number[] = [];
  /** Rolled segments whose final sync is in flight. */
  private syncingRolled: number[] = [];
  private readonly afterSync: (() => void)[] = [];

  private liveBytes = 0;
  private recordsWritten = 0;
  private recordsMigrated = 0;
  private failure: string | null = null;
  private failedAt = 0;
  private smallClaimsUntil = 0;
  private zeros = Buffer.alloc(0);
  private fatal = false;
  private stopped = false;

  private compacting = false;
  private compactScan: IterableIterator<Job> | null = null;

  constructor(private readonly options: BinlogOptions) {
    this.fs = options.fs ?? nodeFileSystem;
    this.log = options.log;
    // Like beanstalkd, -s is used rounded up to whole 4 KiB pages (stats show it as given).
    this.segmentBytes = roundUp(Math.max(options.segmentBytes, 1), 4096);
    this.chunkBytes = Math.min(CHUNK_BYTES, this.segmentBytes);
    this.headroom = Math.min(HEADROOM_BYTES, Math.floor(this.chunkBytes / 4));
    this.fsyncMs = options.fsyncMs;
  }

  /**
   * Starts writing, after recovery: `segments` are those found on disk (oldest first) with
   * their live counts, `liveBytes` the restored jobs' record bytes, and `source` the engine
   * whose journal this is. Like beanstalkd, every start writes to a fresh segment.
   */
  open(segments: readonly SegmentOnDisk[], liveBytes: number, source: JobSource, tubeFiles: ReadonlyMap<string, TubeFile> = new Map()): void {
    for (const [tube, f] of tubeFiles) this.tubeFiles.set(tube, { ...f });
    const dir = this.options.dir;
    this.closed = segments.map((s) => ({ index: s.index, path: s.path, bytes: s.bytes, live: s.live }));
    // Segments with no records (a start with nothing written) hold nothing: delete them now.
    for (const seg of this.closed.filter((s) => s.bytes <= SEGMENT_HEADER_BYTES)) this.safeUnlink(seg.path);
    this.closed = this.closed.filter((s) => s.bytes > SEGMENT_HEADER_BYTES);
    for (const s of this.closed) this.byIndex.set(s.index, s);
    this.liveBytes = liveBytes;
    this.idMark = IdMark.open(dir, (fd, buf, pos) => this.fs.writeAll(fd, buf, pos));
    // The new segment goes above every segment file, including any recovery skipped and left in place.
    let highest = this.closed.at(-1)?.index ?? 0;
    for (const name of readdirSync(dir)) highest = Math.max(highest, parseSegmentFileName(name) ?? 0);
    // On a nearly full disk the server still starts, with only the header claimed.
    if (!this.openSegment(highest + 1, this.chunkBytes, SEGMENT_HEADER_BYTES)) {
      throw new BinlogDirError(`cannot create a binlog segment in ${dir}: ${this.failure}`);
    }
    this.source = source;
    this.idMark.store(source.nextId);
    this.maybeCompact();
  }

  get durableSeq(): number {
    return this.fsyncMs === 0 ? this.syncedSeq : this.writtenSeq;
  }

  whenDurable(seq: number, fn: () => void): void {
    if (seq <= this.durableSeq) fn();
    else this.waiters.push({ seq, fn });
  }

  stats(): BinlogStats {
    let diskBytes = this.current.bytes;
    for (const s of this.closed) diskBytes += s.bytes;
    return {
      oldestIndex: this.closed[0]?.index ?? this.current.index,
      currentIndex: this.current.index,
      recordsWritten: this.recordsWritten,
      recordsMigrated: this.recordsMigrated,
      maxSize: this.options.segmentBytes,
      diskBytes,
      failure: this.failure,
    };
  }

  // ---- Journal -------------------------------------------------------------------------------

  put(job: Job): boolean {
    const tubeBytes = job.tube.name.length;
    const size = jobRecordBytes(tubeBytes, bodyLengthOf(job));
    if (!this.claim(size, true)) return false;
    this.appendJob(job, size);
    setJobFile(job, this.current.index);
    this.current.live++;
    this.liveBytes += size;
    return true;
  }

  canUpdate(count: number): boolean {
    return this.claim(count * STATE_RECORD_BYTES, false);
  }

  update(job: Job): void {
    encodeState(this.batch, this.slot(STATE_RECORD_BYTES), fillJobImage(job, this.image), durableState(job), this.current.salt);
    this.appended(STATE_RECORD_BYTES);
  }

  delete(job: Job): boolean {
    if (!this.claim(DELETE_RECORD_BYTES, false)) return false;
    encodeDelete(this.batch, this.slot(DELETE_RECORD_BYTES), job.id, this.current.salt);
    this.appended(DELETE_RECORD_BYTES);
    const seg = this.byIndex.get(jobFile(job));
    if (seg !== undefined) seg.live--;
    this.liveBytes -= jobRecordBytes(job.tube.name.length, bodyLengthOf(job));
    return true;
  }

  setTubeSettings(tube: string, settings: TubeSettings | null): boolean {
    return this.writeTube(tube, settings, this.tubeFiles.get(tube)?.policy ?? null, false);
  }

  setTubePolicy(tube: string, policy: TubePolicy | null): boolean {
    return this.writeTube(tube, this.tubeFiles.get(tube)?.settings ?? null, policy, false);
  }

  /** A tube's record with both its settings and its policy (one record per tube is live). */
  private writeTube(tube: string, settings: TubeSettings | null, policy: TubePolicy | null, compacting: boolean): boolean {
    const json = policyBytes(policy);
    const size = tubeRecordBytes(tube.length, json.length);
    if (!this.claim(size, compacting)) return false;
    this.appendTube({ tube, settings, policy }, json, size);
    return true;
  }

  canRewrite(tubeNameBytes: number, bodyBytes: number): boolean {
    return this.claim(jobRecordBytes(tubeNameBytes, bodyBytes), true);
  }

  rewrite(job: Job, oldTubeNameBytes: number, oldBodyBytes: number): void {
    const size = jobRecordBytes(job.tube.name.length, bodyLengthOf(job));
    const old = this.byIndex.get(jobFile(job));
    if (old !== undefined) old.live--;
    this.liveBytes += size - jobRecordBytes(oldTubeNameBytes, oldBodyBytes);
    this.appendJob(job, size);
    setJobFile(job, this.current.index);
    this.current.live++;
  }

  // ---- space ---------------------------------------------------------------------------------

  /** True when `size` more bytes fit in claimed space; new data must also leave the headroom. */
  private claim(size: number, newData: boolean): boolean {
    if (this.fatal || this.stopped) return false;
    const want = size + (newData ? this.headroom : 0);
    const room = this.current.bytes - this.current.used;
    if (room >= want) return true;
    if (this.failure !== null && performance.now() - this.failedAt < RETRY_AFTER_MS) return !newData && room >= size;
    if (this.grow(want - room, size)) {
      if (this.failure !== null) {
        this.log.info({ dir: this.options.dir }, 'binlog: space is available again; writes resume');
        this.failure = null;
      }
      return true;
    }
    this.failedAt = performance.now();
    return !newData && room >= size;
  }

  /** Claims at least `extra` more bytes: in the current segment, or in a new one when it is full. */
  private grow(extra: number, recordSize: number): boolean {
    const cur = this.current;
    const chunk = roundUp(extra, this.chunkBytes);
    if (cur.bytes + chunk > this.segmentBytes && cur.used > SEGMENT_HEADER_BYTES) return this.roll(recordSize + this.headroom);
    // Near a full disk a whole chunk does not fit: for a while claim only what is needed, rather
    // than write (and take back) all the remaining free space on every put.
    const now = performance.now();
    if (now >= this.smallClaimsUntil) {
      if (this.extend(cur, chunk) === null) return true;
      this.smallClaimsUntil = now + SMALL_CLAIMS_MS;
    }
    const err = this.extend(cur, roundUp(extra, 4096));
    if (err === null) return true;
    this.cannotClaim(err);
    return false;
  }

  /**
   * Writes zeros from the end of the file so the blocks are the binlog's before it needs them.
   * On failure the file is cut back and the error returned.
   */
  private extend(seg: OpenSegment, add: number): Error | null {
    const zeros = this.zeros.length >= Math.min(add, this.chunkBytes) ? this.zeros : Buffer.alloc(this.chunkBytes);
    this.zeros = zeros;
    try {
      for (let done = 0; done < add; done += zeros.length) {
        this.fs.writeAll(seg.fd, add - done >= zeros.length ? zeros : zeros.subarray(0, add - done), seg.bytes + done);
      }
    } catch (err) {
      try {
        this.fs.truncate(seg.fd, seg.bytes);
      } catch {
        // The claim failed either way; the file keeps its old length or a zero tail.
      }
      return err as Error;
    }
    seg.bytes += add;
    return null;
  }

  /** Space could not be claimed: say why (a full disk, or another cause such as EACCES or EIO). */
  private cannotClaim(err: Error): void {
    const reason = `cannot claim binlog space: ${err.message}`;
    if (this.failure === null) {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'ENOSPC' || code === 'EDQUOT' ? 'no space' : `cannot write (${err.message})`;
      this.log.error({ dir: this.options.dir, err: err.message }, `binlog: ${why}; puts get OUT_OF_MEMORY until it can write again`);
    }
    this.failure = reason;
  }

  /** Starts the next segment; the full one is cut to its records and closed. */
  private roll(firstClaim: number): boolean {
    const old = this.current;
    const need = roundUp(firstClaim + SEGMENT_HEADER_BYTES, 4096);
    if (!this.openSegment(old.index + 1, Math.max(need, this.chunkBytes), need)) return false;
    this.flushBatchOf(old);
    try {
      this.fs.truncate(old.fd, old.used);
    } catch (err) {
      this.die(err as Error);
      return false;
    }
    old.bytes = old.used;
    // Its last records are synced by the next background sync, not here on the event loop;
    // with -f 0 no reply for them goes out before that.
    if (this.fsyncMs === null) this.fs.close(old.fd);
    else this.rolledFds.push(old.fd);
    const closedSeg: Segment = { index: old.index, path: old.path, bytes: old.bytes, live: old.live };
    this.closed.push(closedSeg);
    this.byIndex.set(closedSeg.index, closedSeg);
    return true;
  }

  /**
   * Creates segment `index` with its header and `bytes` claimed (at least `minBytes` when space is
   * short); on failure leaves nothing behind.
   */
  private openSegment(index: number, bytes: number, minBytes: number): boolean {
    const file = path.join(this.options.dir, segmentFileName(index));
    const salt = randomBytes(4).readUInt32LE(0);
    let fd = -1;
    let err: Error | null = null;
    try {
      fd = this.fs.openAppend(file);
      const owner = this.options.owner;
      if (owner) fchownSync(fd, owner.uid, owner.gid);
      this.fs.writeAll(fd, encodeSegmentHeader(index, Date.now(), salt), 0);
    } catch (e) {
      err = e as Error;
    }
    const seg: OpenSegment = { index, path: file, fd, salt, bytes: SEGMENT_HEADER_BYTES, used: SEGMENT_HEADER_BYTES, live: 0 };
    if (err === null && bytes > SEGMENT_HEADER_BYTES) {
      err = this.extend(seg, bytes - SEGMENT_HEADER_BYTES);
      if (err !== null && minBytes < bytes) err = this.extend(seg, Math.max(0, minBytes - SEGMENT_HEADER_BYTES));
    }
    if (err !== null) {
      if (fd >= 0) this.fs.close(fd);
      this.safeUnlink(file);
      this.cannotClaim(err);
      return false;
    }
    const prev = this.current as OpenSegment | undefined;
    if (prev !== undefined) this.flushBatchOf(prev);
    this.current = seg;
    this.byIndex.set(index, seg);
    this.batchPos = SEGMENT_HEADER_BYTES;
    return true;
  }

  private safeUnlink(file: string): void {
    try {
      this.fs.unlink(file);
    } catch {
      // Nothing was written there that anyone depends on.
    }
  }

  // ---- appending and group commit ------------------------------------------------------------

  /** Where in the batch to encode the next `size` bytes (at most a batch). */
  private slot(size: number): number {
    if (this.batchLen + size > this.batch.length) this.flushBatchOf(this.current);
    return this.batchLen;
  }

  private appendJob(job: Job, size: number): void {
    const img = fillJobImage(job, this.image);
    img.body = jobBody(job);
    if (size <= this.batch.length) {
      encodeJob(this.batch, this.slot(size), img, durableState(job), job.tube.name, this.current.salt);
      img.body = NO_BODY; // do not pin the job's slab
      this.appended(size);
      return;
    }
    // Too big to batch: written now, at its place after everything batched before it, as its
    // head and then the body straight from the store (no copy of a body that may be 1 GiB).
    this.flushBatchOf(this.current);
    const head = encodeJobHead(img, durableState(job), job.tube.name, this.current.salt);
    this.write(this.current.fd, head, this.current.used);
    this.write(this.current.fd, img.body, this.current.used + head.length);
    img.body = NO_BODY;
    this.current.used += size;
    this.batchPos = this.current.used;
    this.noteAppended();
  }

  /**
   * A tube's settings record. The latest one of a tube counts as live in its segment (compaction
   * moves it forward); a clearing record does not: once its segment is the oldest, every older
   * record it overrides is gone already.
   */
  private appendTube(img: TubeSettingsImage, json: Buffer, size: number): void {
    encodeTube(this.batch, this.slot(size), img, this.current.salt, json);
    this.appended(size);
    const old = this.tubeFiles.get(img.tube);
    if (old !== undefined) {
      const seg = this.byIndex.get(old.file);
      if (seg !== undefined) seg.live--;
      this.liveBytes -= old.bytes;
      this.tubeFiles.delete(img.tube);
    }
    if (img.settings !== null || img.policy !== null) {
      this.tubeFiles.set(img.tube, { file: this.current.index, settings: img.settings, policy: img.policy, bytes: size });
      this.current.live++;
      this.liveBytes += size;
    }
  }

  private appended(size: number): void {
    this.batchLen += size;
    this.current.used += size;
    this.noteAppended();
  }

  private noteAppended(): void {
    this.appendedSeq++;
    this.recordsWritten++;
    if (!this.commitQueued) {
      this.commitQueued = true;
      setImmediate(this.commit);
    }
  }

  private flushBatchOf(seg: OpenSegment): void {
    if (this.batchLen === 0) return;
    this.write(seg.fd, this.batch.subarray(0, this.batchLen), this.batchPos);
    this.batchPos += this.batchLen;
    this.batchLen = 0;
  }

  private write(fd: number, buf: Buffer, position: number): void {
    try {
      this.fs.writeAll(fd, buf, position);
    } catch (err) {
      this.die(err as Error);
    }
  }

  /** A write failed on space already claimed: the disk is failing, so nothing more is acknowledged. */
  private die(err: Error): void {
    if (this.fatal) return;
    this.fatal = true;
    this.failure = `binlog write failed: ${err.message}`;
    this.options.onFatal(err);
  }

  /** Writes the turn's batch, moves the id mark, then applies the fsync policy. */
  private readonly commit = (): void => {
    this.commitQueued = false;
    if (this.fatal) return;
    this.flushBatchOf(this.current);
    if (this.source !== null) {
      try {
        this.idMark.store(this.source.nextId);
      } catch (err) {
        this.die(err as Error);
      }
    }
    if (this.fatal) return;
    this.writtenSeq = this.appendedSeq;
    if (this.fsyncMs === 0) {
      if (!this.syncing) this.startSync();
    } else {
      this.notify();
      if (this.fsyncMs !== null) this.scheduleSync();
    }
    this.maybeCompact();
  };

  /** `-f MS`: sync now if the last one is MS old, else once the interval is up (tail of a burst). */
  private scheduleSync(): void {
    if (this.syncing || this.syncTimer !== null || this.syncedSeq >= this.writtenSeq) return;
    const wait = this.lastSyncAt + this.fsyncMs! - performance.now();
    if (wait <= 0) this.startSync();
    else {
      this.syncTimer = setTimeout(() => {
        this.syncTimer = null;
        if (!this.syncing) this.startSync();
      }, wait);
      this.syncTimer.unref();
    }
  }

  /** Syncs the current segment, after the sync in flight if there is one, then calls `then`. */
  private requestSync(then: () => void): void {
    this.afterSync.push(then);
    if (!this.syncing) this.startSync();
  }

  /**
   * One round of fdatasync in the background, of the current segment and of segments rolled
   * since the last round; it covers every write made before it started. One round at a time.
   */
  private startSync(): void {
    if (this.fatal || this.stopped || this.syncing) return;
    this.syncing = true;
    const upTo = this.writtenSeq;
    const callbacks = this.afterSync.splice(0);
    this.syncingRolled = this.rolledFds;
    this.rolledFds = [];
    const fds = [...this.syncingRolled, this.current.fd];
    let pending = fds.length;
    let failed: Error | null = null;
    const done = (err: Error | null): void => {
      failed ??= err;
      if (--pending > 0) return;
      this.syncing = false;
      this.lastSyncAt = performance.now();
      // After close() everything was synced and closed there; this late answer changes nothing.
      if (this.stopped) return;
      for (const fd of this.syncingRolled.splice(0)) this.fs.close(fd);
      if (failed !== null) return this.die(failed);
      if (upTo > this.syncedSeq) this.syncedSeq = upTo;
      for (const fn of callbacks) fn();
      if (this.fsyncMs === 0) this.notify();
      if (this.afterSync.length > 0 || (this.fsyncMs === 0 && this.writtenSeq > this.syncedSeq)) this.startSync();
      else if (this.fsyncMs !== null && this.fsyncMs > 0) this.scheduleSync();
    };
    for (const fd of fds) this.fs.sync(fd, done);
  }

  private notify(): void {
    const durable = this.durableSeq;
    while (this.waiterHead < this.waiters.length && this.waiters[this.waiterHead]!.seq <= durable) {
      this.waiters[this.waiterHead++]!.fn();
    }
    if (this.waiterHead === this.waiters.length) {
      this.waiters.length = 0;
      this.waiterHead = 0;
    }
  }

  // ---- compaction ----------------------------------------------------------------------------

  /**
   * True when there is work: the oldest segment holds no live job (deleting it frees space at
   * no cost), or the files have outgrown max(2 x live bytes, a few segments).
   */
  private shouldCompact(): boolean {
    const head = this.closed[0];
    if (head === undefined) return false;
    if (head.live === 0) return true;
    let total = this.current.bytes;
    for (const s of this.closed) total += s.bytes;
    return total > Math.max(2 * this.liveBytes, MIN_SEGMENTS_KEPT * this.segmentBytes);
  }

  private maybeCompact(): void {
    if (this.compacting || this.source === null || this.stopped || !this.shouldCompact()) return;
    this.compacting = true;
    setImmediate(this.compactSlice);
  }

  /**
   * One slice: drop the oldest segment if no live job's full record is in it; otherwise look at
   * the next few thousand live jobs and rewrite those whose record is there.
   */
  private readonly compactSlice = (): void => {
    const source = this.source!;
    if (this.stopped || this.fatal) return;
    const head = this.closed[0];
    if (head === undefined || !this.shouldCompact()) {
      this.compacting = false;
      this.compactScan = null;
      return;
    }
    if (head.live === 0) return this.dropHead(this.compactSlice);
    if (!this.moveTubeSettings(head.index)) return this.retryCompactionLater();
    if (head.live === 0) return this.dropHead(this.compactSlice);
    this.compactScan ??= source.allJobs();
    let written = 0;
    for (let n = 0; n < COMPACT_SCAN_SLICE && written < COMPACT_WRITE_SLICE; n++) {
      const next = this.compactScan.next();
      if (next.done === true) {
        this.compactScan = null;
        break;
      }
      const job = next.value;
      if (jobFile(job) !== head.index) continue;
      const size = jobRecordBytes(job.tube.name.length, bodyLengthOf(job));
      if (!this.claim(size, true)) return this.retryCompactionLater();
      // Moving a job forward is rewriting its full record unchanged.
      this.rewrite(job, job.tube.name.length, bodyLengthOf(job));
      this.recordsMigrated++;
      written += size;
    }
    if (head.live === 0) return this.dropHead(this.compactSlice);
    if (this.compactScan === null) {
      // A full pass found fewer jobs than the count says: recount rather than loop forever.
      this.log.warn({ segment: head.index, live: head.live }, 'binlog: segment live count was off; recounted');
      head.live = 0;
      for (const job of source.allJobs()) if (jobFile(job) === head.index) head.live++;
    }
    setImmediate(this.compactSlice);
  };

  /** No room to move a record forward: try again later rather than spin. */
  private retryCompactionLater(): void {
    this.compactScan = null;
    const retry = setTimeout(() => {
      this.compacting = false;
      this.maybeCompact();
    }, 1000);
    retry.unref();
  }

  /** Rewrites the tube settings records that sit in segment `index` (a few at most); false when there is no room. */
  private moveTubeSettings(index: number): boolean {
    for (const [tube, f] of this.tubeFiles) {
      if (f.file !== index) continue;
      if (!this.writeTube(tube, f.settings, f.policy, true)) return false;
      this.recordsMigrated++;
    }
    return true;
  }

  /**
   * Deletes the oldest segment once the records moved out of it are synced (the deleted file
   * was their only other copy). Compaction waits for that fsync, off the event loop.
   */
  private dropHead(then: () => void): void {
    const head = this.closed.shift()!;
    this.byIndex.delete(head.index);
    this.flushBatchOf(this.current);
    if (this.fsyncMs === null || this.fatal) {
      this.safeUnlink(head.path);
      return then();
    }
    this.requestSync(() => {
      this.safeUnlink(head.path);
      then();
    });
  }

  // ---- shutdown ------------------------------------------------------------------------------

  /** Writes what is pending, fsyncs, trims the claimed tail and closes. */
  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.syncTimer !== null) clearTimeout(this.syncTimer);
    if (this.fatal) return;
    const cur = this.current;
    this.flushBatchOf(cur);
    if (this.source !== null) this.idMark.store(this.source.nextId);
    this.fs.truncate(cur.fd, cur.used);
    for (const fd of [...this.syncingRolled, ...this.rolledFds, cur.fd, this.idMark.fileDescriptor]) this.fs.syncNow(fd);
    this.writtenSeq = this.syncedSeq = this.appendedSeq;
    this.notify();
    this.idMark.close();
    for (const fd of [...this.syncingRolled.splice(0), ...this.rolledFds.splice(0), cur.fd]) this.fs.close(fd);
  }
}

/** A reservation is not kept across a restart, so a reserved job is stored as ready. */
const NO_BODY = Buffer.alloc(0);

function durableState(job: Job): JobState {
  return jobState(job) === 'reserved' ? 'ready' : jobState(job);
}
