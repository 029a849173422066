/**
 * Test support for the persistence unit tests (imported only by `*.test.ts`): temporary
 * directories, and a Binlog + Engine started over a directory the way the server starts them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { MAX_JOB_SIZE_LIMIT, MAX_TUBE_NAME_LENGTH } from '../../shared/limits.js';
import { NO_COUNTS } from '../common/job-counts.js';
import type { Job, JobImage, JobState } from '../engine/records.js';
import { Harness, T0, type Client } from '../engine/testing.js';
import { Binlog } from './binlog.js';
import type { FileSystem } from './file-system.js';
import { JOB_RECORD_FIXED_BYTES, encodeJob, jobRecordBytes } from './format.js';
import { countLive, recover, type Recovery } from './recovery.js';
import { jobState, jobImageOf } from '../engine/records.js';

export const KiB = 1024;
export const MiB = 1024 * 1024;
/** The record bound the server replays with. */
export const MAX_PAYLOAD = MAX_JOB_SIZE_LIMIT + JOB_RECORD_FIXED_BYTES + MAX_TUBE_NAME_LENGTH;

/** A job as a record holds it: a ready job in `default`, with `over` applied. */
export function jobImage(over: Partial<JobImage> = {}): JobImage {
  return {
    id: 1,
    tube: 'default',
    state: 'ready',
    priority: 100,
    delayMs: 0,
    ttrMs: 60_000,
    createdAt: T0,
    deadlineAt: 0,
    buriedSeq: 0,
    ...NO_COUNTS,
    buryCause: 0,
    body: Buffer.from(`body of ${over.id ?? 1}`),
    ...over,
  };
}

/** The JOB record of `img` in a segment salted with `salt`. */
export function jobRecord(img: JobImage, salt: number): Buffer {
  const buf = Buffer.alloc(jobRecordBytes(img.tube.length, img.body.length));
  encodeJob(buf, 0, img, img.state, img.tube, salt);
  return buf;
}

/** Things to undo after each test, newest first (register `runCleanups` in afterEach). */
export class Cleanups {
  private readonly fns: (() => void)[] = [];

  add(fn: () => void): void {
    this.fns.push(fn);
  }

  run(): void {
    for (const fn of this.fns.splice(0).reverse()) fn();
  }

  /** A fresh directory under the system's temp dir, removed afterwards. */
  tmpDir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    this.add(() => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
  }
}

/** Sum of the sizes of the files in `dir` (files removed meanwhile count as 0). */
export function dirBytes(dir: string): number {
  let total = 0;
  for (const name of fs.readdirSync(dir)) {
    try {
      total += fs.statSync(path.join(dir, name)).size;
    } catch {
      // removed meanwhile
    }
  }
  return total;
}

/** One turn of the event loop (the binlog commits in the check phase). */
export const turn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/** Runs event-loop turns (and short sleeps, for fsyncs) until `cond` holds or `ms` pass. */
export async function waitFor(cond: () => boolean, ms = 2000): Promise<boolean> {
  const until = performance.now() + ms;
  for (let i = 0; !cond(); i++) {
    if (performance.now() > until) return false;
    if (i % 20 === 19) await new Promise((r) => setTimeout(r, 1));
    else await turn();
  }
  return true;
}

/** The fields a restart must keep, as the binlog stores them (reserved jobs are ready). */
export function durableFields(job: Job): Record<string, unknown> {
  const state: JobState = jobState(job) === 'reserved' ? 'ready' : jobState(job);
  const image = jobImageOf(job);
  return {
    ...image,
    state,
    deadlineAt: state === 'delayed' ? image.deadlineAt : 0,
    // As text: deep equality on many Buffers is slow.
    body: image.body.toString('base64'),
  };
}

/** `n` bytes of a pattern that depends on `seed`. */
export function patternBody(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + i * 7) & 0xff;
  return b;
}

export interface BinlogServer {
  binlog: Binlog;
  h: Harness;
  c: Client;
  recovery: Recovery;
  fatal: Error[];
  /** What the binlog logged, as `level msg` lines. */
  logs: string[];
}

export interface StartOptions {
  segmentBytes?: number;
  fsyncMs?: number | null;
  fs?: FileSystem;
  owner?: { uid: number; gid: number };
}

/** Recovers DIR into a fresh engine and opens a Binlog over it, as a server start does. */
export function startBinlog(dir: string, cleanups: Cleanups, options: StartOptions = {}): BinlogServer {
  const fatal: Error[] = [];
  const logs: string[] = [];
  const log = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as { level: number; msg: string };
        logs.push(`${pino.levels.labels[entry.level] ?? entry.level} ${entry.msg}`);
      },
    },
  );
  const binlog = new Binlog({
    dir,
    segmentBytes: options.segmentBytes ?? MiB,
    fsyncMs: options.fsyncMs === undefined ? null : options.fsyncMs,
    log,
    onFatal: (err) => fatal.push(err),
    fs: options.fs,
    owner: options.owner,
  });
  const h = new Harness({ journal: binlog });
  const recovery = recover(dir, MAX_PAYLOAD, h.engine);
  h.engine.finishRestore(recovery.nextId);
  binlog.open(recovery.segments, countLive(recovery.segments, h.engine.allJobs(), recovery.tubeFiles), h.engine, recovery.tubeFiles);
  cleanups.add(() => {
    try {
      binlog.close();
    } catch {
      // a crashed or failed binlog
    }
  });
  return { binlog, h, c: h.open(), recovery, fatal, logs };
}
