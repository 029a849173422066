import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { MAX_JOB_SIZE_LIMIT, MAX_TUBE_NAME_LENGTH } from '../../shared/limits.js';
import type { Engine } from '../engine/engine.js';
import type { Binlog } from './binlog.js';
import { DirLock, DirLockedError } from './dir-lock.js';
import { JOB_RECORD_FIXED_BYTES } from './format.js';
import { countLive, recover, type Recovery } from './recovery.js';

/** beanstalkd's exit status when the binlog directory cannot be used. */
export const BINLOG_EXIT_CODE = 10;

export class BinlogDirError extends Error {}

export interface OpenedBinlog {
  lock: DirLock;
  recovery: Recovery;
  jobs: number;
  /** How long the replay took, restoring the engine included (ms). */
  replayMs: number;
}

/**
 * Takes the directory's lock, replays its segments into `engine` (whose journal is `binlog`,
 * not yet open) and opens a fresh segment for writing. Throws BinlogDirError when the
 * directory is missing or another server holds it.
 */
export function openBinlog(dir: string, binlog: Binlog, engine: Engine, log: Logger): OpenedBinlog {
  const options = { dir };
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
    const recovery = recover(dir, MAX_JOB_SIZE_LIMIT + JOB_RECORD_FIXED_BYTES + MAX_TUBE_NAME_LENGTH, engine);
    for (const problem of recovery.problems) log.warn(`binlog: ${problem}`);
    const jobs = engine.finishRestore(recovery.nextId);
    const liveBytes = countLive(recovery.segments, engine.allJobs());
    binlog.open(recovery.segments, liveBytes, engine);
    return { lock, recovery, jobs, replayMs: performance.now() - started };
  } catch (err) {
    lock.release();
    throw err;
  }
}
