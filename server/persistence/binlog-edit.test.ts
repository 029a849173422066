/**
 * Dashboard edits (Engine.editJob) over a real Binlog in-process: each edit writes a full JOB
 * record, a restart through recover() brings every job back exactly as edited (tube, body,
 * priority, TTR, delay, state, buried order), the binlog's live accounting follows the edits,
 * and compaction keeps the directory bounded however often jobs are edited.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { JobEdit } from '../engine/engine.js';
import type { Job, Tube } from '../engine/records.js';
import { Harness, T0, type Client, fieldsOf } from '../engine/testing.js';
import { Binlog } from './binlog.js';
import {
  Cleanups,
  KiB,
  MAX_PAYLOAD,
  dirBytes,
  patternBody,
  startBinlog,
  turn,
  durableFields,
  waitFor,
  type BinlogServer,
} from './testing.js';
import { nodeFileSystem, type FileSystem } from './file-system.js';
import { jobRecordBytes, segmentFileName } from './format.js';
import { countLive, recover, type Recovery } from './recovery.js';
import { jobState, jobBody, jobFile, jobCounters } from '../engine/records.js';


const cleanups = new Cleanups();

afterEach(() => cleanups.run());

const tmpDir = (): string => cleanups.tmpDir('beanpole-edit-');


/** nodeFileSystem with a byte budget for the directory: growth past it fails with ENOSPC. */
class BudgetFs implements FileSystem {
  budget = Number.POSITIVE_INFINITY;
  constructor(readonly dir: string) {}
  openAppend(p: string): number {
    return nodeFileSystem.openAppend(p);
  }
  openRead(p: string): number {
    return nodeFileSystem.openRead(p);
  }
  writeAll(fd: number, buf: Buffer, position: number): void {
    if (this.budget !== Number.POSITIVE_INFINITY) {
      const growth = position + buf.length - fs.fstatSync(fd).size;
      if (growth > 0 && growth > this.budget - dirBytes(this.dir)) {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
    }
    nodeFileSystem.writeAll(fd, buf, position);
  }
  truncate(fd: number, length: number): void {
    nodeFileSystem.truncate(fd, length);
  }
  close(fd: number): void {
    nodeFileSystem.close(fd);
  }
  unlink(p: string): void {
    nodeFileSystem.unlink(p);
  }
  syncNow(fd: number): void {
    nodeFileSystem.syncNow(fd);
  }
  sync(fd: number, done: (err: Error | null) => void): void {
    nodeFileSystem.sync(fd, done);
  }
  read(fd: number, buf: Buffer, position: number, done: (err: Error | null, bytesRead: number) => void): void {
    nodeFileSystem.read(fd, buf, position, done);
  }
}


/** Replays DIR into a fresh engine without opening a binlog: what a restart would find. */
function replay(dir: string): Recovery & { h: Harness; liveBytes: number } {
  const h = new Harness();
  const rec = recover(dir, MAX_PAYLOAD, h.engine);
  h.engine.finishRestore(rec.nextId);
  const liveBytes = countLive(rec.segments, h.engine.allJobs());
  return { ...rec, h, liveBytes };
}


async function settle(binlog: Binlog, ms = 5000): Promise<void> {
  const seq = binlog.appendedSeq;
  let timer: NodeJS.Timeout | undefined;
  const durable = await new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    binlog.whenDurable(seq, () => resolve(true));
  });
  clearTimeout(timer);
  expect(durable, `records up to ${seq} durable`).toBe(true);
}




/** Per tube: ready, delayed and buried ids in engine order; and the counts stats shows. */
function queues(h: Harness): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const names = h.tubeNames().filter((n) => (h.engine.tube(n)?.jobCount ?? 0) > 0);
  for (const name of names.sort()) {
    const t: Tube = h.engine.tube(name)!;
    out[name] = {
      ready: t.ready.ordered(1e9).map((j) => j.id),
      delayed: t.delayed.ordered(1e9).map((j) => j.id),
      buried: [...t.buried.values()].map((j) => j.id),
      urgent: t.urgent,
    };
  }
  return out;
}

/** Every job and every queue of `before` is in `after` exactly, and nothing else is. */
function expectSameState(before: Harness, after: Harness): void {
  const a = new Map([...before.engine.allJobs()].map((j) => [j.id, durableFields(j)]));
  const b = new Map([...after.engine.allJobs()].map((j) => [j.id, durableFields(j)]));
  expect(b).toEqual(a);
  // Reserved jobs come back ready, so the queues only match when none is held.
  if ([...before.engine.allJobs()].every((j) => jobState(j) !== 'reserved')) expect(queues(after)).toEqual(queues(before));
  const counts = (h: Harness): Record<string, number> => {
    const s = h.engine.stats;
    return { ready: s.ready + s.reserved, delayed: s.delayed, buried: s.buried, jobs: h.engine.jobTotal, bytes: h.engine.bodyBytes };
  };
  expect(counts(after)).toEqual(counts(before));
  expect(after.problems(after.engine.nextId)).toEqual([]);
}

interface Internals {
  liveBytes: number;
  closed: { index: number; live: number }[];
  current: { index: number; live: number };
}

/** The binlog's private accounting (its stats do not show live bytes). */
function internals(binlog: Binlog): Internals {
  return binlog as unknown as Internals;
}

/** liveBytes is the record size of every live job; each segment's live count is the jobs whose record is there. */
function expectLiveAccounting(s: BinlogServer): void {
  const { liveBytes, closed, current } = internals(s.binlog);
  let bytes = 0;
  const perFile = new Map<number, number>();
  for (const job of s.h.engine.allJobs()) {
    bytes += jobRecordBytes(job.tube.name.length, jobBody(job).length);
    perFile.set(jobFile(job), (perFile.get(jobFile(job)) ?? 0) + 1);
  }
  expect(liveBytes, 'liveBytes').toBe(bytes);
  const segments = [...closed, current];
  const counted = new Map(segments.map((seg) => [seg.index, seg.live]));
  for (const [file, n] of perFile) expect(counted.get(file), `live jobs in segment ${file}`).toBe(n);
  for (const seg of segments) expect(seg.live, `segment ${seg.index} live`).toBe(perFile.get(seg.index) ?? 0);
}

function edit(s: BinlogServer, id: number, change: JobEdit): Job {
  const r = s.h.engine.editJob(id, change);
  if (!r.ok) throw new Error(`edit of ${id} failed: ${r.code}`);
  return r.value;
}

function bury(s: BinlogServer, w: Client, id: number, priority = 50): void {
  expect(s.h.engine.reserveJob(w.session, id).ok).toBe(true);
  expect(s.h.engine.bury(w.session, id, priority).ok).toBe(true);
}

describe('edits survive a restart', () => {
  it('every edit in every state comes back exactly as edited, buried order and moved buried job last included', async () => {
    const dir = tmpDir();
    const s = startBinlog(dir, cleanups);
    const { h, c } = s;
    const w = h.open();
    c.use('a');
    const r1 = c.put({ priority: 5, body: 'ready one', ttrMs: 3000 });
    const r2 = c.put({ priority: 6, body: 'ready two' });
    const r3 = c.put({ priority: 7, body: 'ready three' });
    const d1 = c.put({ delayMs: 60_000, body: 'delayed one' });
    const d2 = c.put({ delayMs: 30_000, body: 'delayed two' });
    const d3 = c.put({ delayMs: 90_000, body: 'delayed three' });
    const b1 = c.put({ body: 'buried one' });
    const b2 = c.put({ body: 'buried two' });
    const b3 = c.put({ body: 'buried three' });
    const held = c.put({ body: 'held' });
    c.use('dest');
    const x1 = c.put({ body: 'dest buried' });
    c.use('gone');
    const g1 = c.put({ body: 'only job of gone', priority: 2000 });
    c.use('default');
    bury(s, w, b2.id, 20);
    bury(s, w, x1.id, 21);
    bury(s, w, b1.id, 22);
    bury(s, w, b3.id, 23);
    expect(h.engine.reserveJob(w.session, held.id).ok).toBe(true);
    await settle(s.binlog);
    h.advance(1000);

    edit(s, r1.id, { body: Buffer.from('ready one, edited and longer'), priority: 1, ttrMs: 9000 });
    edit(s, r2.id, { tube: 'dest' });
    edit(s, r3.id, { delayMs: 7000 }); // ready -> delayed, due T0 + 8000
    edit(s, d1.id, { delayMs: 5000 }); // due T0 + 6000
    edit(s, d2.id, { body: Buffer.from('d2'), tube: 'dest', priority: 3000 }); // keeps T0 + 30000
    edit(s, d3.id, { delayMs: 0 }); // ready now
    edit(s, b1.id, { body: Buffer.from('buried one, edited'), priority: 2 }); // keeps its place
    edit(s, b2.id, { tube: 'dest' }); // last in dest, after x1
    edit(s, g1.id, { tube: 'a', priority: 4 }); // 'gone' disappears
    expect(h.engine.editJob(held.id, { priority: 1 })).toEqual({ ok: false, code: 'JOB_RESERVED' });
    expect(h.engine.release(w.session, held.id, 99, 0).ok).toBe(true);

    expect(h.engine.tube('gone')).toBeUndefined();
    expect([...h.engine.tube('a')!.buried.values()].map((j) => j.id)).toEqual([b1.id, b3.id]);
    expect([...h.engine.tube('dest')!.buried.values()].map((j) => j.id)).toEqual([x1.id, b2.id]);
    expect(fieldsOf(h.engine.job(r3.id))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 8000 });
    expect(fieldsOf(h.engine.job(d1.id))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 6000, delayMs: 5000 });
    expect(fieldsOf(h.engine.job(d2.id))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 30_000 });
    expect(h.problems(h.engine.nextId)).toEqual([]);
    expectLiveAccounting(s);
    await settle(s.binlog);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(rec.h.engine.tube('gone')).toBeUndefined();
    expect(fieldsOf(rec.h.engine.job(r1.id))).toMatchObject({ tube: rec.h.engine.tube('a'), priority: 1, ttrMs: 9000, reserves: 0 });
    expect(jobBody(rec.h.engine.job(r1.id)!).toString()).toBe('ready one, edited and longer');
    expect([...rec.h.engine.tube('dest')!.buried.values()].map((j) => j.id)).toEqual([x1.id, b2.id]);
    expect([...rec.h.engine.tube('a')!.buried.values()].map((j) => j.id)).toEqual([b1.id, b3.id]);
    expect(rec.h.engine.tube('a')!.delayed.ordered(10).map((j) => j.id)).toEqual([d1.id, r3.id]);
    expect(rec.h.engine.tube('dest')!.delayed.ordered(10).map((j) => j.id)).toEqual([d2.id]);
    expect(rec.nextId).toBe(h.engine.nextId);
    expect(rec.liveBytes).toBe(internals(s.binlog).liveBytes);
    // The restored delayed jobs come out when the edits said.
    rec.h.advanceTo(T0 + 5999);
    expect(jobState(rec.h.engine.job(d1.id)!)).toBe('delayed');
    rec.h.advanceTo(T0 + 6000);
    expect(jobState(rec.h.engine.job(d1.id)!)).toBe('ready');
    rec.h.advanceTo(T0 + 8000);
    expect(jobState(rec.h.engine.job(r3.id)!)).toBe('ready');

    // A real restart, more edits, and another: still exact.
    s.binlog.close();
    const s2 = startBinlog(dir, cleanups);
    expect(s2.recovery.problems).toEqual([]);
    expectSameState(h, s2.h);
    expectLiveAccounting(s2);
    const w2 = s2.h.open();
    edit(s2, b1.id, { tube: 'dest' }); // after b2 now
    edit(s2, x1.id, { body: Buffer.alloc(3000, 7) }); // stays first
    edit(s2, d2.id, { tube: 'a', delayMs: 0 });
    bury(s2, w2, r1.id, 8);
    edit(s2, r1.id, { tube: 'new-tube' });
    expectLiveAccounting(s2);
    await settle(s2.binlog);
    s2.binlog.close();
    const s3 = startBinlog(dir, cleanups);
    expect(s3.recovery.problems).toEqual([]);
    expectSameState(s2.h, s3.h);
    expectLiveAccounting(s3);
    expect([...s3.h.engine.tube('dest')!.buried.values()].map((j) => j.id)).toEqual([x1.id, b2.id, b1.id]);
    expect([...s3.h.engine.tube('new-tube')!.buried.values()].map((j) => j.id)).toEqual([r1.id]);
    expect(jobBody(s3.h.engine.job(x1.id)!).length).toBe(3000);
  });

  it('a moved job handed at once to a waiting worker comes back ready in its new tube', async () => {
    const dir = tmpDir();
    const s = startBinlog(dir, cleanups);
    const { h, c } = s;
    const w = h.open();
    w.watch('jobs');
    w.ignore('default');
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    const job = c.put({ priority: 9, body: 'to move' });
    edit(s, job.id, { tube: 'jobs', priority: 4, body: Buffer.from('moved') });
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: job.id }]);
    await settle(s.binlog);
    expectLiveAccounting(s);
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expect(durableFields(rec.h.engine.job(job.id)!)).toEqual(durableFields(job));
    expect(fieldsOf(rec.h.engine.job(job.id))).toMatchObject({ state: 'ready', priority: 4, reserves: 1 });
    expect(rec.h.engine.job(job.id)!.tube.name).toBe('jobs');
    expect(rec.h.engine.tube('jobs')!.ready.size).toBe(1);
  });

  it('later state records apply on top of an edit, and a delete after an edit removes the job', async () => {
    const dir = tmpDir();
    const s = startBinlog(dir, cleanups);
    const { h, c } = s;
    const w = h.open();
    const a = c.put({ body: 'a' });
    const b = c.put({ body: 'b' });
    edit(s, a.id, { tube: 'x', priority: 3, body: Buffer.from('aaaa') });
    edit(s, b.id, { tube: 'x', body: Buffer.from('bbbbbbbb') });
    w.watch('x');
    expect(h.engine.reserveJob(w.session, a.id).ok).toBe(true);
    expect(h.engine.release(w.session, a.id, 77, 5000).ok).toBe(true); // state record: delayed, pri 77
    expect(h.engine.delete(null, b.id).ok).toBe(true);
    expectLiveAccounting(s);
    await settle(s.binlog);
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(fieldsOf(rec.h.engine.job(a.id))).toMatchObject({ state: 'delayed', priority: 77, releases: 1, reserves: 1, deadlineAt: T0 + 5000 });
    expect(jobBody(rec.h.engine.job(a.id)!).toString()).toBe('aaaa');
    expect(rec.h.engine.job(b.id)).toBeUndefined();
    expect(rec.liveBytes).toBe(jobRecordBytes(1, 4));
  });
});

describe('live accounting and compaction under edits', () => {
  it('keeps liveBytes and per-segment live counts exact through edits that change sizes and tubes, across rolls', async () => {
    const dir = tmpDir();
    const s = startBinlog(dir, cleanups, { segmentBytes: 16 * KiB });
    const { h, c } = s;
    const w = h.open();
    const jobs: Job[] = [];
    for (let i = 0; i < 30; i++) jobs.push(c.put({ body: patternBody(100 + i * 10, i), delayMs: i % 4 === 0 ? 100_000 : 0 }));
    for (const job of jobs.filter((_, i) => i % 5 === 1)) bury(s, w, job.id);
    expectLiveAccounting(s);
    const tubes = ['default', 't', 'a-much-longer-tube-name', 'x'];
    for (let i = 0; i < 400; i++) {
      const job = jobs[(i * 7) % jobs.length]!;
      const change: JobEdit = {};
      if (i % 2 === 0) change.body = patternBody((i * 37) % 1500, i);
      if (i % 3 === 0) change.tube = tubes[i % tubes.length]!;
      if (i % 5 === 0) change.priority = i;
      if (i % 11 === 0) change.delayMs = i % 22 === 0 ? 0 : 50_000;
      edit(s, job.id, change);
      expectLiveAccounting(s);
      if (i % 25 === 0) await settle(s.binlog);
    }
    await settle(s.binlog);
    expect(s.binlog.stats().currentIndex).toBeGreaterThan(5);
    expectLiveAccounting(s);
    const liveBefore = internals(s.binlog).liveBytes;
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(rec.liveBytes).toBe(liveBefore);
    for (const job of h.engine.allJobs()) expect(jobFile(rec.h.engine.job(job.id)!)).toBe(jobFile(job));
    expect(s.fatal).toEqual([]);
  });

  it('compaction after many edits keeps only live data, and every job stays exact', async () => {
    const dir = tmpDir();
    const segmentBytes = 64 * KiB;
    const s = startBinlog(dir, cleanups, { segmentBytes });
    const { h, c } = s;
    const w = h.open();
    const jobs: Job[] = [];
    for (let i = 0; i < 100; i++) jobs.push(c.put({ body: patternBody(500, i), priority: i, delayMs: i % 6 === 0 ? 1_000_000 + i : 0 }));
    for (const job of jobs.filter((_, i) => i % 7 === 3)) bury(s, w, job.id);
    await settle(s.binlog);
    const names = ['a', 'bb', 'default', 'c'];
    let maxSettled = 0;
    for (let round = 0; round < 60; round++) {
      for (let i = 0; i < 50; i++) {
        const job = jobs[(round * 50 + i * 13) % jobs.length]!;
        edit(s, job.id, {
          body: patternBody(200 + ((round * 31 + i * 17) % 1300), round + i),
          tube: names[(round + i) % names.length]!,
          priority: (round * i) % 3000,
        });
      }
      await settle(s.binlog);
      const live = internals(s.binlog).liveBytes;
      const bound = Math.max(2 * live, 3 * segmentBytes) + segmentBytes + 64;
      if (!(await waitFor(() => dirBytes(dir) <= bound))) maxSettled = Math.max(maxSettled, dirBytes(dir) - bound);
    }
    expect(maxSettled, 'bytes above the bound once compaction had its turns').toBe(0);
    const st = s.binlog.stats();
    expect(st.oldestIndex).toBeGreaterThan(1);
    expect(st.recordsWritten).toBeGreaterThanOrEqual(3000);
    expect(fs.existsSync(path.join(dir, segmentFileName(1)))).toBe(false);
    expectLiveAccounting(s);
    expect(s.fatal).toEqual([]);
    // Nothing to warn about: the live counts compaction relies on were right.
    expect(s.logs.filter((l) => !l.startsWith('info '))).toEqual([]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(rec.liveBytes).toBe(internals(s.binlog).liveBytes);
    for (const job of h.engine.allJobs()) expect(jobFile(rec.h.engine.job(job.id)!)).toBe(jobFile(job));
  });

  it('the directory stays bounded while one job is edited thousands of times', async () => {
    const dir = tmpDir();
    const segmentBytes = 32 * KiB;
    const s = startBinlog(dir, cleanups, { segmentBytes });
    const { h, c } = s;
    const w = h.open();
    // A buried job that never changes: compaction must carry it forward.
    const still = c.put({ body: 'still here', priority: 11 });
    bury(s, w, still.id, 12);
    const hot = c.put({ body: 'hot' });
    await settle(s.binlog);
    const bound = 3 * segmentBytes + segmentBytes + 64;
    let maxSettled = 0;
    for (let i = 0; i < 3000; i++) {
      edit(s, hot.id, { body: patternBody(1000 + (i % 7), i), tube: i % 2 === 0 ? 'even' : 'odd', priority: i });
      if (i % 20 === 19) {
        for (let t = 0; t < 5; t++) await turn();
        maxSettled = Math.max(maxSettled, dirBytes(dir));
      }
    }
    await settle(s.binlog);
    expect(await waitFor(() => dirBytes(dir) <= bound)).toBe(true);
    expect(maxSettled).toBeLessThanOrEqual(bound);
    const st = s.binlog.stats();
    expect(st.currentIndex).toBeGreaterThan(50); // ~3 MB went through 32 KiB segments
    expect(st.oldestIndex).toBeGreaterThan(1);
    expect(st.recordsMigrated).toBeGreaterThan(0);
    expect(jobFile(still)).toBeGreaterThan(1);
    expectLiveAccounting(s);
    expect(internals(s.binlog).liveBytes).toBe(jobRecordBytes(7, 10) + jobRecordBytes(hot.tube.name.length, jobBody(hot).length));
    expect(s.logs.filter((l) => !l.startsWith('info '))).toEqual([]);

    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(fieldsOf(rec.h.engine.job(hot.id))).toMatchObject({ priority: 2999 });
    expect(rec.h.engine.job(hot.id)!.tube.name).toBe('odd');
    expect(rec.h.engine.tube('even')).toBeUndefined();
    expect(fieldsOf(rec.h.engine.job(still.id))).toMatchObject({ state: 'buried', priority: 12, buriedSeq: jobCounters(still).buriedSeq });
  });
});

describe('an edit the binlog cannot record', () => {
  it('is OUT_OF_MEMORY and changes nothing, in memory or on disk; deletes still work', async () => {
    const dir = tmpDir();
    const bfs = new BudgetFs(dir);
    const segmentBytes = 64 * KiB;
    const s = startBinlog(dir, cleanups, { segmentBytes, fs: bfs });
    const { h, c } = s;
    const w = h.open();
    const ready = c.put({ body: 'ready', priority: 3 });
    const delayed = c.put({ body: 'delayed', delayMs: 10_000 });
    const buried = c.put({ body: 'buried' });
    bury(s, w, buried.id, 4);
    await settle(s.binlog);
    // No more disk: fill the claimed segment with puts until they fail.
    bfs.budget = dirBytes(dir);
    let n = 0;
    while (n < 1000 && c.tryPut({ body: patternBody(1000, n) }).ok) n++;
    expect(n).toBeLessThan(1000);
    // Then with the smallest records, so no record of these jobs fits either.
    let m = 0;
    while (m < 1000 && c.tryPut({ body: '' }).ok) m++;
    expect(m).toBeLessThan(1000);
    await settle(s.binlog);
    const before = JSON.stringify([...h.engine.allJobs()].map(durableFields));
    const tubes = h.tubeNames();
    const written = s.binlog.stats().recordsWritten;
    const live = internals(s.binlog).liveBytes;
    for (const id of [ready.id, delayed.id, buried.id]) {
      for (const change of [{ priority: 1 }, { body: Buffer.from('x') }, { tube: 'elsewhere' }, { delayMs: 0 }] as JobEdit[]) {
        expect(h.engine.editJob(id, change), `${id} ${JSON.stringify(change)}`).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
      }
    }
    expect(JSON.stringify([...h.engine.allJobs()].map(durableFields))).toBe(before);
    expect(h.tubeNames()).toEqual(tubes);
    expect(s.binlog.stats().recordsWritten).toBe(written);
    expect(internals(s.binlog).liveBytes).toBe(live);
    expect(h.problems(h.engine.nextId)).toEqual([]);
    // Deletes use the headroom kept for them.
    expect(h.engine.delete(null, delayed.id).ok).toBe(true);
    await settle(s.binlog);
    expect(s.fatal).toEqual([]);
    const rec = replay(dir);
    expect(rec.problems).toEqual([]);
    expectSameState(h, rec.h);
    expect(jobBody(rec.h.engine.job(ready.id)!).toString()).toBe('ready');
  });
});
