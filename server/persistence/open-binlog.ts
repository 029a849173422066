import { statSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { MAX_JOB_SIZE_LIMIT, MAX_TUBE_NAME_LENGTH } from '../../shared/limits.js';
import type { Engine } from '../engine/engine.js';
import type { Binlog } from './binlog.js';
import { BinlogDirError, fileError, isSystemError } from './dir-error.js';
import { DirLock, DirLockedError, LOCK_FILE } from './dir-lock.js';
import { JOB_RECORD_FIXED_BYTES } from './format.js';
import { countLive, recover, type Recovery } from './recovery.js';

/** beanstalkd's exit status when the binlog directory cannot be used. */
export const BINLOG_EXIT_CODE = 10;

export { BinlogDirError };

export interface OpenedBinlog {
  lock: DirLock;
  recovery: Recovery;
  jobs: number;
  /** How long the replay took, restoring the engine included (ms). */
  replayMs: number;
}

/**
 * Takes the directory's lock, replays its segments into `engine` (whose journal is `binlog`,
 * not yet open) and opens a fresh segment for writing. Throws BinlogDirError, one line naming
 * the path and the cause, when the directory or a file in it cannot be used (missing, held by
 * another server, a directory where a file should be, unreadable, no space for a segment).
 */
/** Room for a record's tube name: beanstalkd's 200 bytes, or a Gearman function's 255. */
const MAX_NAME_BYTES = Math.max(MAX_TUBE_NAME_LENGTH, 255);
/** Room beyond -z in a body: a Gearman job keeps its unique id (up to 64 bytes and a NUL) in front. */
const BODY_PREFIX_BYTES = 65;

export function openBinlog(dir: string, binlog: Binlog, engine: Engine, log: Logger): OpenedBinlog {
  requireDirectory(dir);
  const lock = takeLock(dir);
  try {
    const started = performance.now();
    // Jobs written under an earlier, larger -z are still read back.
    const recovery = recover(dir, MAX_JOB_SIZE_LIMIT + BODY_PREFIX_BYTES + JOB_RECORD_FIXED_BYTES + MAX_NAME_BYTES, engine);
    for (const problem of recovery.problems) log.warn(`binlog: ${problem}`);
    const jobs = engine.finishRestore(recovery.nextId);
    const liveBytes = countLive(recovery.segments, engine.allJobs(), recovery.tubeFiles);
    binlog.open(recovery.segments, liveBytes, engine, recovery.tubeFiles);
    return { lock, recovery, jobs, replayMs: performance.now() - started };
  } catch (err) {
    lock.release();
    // Any file the start could not use (the error names it when Node knows it) is a directory
    // problem for the operator, not a crash; other errors are bugs and keep their stack.
    throw isSystemError(err) ? fileError(err, dir) : err;
  }
}

function requireDirectory(dir: string): void {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch (err) {
    throw fileError(err, dir);
  }
  if (!isDirectory) throw new BinlogDirError(`${dir} is not a directory`);
}

function takeLock(dir: string): DirLock {
  try {
    return DirLock.acquire(dir);
  } catch (err) {
    if (err instanceof DirLockedError) throw new BinlogDirError(err.message);
    throw isSystemError(err) ? fileError(err, path.join(dir, LOCK_FILE)) : err;
  }
}
