/**
 * openBinlog() on a directory where a file the binlog uses is not a file it can use: a
 * directory, a FIFO or a symlink loop under a segment's name, `next-id` or `beanpole.lock`.
 * Each is a BinlogDirError whose one-line message names the path and the cause; the lock is
 * released and nothing in the directory is changed.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness } from '../engine/testing.js';
import { Binlog } from './binlog.js';
import { LOCK_FILE } from './dir-lock.js';
import { ID_MARK_FILE } from './id-mark.js';
import { BinlogDirError, openBinlog } from './open-binlog.js';
import { Cleanups, MiB } from './testing.js';
import { jobBody } from '../engine/records.js';

const cleanups = new Cleanups();
afterEach(() => cleanups.run());

const silent = pino({ level: 'silent' });

function tryOpen(dir: string): unknown {
  const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined });
  const h = new Harness({ journal: binlog });
  try {
    const opened = openBinlog(dir, binlog, h.engine, silent);
    binlog.close();
    opened.lock.release();
    return null;
  } catch (err) {
    return err;
  }
}

/** A directory with one job written by a clean run, so there is a segment and a next-id. */
function usedDir(): string {
  const dir = cleanups.tmpDir('beanpole-open-');
  const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined });
  const h = new Harness({ journal: binlog });
  const opened = openBinlog(dir, binlog, h.engine, silent);
  h.open().put({ body: 'kept' });
  binlog.close();
  opened.lock.release();
  return dir;
}

/** name -> size, mode and kind of everything in `dir`. */
function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of fs.readdirSync(dir)) {
    const st = fs.lstatSync(path.join(dir, name));
    out[name] = `${st.mode.toString(8)} ${st.isFile() ? st.size : '-'}`;
  }
  return out;
}

const mkfifo = (p: string): void => {
  expect(spawnSync('mkfifo', [p]).status).toBe(0);
};

describe('openBinlog and files it cannot use', () => {
  it.each([
    ['a directory named like a segment', 'binlog.3.bp', (p: string) => fs.mkdirSync(p), 'is a directory, not a file'],
    ['a FIFO named like a segment (a read would block)', 'binlog.3.bp', mkfifo, 'is not a regular file'],
    ['a symlink loop named like a segment', 'binlog.3.bp', (p: string) => fs.symlinkSync(path.basename(p), p), 'ELOOP: too many symbolic links encountered'],
    ['next-id as a directory', ID_MARK_FILE, (p: string) => fs.mkdirSync(p), 'is a directory, not a file'],
    ['next-id as a FIFO', ID_MARK_FILE, mkfifo, 'is not a regular file'],
    ['beanpole.lock as a directory', LOCK_FILE, (p: string) => fs.mkdirSync(p), 'is a directory, not a file'],
    ['beanpole.lock as a FIFO', LOCK_FILE, mkfifo, 'is not a regular file'],
  ] as const)('%s: a BinlogDirError naming the path and the cause; the lock is released and nothing changes', (_name, file, make, cause) => {
    const dir = usedDir();
    const target = path.join(dir, file);
    fs.rmSync(target, { force: true });
    make(target);
    const before = listing(dir);

    const err = tryOpen(dir);
    expect(err).toBeInstanceOf(BinlogDirError);
    expect((err as Error).message).toBe(`${target}: ${cause}`);
    expect(listing(dir)).toEqual(before);

    // Once the entry is a plain file again (or gone), the directory opens with its job.
    fs.rmSync(target, { recursive: true, force: true });
    const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined });
    const h = new Harness({ journal: binlog });
    const opened = openBinlog(dir, binlog, h.engine, silent);
    expect(jobBody(h.engine.job(1)!).toString()).toBe('kept');
    binlog.close();
    opened.lock.release();
  });

  it('passes a bug through as it is, with its stack, after releasing the lock', () => {
    const dir = usedDir();
    const binlog = new Binlog({ dir, segmentBytes: MiB, fsyncMs: null, log: silent, onFatal: () => undefined });
    const h = new Harness({ journal: binlog });
    const bug = new TypeError('a bug');
    binlog.open = () => {
      throw bug;
    };
    expect(() => openBinlog(dir, binlog, h.engine, silent)).toThrow(bug);
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(false);
  });
});
