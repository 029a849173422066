import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { MAX_JOB_SIZE_LIMIT, MAX_TUBE_NAME_LENGTH } from '../../shared/limits.js';
import { Binlog } from './binlog.js';
import { DirLock, DirLockedError } from './dir-lock.js';
import type { FileSystem } from './file-system.js';
import { JOB_RECORD_FIXED_BYTES } from './format.js';
import { recover, type Recovery } from './recovery.js';

/** beanstalkd's exit status when the binlog directory cannot be used. */
export const BINLOG_EXIT_CODE = 10;

export class BinlogDirError extends Error {}

export interface OpenedBinlog {
  binlog: Binlog;
  recovery: Recovery;
  lock: DirLock;
  /** How long the replay took (ms). */
  replayMs: number;
}

/**
 * Takes the directory's lock, replays its segments and opens a fresh segment for writing.
 * Throws BinlogDirError when the directory is missing or another server holds it.
 */
export function openBinlog(options: {
  dir: string;
  segmentBytes: number;
  fsyncMs: number | null;
  log: Logger;
  onFatal: (err: Error) => void;
  fs?: FileSystem;
}): OpenedBinlog {
  try {
    if (!statSync(options.dir).isDirectory()) throw new BinlogDirError(`${options.dir} is not a directory`);
  } catch (err) {
    if (err instanceof BinlogDirError) throw err;
    throw new BinlogDirError(`${options.dir}: ${(err as Error).message}`);
  }
  let lock: DirLock;
  try {
    lock = DirLock.acquire(options.dir);
  } catch (err) {
    if (err instanceof DirLockedError) throw new BinlogDirError(err.message);
    throw new BinlogDirError(`${options.dir}: ${(err as Error).message}`);
  }
  try {
    const started = performance.now();
    // Jobs written under an earlier, larger -z are still read back.
    const recovery = recover(options.dir, MAX_JOB_SIZE_LIMIT + JOB_RECORD_FIXED_BYTES + MAX_TUBE_NAME_LENGTH);
    const replayMs = performance.now() - started;
    for (const problem of recovery.problems) options.log.warn(`binlog: ${problem}`);
    const binlog = new Binlog({
      dir: options.dir,
      segmentBytes: options.segmentBytes,
      fsyncMs: options.fsyncMs,
      log: options.log,
      segments: recovery.segments,
      liveBytes: recovery.liveBytes,
      onFatal: options.onFatal,
      fs: options.fs,
    });
    return { binlog, recovery, lock, replayMs };
  } catch (err) {
    lock.release();
    throw err;
  }
}
