/**
 * recover(): replaying segment files written by a real Binlog and by the codec directly, with
 * torn tails, damage in the middle, bad headers, empty segments and the id high-water mark.
 */
import fs from 'node:fs';
import os from 'node:os';
import { crc32 } from 'node:zlib';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_JOB_SIZE_LIMIT, MAX_TUBE_NAME_LENGTH } from '../../shared/limits.js';
import type { Job, JobImage, JobState } from '../engine/records.js';
import { Harness, T0 } from '../engine/testing.js';
import { Binlog } from './binlog.js';
import {
  DELETE_RECORD_BYTES,
  FORMAT_VERSION,
  JOB_RECORD_FIXED_BYTES,
  SEGMENT_HEADER_BYTES,
  STATE_RECORD_BYTES,
  encodeDelete,
  encodeSegmentHeader,
  encodeState,
  jobRecordBytes,
  segmentFileName,
} from './format.js';
import { ID_MARK_FILE, IdMark } from './id-mark.js';
import { countLive, recover, type SegmentOnDisk } from './recovery.js';
import { jobImage, jobRecord } from './testing.js';
import {
  jobState,
  jobPriority,
  jobDeadlineAt,
  jobBody,
  jobFile,
  jobImageOf,
} from '../engine/records.js';

/** The checksum salt of the segments these tests write by hand. */
const SALT = 0x5a17_0001;

const MAX_PAYLOAD = MAX_JOB_SIZE_LIMIT + JOB_RECORD_FIXED_BYTES + MAX_TUBE_NAME_LENGTH;
const silent = pino({ level: 'silent' });

const dirs: string[] = [];
const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const fn of cleanups.splice(0)) fn();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function tmpDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'beanpole-recovery-'));
  dirs.push(dir);
  return dir;
}

// ---- records written with the codec ------------------------------------------------------------

const image = jobImage;

function jobRec(img: JobImage, salt = SALT): Buffer {
  return jobRecord(img, salt);
}

function stateRec(img: JobImage): Buffer {
  const buf = Buffer.alloc(STATE_RECORD_BYTES);
  encodeState(buf, 0, img, img.state, SALT);
  return buf;
}

function deleteRec(id: number): Buffer {
  const buf = Buffer.alloc(DELETE_RECORD_BYTES);
  encodeDelete(buf, 0, id, SALT);
  return buf;
}

interface WrittenSegment {
  path: string;
  /** Offset of each record in the file. */
  offsets: number[];
  /** End of the records. */
  end: number;
}

/** Writes segment `index` with `records`, then `zeros` bytes of preallocated space. */
function writeSegment(dir: string, index: number, records: Buffer[], zeros = 0): WrittenSegment {
  const file = path.join(dir, segmentFileName(index));
  const offsets: number[] = [];
  let at = SEGMENT_HEADER_BYTES;
  for (const r of records) {
    offsets.push(at);
    at += r.length;
  }
  fs.writeFileSync(file, Buffer.concat([encodeSegmentHeader(index, T0, SALT), ...records, Buffer.alloc(zeros)]));
  return { path: file, offsets, end: at };
}

function writeIdMark(dir: string, nextId: number): void {
  const mark = IdMark.open(dir, (fd, buf, pos) => {
    fs.writeSync(fd, buf, 0, buf.length, pos);
  });
  mark.store(nextId);
  mark.close();
}

type Image = JobImage & { file: number };

/** A restored job as recovery describes it, with the segment that holds its full record. */
function imageOf(job: Job): Image {
  return { ...jobImageOf(job), file: jobFile(job) };
}

interface Replay {
  /** The restored jobs by id, in the engine's order. */
  jobs: Map<number, Image>;
  segments: SegmentOnDisk[];
  nextId: number;
  records: number;
  problems: string[];
  /** Bytes of the live jobs' full records (countLive). */
  liveBytes: number;
  /** The engine the records were replayed into, restore finished. */
  h: Harness;
}

/** Replays DIR into a fresh engine, as a start does (recover, finishRestore, countLive). */
function replay(dir: string): Replay {
  const h = new Harness();
  const rec = recover(dir, MAX_PAYLOAD, h.engine);
  h.engine.finishRestore(rec.nextId);
  const liveBytes = countLive(rec.segments, h.engine.allJobs());
  const jobs = new Map<number, Image>();
  for (const job of h.engine.allJobs()) jobs.set(job.id, imageOf(job));
  return { jobs, segments: rec.segments, nextId: rec.nextId, records: rec.records, problems: rec.problems, liveBytes, h };
}

/** The recovered jobs as plain images, without the segment index. */
function imagesOf(rec: Replay): Map<number, JobImage> {
  const out = new Map<number, JobImage>();
  for (const [id, { file: _file, ...img }] of rec.jobs) out.set(id, img);
  return out;
}

// ---- a real binlog -----------------------------------------------------------------------------

interface Live {
  binlog: Binlog;
  h: Harness;
  fatal: Error[];
}

/** Opens a Binlog and an engine on a fake clock over DIR, recovering it first, as the server does. */
function openLive(dir: string, segmentBytes = 1 << 20): Live {
  const fatal: Error[] = [];
  const binlog = new Binlog({ dir, segmentBytes, fsyncMs: null, log: silent, onFatal: (err) => fatal.push(err) });
  const h = new Harness({ journal: binlog });
  const recovery = recover(dir, MAX_PAYLOAD, h.engine);
  h.engine.finishRestore(recovery.nextId);
  binlog.open(recovery.segments, countLive(recovery.segments, h.engine.allJobs()), h.engine);
  let closed = false;
  const close = binlog.close.bind(binlog);
  binlog.close = () => {
    if (!closed) close();
    closed = true;
  };
  cleanups.push(() => binlog.close());
  return { binlog, h, fatal };
}

/** Lets group commits run until every appended record is written (bounded). */
async function settle(binlog: Binlog): Promise<void> {
  for (let i = 0; i < 1000 && binlog.durableSeq < binlog.appendedSeq; i++) await new Promise<void>((r) => setImmediate(r));
  expect(binlog.durableSeq).toBe(binlog.appendedSeq);
}

/** What recovery must return for a live engine job: a reservation is not kept. */
function expectedImage(job: Job): Image {
  const state: JobState = jobState(job) === 'reserved' ? 'ready' : jobState(job);
  return { ...imageOf(job), state, deadlineAt: state === 'delayed' ? jobDeadlineAt(job) : 0 };
}

function buriedIds(h: Harness, tube: string): number[] {
  const t = h.engine.tube(tube);
  return t === undefined ? [] : [...t.buried.values()].map((j) => j.id);
}

describe('recover() on a binlog written by the engine', () => {
  it('brings back jobs in every state with exact fields; reserved jobs come back ready', async () => {
    const dir = tmpDir();
    const live = openLive(dir);
    const { h, binlog } = live;
    const c = h.open();
    const w = h.open();
    h.clock.advance(1.5);

    const ready = c.put({ priority: 7, body: Buffer.from([0, 1, 13, 10, 0]) });
    const empty = c.put({ body: Buffer.alloc(0) });
    const delayed = c.put({ delayMs: 5000, priority: 3 });
    h.clock.advance(10);
    const longTube = 'L'.repeat(200);
    c.use(longTube);
    const other = c.put({ priority: 2 ** 32 - 1, ttrMs: 120_000 });
    c.use('default');

    // Three jobs buried in an order that is not their id order.
    const b = [c.put({ priority: 50 }), c.put({ priority: 51 }), c.put({ priority: 52 })];
    const order = [b[2]!, b[0]!, b[1]!];
    for (const job of order) {
      expect(h.engine.reserveJob(w.session, job.id).ok).toBe(true);
      expect(h.engine.bury(w.session, job.id, jobPriority(job) + 1000).ok).toBe(true);
      h.clock.advance(1);
    }

    // Released with a delay: delayed with an absolute deadline, releases counted.
    const released = c.put({ priority: 60 });
    expect(h.engine.reserveJob(w.session, released.id).ok).toBe(true);
    expect(h.engine.release(w.session, released.id, 61, 3000).ok).toBe(true);

    // Buried then kicked: ready, kicks counted.
    const kicked = c.put({ priority: 70 });
    expect(h.engine.reserveJob(w.session, kicked.id).ok).toBe(true);
    expect(h.engine.bury(w.session, kicked.id, 71).ok).toBe(true);
    expect(h.engine.kickJob(kicked.id).ok).toBe(true);

    // Timed out: ready, timeouts counted.
    const timedOut = c.put({ priority: 80, ttrMs: 1000 });
    expect(h.engine.reserveJob(w.session, timedOut.id).ok).toBe(true);
    h.advance(1500);

    // Reserved at the crash: comes back ready, its reserve counted.
    const reserved = c.put({ priority: 90 });
    expect(h.engine.reserveJob(w.session, reserved.id).ok).toBe(true);

    // Deleted in every state: gone.
    const gone = [c.put(), c.put({ delayMs: 100_000 }), c.put()];
    expect(h.engine.reserveJob(w.session, gone[2]!.id).ok).toBe(true);
    expect(h.engine.bury(w.session, gone[2]!.id, 1).ok).toBe(true);
    for (const g of gone) expect(h.engine.delete(null, g.id).ok).toBe(true);
    const deletedWhileReserved = c.put();
    expect(h.engine.reserveJob(w.session, deletedWhileReserved.id).ok).toBe(true);
    expect(h.engine.delete(w.session, deletedWhileReserved.id).ok).toBe(true);

    expect(jobState(h.engine.job(reserved.id)!)).toBe('reserved');
    expect(jobState(h.engine.job(delayed.id)!)).toBe('delayed');
    await settle(binlog);

    const rec = replay(dir);
    binlog.close();
    expect(live.fatal).toEqual([]);
    expect(rec.problems).toEqual([]);
    const live1 = [...h.engine.allJobs()];
    expect(rec.jobs.size).toBe(live1.length);
    for (const job of live1) {
      // A reserve from ready writes no record, so a job reserved at the crash has the reserves
      // count of its last record.
      const want = job === reserved ? { ...expectedImage(job), reserves: job.reserves - 1 } : expectedImage(job);
      expect(rec.jobs.get(job.id), `job ${job.id}`).toEqual(want);
    }
    for (const g of [...gone, deletedWhileReserved]) expect(rec.jobs.has(g.id)).toBe(false);

    expect(rec.jobs.get(reserved.id)).toMatchObject({ state: 'ready', reserves: 0, deadlineAt: 0 });
    // A job keeps its deadline in whole milliseconds, floored (Job).
    expect(rec.jobs.get(delayed.id)).toMatchObject({ state: 'delayed', deadlineAt: T0 + 1 + 5000, delayMs: 5000 });
    expect(rec.jobs.get(released.id)).toMatchObject({ state: 'delayed', priority: 61, releases: 1, reserves: 1, delayMs: 3000 });
    expect(rec.jobs.get(kicked.id)).toMatchObject({ state: 'ready', priority: 71, buries: 1, kicks: 1, reserves: 1 });
    expect(rec.jobs.get(timedOut.id)).toMatchObject({ state: 'ready', timeouts: 1, reserves: 1 });
    expect(rec.jobs.get(other.id)).toMatchObject({ tube: longTube, priority: 2 ** 32 - 1, ttrMs: 120_000 });
    expect(rec.jobs.get(ready.id)!.body).toEqual(Buffer.from([0, 1, 13, 10, 0]));
    expect(rec.jobs.get(empty.id)!.body.length).toBe(0);
    const lastId = deletedWhileReserved.id;
    expect(rec.nextId).toBe(lastId + 1);
    expect(rec.segments.map((s) => s.index)).toEqual([1]);
    expect(rec.segments[0]!.live).toBe(live1.length);
    expect(rec.liveBytes).toBe(live1.reduce((n, j) => n + jobRecordBytes(j.tube.name.length, jobBody(j).length), 0));

    // Restored into a fresh engine: same states, buried order by buriedSeq, delays absolute.
    const h2 = rec.h;
    expect(h2.engine.jobTotal).toBe(live1.length);
    expect(h2.problems(lastId + 10)).toEqual([]);
    expect(buriedIds(h2, 'default')).toEqual(order.map((j) => j.id));
    expect(buriedIds(h2, 'default')).toEqual(buriedIds(h, 'default'));
    expect(h2.engine.stats).toMatchObject({ buried: 3, delayed: 2, reserved: 0, ready: live1.length - 5 });
    expect(jobDeadlineAt(h2.engine.job(delayed.id)!)).toBe(T0 + 1 + 5000);
    expect(h2.engine.nextId).toBe(lastId + 1);
  });

  it('cuts a torn final record at every offset, reporting it once with file:offset', async () => {
    const dir = tmpDir();
    const { h, binlog } = openLive(dir);
    const c = h.open();
    const jobs = [c.put({ body: 'one' }), c.put({ body: 'two' }), c.put({ body: Buffer.from('three\r\n\0three') })];
    await settle(binlog);
    binlog.close();
    const file = path.join(dir, segmentFileName(1));
    const intact = fs.readFileSync(file);
    const lastAt = SEGMENT_HEADER_BYTES + 2 * jobRecordBytes(7, 3);
    const lastEnd = lastAt + jobRecordBytes(7, jobBody(jobs[2]!).length);
    expect(intact.length).toBe(lastEnd); // close() trims the preallocated space

    for (let k = 1; k < lastEnd - lastAt; k++) {
      for (const zeroTail of [false, true]) {
        // Cut short, or the torn write's tail never reached the preallocated (zero) blocks.
        const torn = Buffer.concat([intact.subarray(0, lastAt + k), Buffer.alloc(zeroTail ? 8192 : 0)]);
        fs.writeFileSync(file, torn);
        const rec = replay(dir);
        const what = `cut at ${k}${zeroTail ? ' with zeros' : ''}`;
        expect(rec.problems, what).toHaveLength(1);
        expect(rec.problems[0]!.startsWith(`${file}:${lastAt}: `), `${what}: ${rec.problems[0]}`).toBe(true);
        expect(fs.statSync(file).size, what).toBe(lastAt);
        expect([...rec.jobs.keys()], what).toEqual([jobs[0]!.id, jobs[1]!.id]);
        expect(rec.segments, what).toEqual([{ index: 1, path: file, bytes: lastAt, live: 2 }]);
        // Replaying the cut file again finds nothing more to report.
        expect(replay(dir).problems, what).toEqual([]);
      }
    }
  });
});

describe('recover() replay rules', () => {
  it('applies later records over earlier ones, across segments', () => {
    const dir = tmpDir();
    const j1 = image({ id: 1, priority: 5 });
    const j2 = image({ id: 2 });
    const j3 = image({ id: 3, priority: 10, tube: 'other' });
    const j4 = image({ id: 4 });
    writeSegment(dir, 1, [
      jobRec(j1),
      jobRec(j2),
      stateRec({ ...j1, state: 'buried', buriedSeq: 1, buries: 1, reserves: 1, priority: 6 }),
      deleteRec(2),
      jobRec(j3),
      stateRec(image({ id: 99, state: 'buried' })), // a job never seen: ignored
    ]);
    writeSegment(
      dir,
      2,
      [
        jobRec({ ...j3, priority: 20, state: 'delayed', delayMs: 50, deadlineAt: T0 + 50, releases: 2 }), // rewritten
        stateRec({ ...j1, state: 'ready', buriedSeq: 1, buries: 1, reserves: 1, kicks: 1, priority: 6 }),
        jobRec(j4),
        deleteRec(4),
      ],
      4096,
    );
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(rec.records).toBe(10);
    expect([...rec.jobs.keys()].sort()).toEqual([1, 3]);
    expect(rec.jobs.get(1)).toEqual({ ...j1, state: 'ready', buriedSeq: 1, buries: 1, reserves: 1, kicks: 1, priority: 6, file: 1 });
    expect(rec.jobs.get(3)).toEqual({ ...j3, priority: 20, state: 'delayed', delayMs: 50, deadlineAt: T0 + 50, releases: 2, file: 2 });
    expect(rec.jobs.has(99)).toBe(false);
    expect(rec.nextId).toBe(100); // the unknown id still counts as used
    expect(rec.segments.map((s) => [s.index, s.live])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(rec.liveBytes).toBe(jobRecordBytes(7, j1.body.length) + jobRecordBytes(5, j3.body.length));
  });

  it('replays segments in numeric order (binlog.10 after binlog.9)', () => {
    const dir = tmpDir();
    writeSegment(dir, 9, [jobRec(image({ id: 1, priority: 1 }))]);
    writeSegment(dir, 10, [stateRec(image({ id: 1, priority: 2, state: 'buried', buriedSeq: 4 }))]);
    writeSegment(dir, 11, [deleteRec(7)]);
    const rec = replay(dir);
    expect(rec.jobs.get(1)).toMatchObject({ priority: 2, state: 'buried', buriedSeq: 4, file: 9 });
    expect(rec.segments.map((s) => s.index)).toEqual([9, 10, 11]);
    expect(rec.nextId).toBe(8); // ids seen in DELETE records count too
  });

  it('ignores files that are not segments', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 1 }))]);
    fs.writeFileSync(path.join(dir, 'binlog.2'), 'a beanstalkd binlog');
    fs.writeFileSync(path.join(dir, 'binlog.0.bp'), 'not an index');
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello');
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(rec.segments.map((s) => s.index)).toEqual([1]);
    expect(fs.readdirSync(dir).sort()).toEqual(['binlog.0.bp', 'binlog.1.bp', 'binlog.2', 'notes.txt']);
  });

  it('starts empty on an empty directory', () => {
    const { h: _h, ...rec } = replay(tmpDir());
    expect(rec).toEqual({ jobs: new Map(), segments: [], nextId: 1, liveBytes: 0, records: 0, problems: [] });
  });

  it('cuts the preallocated zeros of a segment without reporting a problem', () => {
    const dir = tmpDir();
    const seg = writeSegment(dir, 1, [jobRec(image({ id: 1 }))], 65536);
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(fs.statSync(seg.path).size).toBe(seg.end);
    expect(rec.segments[0]!.bytes).toBe(seg.end);
  });
});

describe('recover() and damage', () => {
  function fourJobs(): Buffer[] {
    return [1, 2, 3, 4].map((id) => jobRec(image({ id, body: Buffer.from(`job ${id} `.repeat(id)) })));
  }

  it('loses only the damaged record in the middle of an older segment', () => {
    // Damage in the payload, the crc, the length and the magic of the second record.
    for (const where of [40, 8, 4, 0]) {
      const dir = tmpDir();
      const recs = fourJobs();
      const seg1 = writeSegment(dir, 1, recs);
      writeSegment(dir, 2, [jobRec(image({ id: 5 })), stateRec(image({ id: 3, state: 'buried', buriedSeq: 1 }))]);
      const data = fs.readFileSync(seg1.path);
      data[seg1.offsets[1]! + where]! ^= 0x20;
      fs.writeFileSync(seg1.path, data);

      const rec = replay(dir);
      expect([...rec.jobs.keys()].sort(), `byte ${where}`).toEqual([1, 3, 4, 5]);
      expect(rec.jobs.get(3)).toMatchObject({ state: 'buried', file: 1 });
      expect(rec.problems, `byte ${where}`).toHaveLength(1);
      expect(rec.problems[0]).toBe(`${seg1.path}:${seg1.offsets[1]}: ${reasonFor(where)}; skipped ${recs[1]!.length} bytes to the next intact record`);
      expect(fs.statSync(seg1.path).size).toBe(data.length); // nothing cut
      expect(rec.records).toBe(5);
    }
  });

  function reasonFor(where: number): string {
    return where < 4 ? 'bad record magic' : 'checksum mismatch';
  }

  it('loses only the damaged record when its length field points past the end of an older segment', () => {
    const dir = tmpDir();
    const recs = fourJobs();
    const seg1 = writeSegment(dir, 1, recs);
    writeSegment(dir, 2, [jobRec(image({ id: 5 }))]);
    const data = fs.readFileSync(seg1.path);
    data[seg1.offsets[1]! + 5]! ^= 0x20; // length + 8192: more than the file holds
    fs.writeFileSync(seg1.path, data);

    const rec = replay(dir);
    expect(rec.problems).toEqual([
      `${seg1.path}:${seg1.offsets[1]}: record runs past the end of the file; skipped ${recs[1]!.length} bytes to the next intact record`,
    ]);
    // Records 3 and 4 are intact: they must survive, and the file must not be cut before them.
    expect([...rec.jobs.keys()].sort()).toEqual([1, 3, 4, 5]);
    expect(fs.statSync(seg1.path).size).toBe(data.length);
  });

  it('loses a damaged STATE or DELETE record, keeping the state before it', () => {
    const dir = tmpDir();
    const j = image({ id: 1 });
    const seg = writeSegment(dir, 1, [
      jobRec(j),
      jobRec(image({ id: 2 })),
      stateRec({ ...j, state: 'buried', buriedSeq: 1 }),
      jobRec(image({ id: 3 })),
      deleteRec(2),
      jobRec(image({ id: 4 })),
      stateRec({ ...j, state: 'buried', buriedSeq: 2, priority: 1 }),
    ]);
    const data = fs.readFileSync(seg.path);
    data[seg.offsets[2]! + 20]! ^= 1;
    data[seg.offsets[4]! + 14]! ^= 1;
    fs.writeFileSync(seg.path, data);
    let rec = replay(dir);
    expect(rec.problems).toEqual([
      `${seg.path}:${seg.offsets[2]}: checksum mismatch; skipped ${STATE_RECORD_BYTES} bytes to the next intact record`,
      `${seg.path}:${seg.offsets[4]}: checksum mismatch; skipped ${DELETE_RECORD_BYTES} bytes to the next intact record`,
    ]);
    // The DELETE is lost, so job 2 is back; the later STATE record still applies.
    expect([...rec.jobs.keys()].sort()).toEqual([1, 2, 3, 4]);
    expect(rec.jobs.get(1)).toMatchObject({ state: 'buried', buriedSeq: 2, priority: 1 });

    // Damage to that last STATE record (the end of the segment) leaves job 1 as first written.
    data[seg.offsets[6]! + 40]! ^= 1;
    fs.writeFileSync(seg.path, data);
    rec = replay(dir);
    expect(rec.problems).toHaveLength(3);
    expect(rec.problems[2]).toBe(`${seg.path}:${seg.offsets[6]}: checksum mismatch; nothing intact follows (${STATE_RECORD_BYTES} bytes cut off)`);
    expect(rec.jobs.get(1)).toMatchObject({ state: 'ready', buriedSeq: 0, priority: 100 });
  });

  it('skips a run of garbage between records', () => {
    const dir = tmpDir();
    const recs = fourJobs();
    const garbage = Buffer.from('\x01\x02garbage garbage garbage\xff', 'latin1');
    const seg = writeSegment(dir, 1, [recs[0]!, garbage, recs[1]!]);
    const rec = replay(dir);
    expect([...rec.jobs.keys()]).toEqual([1, 2]);
    expect(rec.problems).toEqual([`${seg.path}:${seg.offsets[1]}: bad record magic; skipped ${garbage.length} bytes to the next intact record`]);
  });

  it('cuts an older segment whose last record is damaged, and keeps the newer segments', () => {
    const dir = tmpDir();
    const recs = fourJobs();
    const seg1 = writeSegment(dir, 1, recs);
    writeSegment(dir, 2, [jobRec(image({ id: 5 }))]);
    const data = fs.readFileSync(seg1.path);
    data[seg1.offsets[3]! + 30]! ^= 0x01;
    fs.writeFileSync(seg1.path, data);
    const rec = replay(dir);
    expect([...rec.jobs.keys()].sort()).toEqual([1, 2, 3, 5]);
    expect(rec.problems).toEqual([`${seg1.path}:${seg1.offsets[3]}: checksum mismatch; nothing intact follows (${recs[3]!.length} bytes cut off)`]);
    expect(fs.statSync(seg1.path).size).toBe(seg1.offsets[3]);
  });

  it('cuts a torn tail of a codec-written segment at every offset, with and without zeros after it', () => {
    const dir = tmpDir();
    const j1 = image({ id: 1 });
    const last = jobRec(image({ id: 2, state: 'buried', buriedSeq: 3, body: Buffer.from('xyz\0\0') }));
    const recs = [jobRec(j1), stateRec({ ...j1, state: 'delayed', deadlineAt: T0 + 9, delayMs: 9 }), deleteRec(77)];
    const before = Buffer.concat([encodeSegmentHeader(1, T0, SALT), ...recs]);
    const file = path.join(dir, segmentFileName(1));
    const lastAt = before.length;
    for (let k = 1; k < last.length; k++) {
      for (const zeros of [0, 100, 65536]) {
        fs.writeFileSync(file, Buffer.concat([before, last.subarray(0, k), Buffer.alloc(zeros)]));
        const rec = replay(dir);
        const what = `cut at ${k} + ${zeros} zeros`;
        if (rec.jobs.has(2)) {
          // Only possible when every byte cut off was a zero the record ends with anyway.
          expect(Buffer.concat([last.subarray(0, k), Buffer.alloc(last.length - k)]).equals(last), what).toBe(true);
          expect(rec.problems, what).toEqual([]);
          expect(fs.statSync(file).size, what).toBe(lastAt + last.length);
          continue;
        }
        expect(rec.problems, what).toHaveLength(1);
        expect(rec.problems[0]!.startsWith(`${file}:${lastAt}: `), `${what}: ${rec.problems[0]}`).toBe(true);
        expect(fs.statSync(file).size, what).toBe(lastAt);
        expect([...imagesOf(rec).values()], what).toEqual([{ ...j1, state: 'delayed', deadlineAt: T0 + 9, delayMs: 9 }]);
        expect(rec.nextId, what).toBe(78);
      }
    }
  });
});

describe('recover() and job bodies that look like records', () => {
  it('replays nothing from the body of a torn JOB record, even a body that holds an encoded record', () => {
    // A client can put any bytes, including a well-formed record. When the JOB record that
    // carries them is torn (the usual crash: the segment is preallocated, so zeros follow),
    // resync must not pick the forged record out of the body. The client cannot know the
    // segment's random checksum salt, so its record is sealed with another one.
    const dir = tmpDir();
    const forged = jobRec(image({ id: 999, tube: 'forged', body: Buffer.from('not put by anyone') }), 0);
    const carrier = jobRec(image({ id: 2, body: Buffer.concat([Buffer.from('prefix'), forged, Buffer.from('suffix'.repeat(20))]) }));
    const cut = carrier.length - 50; // torn after the forged bytes, before the end of the carrier
    const file = path.join(dir, segmentFileName(1));
    fs.writeFileSync(file, Buffer.concat([encodeSegmentHeader(1, T0, SALT), jobRec(image({ id: 1 })), carrier.subarray(0, cut), Buffer.alloc(4096)]));
    const rec = replay(dir);
    expect([...rec.jobs.keys()], rec.problems.join('\n')).toEqual([1]);
    expect(rec.nextId).toBeLessThan(999);
    expect(rec.problems).toHaveLength(1);
  });
});

describe('recover() and segment files', () => {
  /** Segment 2 of three, with jobs in several states, a delete and preallocated zeros. */
  function threeSegments(dir: string): { seg2: WrittenSegment; recs2: Buffer[] } {
    writeSegment(dir, 1, [jobRec(image({ id: 1 }))]);
    const buried = image({ id: 3, priority: 30 });
    const recs2 = [
      jobRec(image({ id: 2, priority: 20 })),
      jobRec(buried),
      stateRec({ ...buried, state: 'buried', buriedSeq: 1, reserves: 1, buries: 1 }),
      jobRec(image({ id: 4, state: 'delayed', delayMs: 5000, deadlineAt: T0 + 5000 })),
      jobRec(image({ id: 5 })),
      deleteRec(5),
      jobRec(image({ id: 6, body: Buffer.from('BPR1 looks like a record magic') })),
    ];
    const seg2 = writeSegment(dir, 2, recs2, 4096);
    writeSegment(dir, 3, [stateRec(image({ id: 2, priority: 21, releases: 1 }))]);
    return { seg2, recs2 };
  }

  function flip(file: string, at: number, xor: number): void {
    const data = fs.readFileSync(file);
    data[at]! ^= xor;
    fs.writeFileSync(file, data);
  }

  const SOURCES = {
    stored: 'the salt stored in the header, confirmed by a record',
    header: 'the salt recovered from a record, confirmed by the header checksum',
    records: 'the salt recovered from records, confirmed by two of them',
  };

  function headerLine(file: string, reason: string, source: keyof typeof SOURCES, records: number, jobs: number, skipped: number): string {
    return (
      `${file}:0: header damaged (${reason}); its records were read by their own checksums (${SOURCES[source]}): ` +
      `${records} records (${jobs} jobs) recovered, ${skipped} bytes skipped (the 32-byte header included)`
    );
  }

  it('recovers every record of a segment whose header is damaged, whichever header byte is flipped', () => {
    for (let at = 0; at < SEGMENT_HEADER_BYTES; at++) {
      for (const xor of [0x01, 0x80]) {
        const dir = tmpDir();
        const { seg2 } = threeSegments(dir);
        flip(seg2.path, at, xor);
        const what = `byte ${at} ^ ${xor}`;

        const rec = replay(dir);
        const reason = at < 8 ? 'header checksum mismatch, bad magic' : 'header checksum mismatch';
        const source = at >= 24 && at < 28 ? 'header' : 'stored';
        expect(rec.problems, what).toEqual([headerLine(seg2.path, reason, source, 7, 5, SEGMENT_HEADER_BYTES)]);
        expect([...rec.jobs.keys()].sort(), what).toEqual([1, 2, 3, 4, 6]);
        // The index comes from the file name (the header's index may be the damaged byte).
        expect(rec.jobs.get(2), what).toMatchObject({ file: 2, priority: 21, releases: 1 });
        expect(rec.jobs.get(3), what).toMatchObject({ file: 2, state: 'buried', buriedSeq: 1, buries: 1 });
        expect(rec.jobs.get(4), what).toMatchObject({ file: 2, state: 'delayed', deadlineAt: T0 + 5000 });
        expect(rec.jobs.get(6)!.body.toString(), what).toBe('BPR1 looks like a record magic');
        expect(rec.segments.map((s) => [s.index, s.live]), what).toEqual([
          [1, 1],
          [2, 4],
          [3, 0],
        ]);
        expect(rec.records, what).toBe(9);
        expect(rec.nextId, what).toBe(7);
        // Kept like any other segment: the zeros after its records are cut, the header is left as found.
        expect(fs.statSync(seg2.path).size, what).toBe(seg2.end);
        expect(rec.segments[1]!.bytes, what).toBe(seg2.end);
      }
    }
  });

  it('recovers the records when the salt and another header byte are damaged, from two records that agree', () => {
    const dir = tmpDir();
    const { seg2 } = threeSegments(dir);
    flip(seg2.path, 26, 0x40);
    flip(seg2.path, 12, 0x01);
    const rec = replay(dir);
    expect(rec.problems).toEqual([headerLine(seg2.path, 'header checksum mismatch', 'records', 7, 5, SEGMENT_HEADER_BYTES)]);
    expect([...rec.jobs.keys()].sort()).toEqual([1, 2, 3, 4, 6]);
  });

  it('counts every byte skipped in a segment with a damaged header, and reports the damage after it in file order', () => {
    const dir = tmpDir();
    const { seg2, recs2 } = threeSegments(dir);
    flip(seg2.path, 5, 0x01);
    flip(seg2.path, seg2.offsets[1]! + 30, 0x01); // job 3's JOB record: job 3 is lost
    flip(seg2.path, seg2.offsets[6]! + 30, 0x01); // the last record: cut off
    const rec = replay(dir);
    expect(rec.problems).toEqual([
      headerLine(seg2.path, 'header checksum mismatch, bad magic', 'stored', 5, 3, SEGMENT_HEADER_BYTES + recs2[1]!.length + recs2[6]!.length),
      `${seg2.path}:${seg2.offsets[1]}: checksum mismatch; skipped ${recs2[1]!.length} bytes to the next intact record`,
      `${seg2.path}:${seg2.offsets[6]}: checksum mismatch; nothing intact follows (${recs2[6]!.length + 4096} bytes cut off)`,
    ]);
    expect([...rec.jobs.keys()].sort()).toEqual([1, 2, 4]);
    expect(fs.statSync(seg2.path).size).toBe(seg2.offsets[6]);
  });

  it('leaves in place, with a warning, a segment with a damaged header where no record passes its checksum', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 1 }))]);
    // One record and both the salt and the index damaged: nothing can confirm a salt.
    const lone = writeSegment(dir, 2, [jobRec(image({ id: 2 }))]);
    flip(lone.path, 24, 0x01);
    flip(lone.path, 12, 0x01);
    // Not a segment at all.
    const text = path.join(dir, segmentFileName(3));
    fs.writeFileSync(text, 'these are notes, not a binlog segment; BPR1 appears in them\n'.repeat(3));
    const before = [fs.readFileSync(lone.path), fs.readFileSync(text)];

    const rec = replay(dir);
    expect(rec.problems).toEqual([
      `${lone.path}:0: header checksum mismatch, and no record in it passes its own checksum; the whole file is skipped and left in place`,
      `${text}:0: header checksum mismatch, bad magic, and no record in it passes its own checksum; the whole file is skipped and left in place`,
    ]);
    expect([...rec.jobs.keys()]).toEqual([1]);
    expect(rec.segments.map((s) => s.index)).toEqual([1]);
    expect(fs.readFileSync(lone.path)).toEqual(before[0]);
    expect(fs.readFileSync(text)).toEqual(before[1]);
  });

  it('skips and leaves in place a segment of a future format version, or with another magic, when its header checksum is valid', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 1 }))]);
    const future = writeSegment(dir, 2, [jobRec(image({ id: 2 }))]);
    const data2 = fs.readFileSync(future.path);
    data2.writeUInt32LE(FORMAT_VERSION + 1, 8);
    data2.writeUInt32LE(crc32(data2.subarray(0, 28), 0), 28);
    fs.writeFileSync(future.path, data2);
    const other = writeSegment(dir, 3, [jobRec(image({ id: 3 }))]);
    const data3 = fs.readFileSync(other.path);
    data3.write('BPSEG999', 0, 'latin1');
    data3.writeUInt32LE(crc32(data3.subarray(0, 28), 0), 28);
    fs.writeFileSync(other.path, data3);
    writeSegment(dir, 4, [jobRec(image({ id: 4 }))]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([
      `${future.path}:0: unknown format version ${FORMAT_VERSION + 1}; the whole file is skipped and left in place`,
      `${other.path}:0: not a Beanpole binlog segment; the whole file is skipped and left in place`,
    ]);
    expect([...rec.jobs.keys()]).toEqual([1, 4]);
    expect(rec.segments.map((s) => s.index)).toEqual([1, 4]);
    expect(fs.readFileSync(future.path)).toEqual(data2);
    expect(fs.readFileSync(other.path)).toEqual(data3);
  });

  it('removes empty, short-header and all-zero segments', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 1 }))]);
    const empty = path.join(dir, segmentFileName(2));
    const short = path.join(dir, segmentFileName(3));
    const zeros = path.join(dir, segmentFileName(4));
    fs.writeFileSync(empty, Buffer.alloc(0));
    fs.writeFileSync(short, encodeSegmentHeader(3, T0, SALT).subarray(0, 20));
    fs.writeFileSync(zeros, Buffer.alloc(8192));
    const rec = replay(dir);
    expect(rec.problems).toEqual([
      `${empty}:0: shorter than its header; removed (it holds no records)`,
      `${short}:0: shorter than its header; removed (it holds no records)`,
      `${zeros}:0: nothing but zeros; removed (it holds no records)`,
    ]);
    for (const f of [empty, short, zeros]) expect(fs.existsSync(f)).toBe(false);
    expect(rec.segments.map((s) => s.index)).toEqual([1]);
    expect([...rec.jobs.keys()]).toEqual([1]);
  });

  it('keeps a segment that holds only its header, trimmed of its zeros', () => {
    const dir = tmpDir();
    const seg = writeSegment(dir, 1, [], 4096);
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(rec.segments).toEqual([{ index: 1, path: seg.path, bytes: SEGMENT_HEADER_BYTES, live: 0 }]);
    expect(fs.statSync(seg.path).size).toBe(SEGMENT_HEADER_BYTES);
  });
});

describe('recover() and the id high-water mark', () => {
  it('takes the stored mark when it is above every id seen', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 3 }))]);
    writeIdMark(dir, 500);
    expect(replay(dir).nextId).toBe(500);
  });

  it('takes the ids seen when they are above the stored mark', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 3 })), jobRec(image({ id: 10 }))]);
    writeIdMark(dir, 5);
    expect(replay(dir).nextId).toBe(11);
  });

  it('keeps ids above 2^32', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 2 ** 32 + 5 }))]);
    expect(replay(dir).nextId).toBe(2 ** 32 + 6);
    writeIdMark(dir, 2 ** 40);
    expect(replay(dir).nextId).toBe(2 ** 40);
  });

  it('uses the mark alone when no segment holds a record', () => {
    const dir = tmpDir();
    writeIdMark(dir, 42);
    expect(replay(dir).nextId).toBe(42);
  });

  it('falls back to the ids seen when the mark is damaged, short or unreadable', () => {
    const dir = tmpDir();
    writeSegment(dir, 1, [jobRec(image({ id: 7 }))]);
    const markPath = path.join(dir, ID_MARK_FILE);
    writeIdMark(dir, 1000);
    const good = fs.readFileSync(markPath);
    expect(good.length).toBe(16);
    for (let i = 0; i < good.length; i++) {
      const bad = Buffer.from(good);
      bad[i]! ^= 0x01;
      fs.writeFileSync(markPath, bad);
      expect(replay(dir).nextId, `byte ${i}`).toBe(8);
    }
    fs.writeFileSync(markPath, good.subarray(0, 12));
    expect(replay(dir).nextId).toBe(8);
    fs.rmSync(markPath);
    fs.mkdirSync(markPath); // a directory where the file should be
    expect(replay(dir).nextId).toBe(8);
  });

  it('never hands out an id lost with a torn newest segment', async () => {
    const dir = tmpDir();
    const { h, binlog } = openLive(dir);
    const c = h.open();
    for (let i = 0; i < 5; i++) c.put();
    await settle(binlog);
    binlog.close();
    // The last two records are lost; the mark still says 6.
    const file = path.join(dir, segmentFileName(1));
    fs.truncateSync(file, SEGMENT_HEADER_BYTES + 3 * jobRecordBytes(7, 1) + 10);
    const rec = replay(dir);
    expect([...rec.jobs.keys()]).toEqual([1, 2, 3]);
    expect(rec.problems).toHaveLength(1);
    expect(rec.nextId).toBe(6);
  });
});
