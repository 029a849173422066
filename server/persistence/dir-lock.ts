import fs from 'node:fs';
import path from 'node:path';
import { requireRegularFile } from './dir-error.js';

export const LOCK_FILE = 'beanpole.lock';

/** Why the directory could not be locked. */
export class DirLockedError extends Error {}

/**
 * The process's start time in clock ticks since boot (/proc/PID/stat field 22), or null when
 * there is no such running process. A zombie (killed, not yet reaped) counts as gone.
 */
function startTicks(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function isAlive(pid: number, ticks: string): boolean {
  return startTicks(pid) === ticks;
}

/**
 * Keeps a second server off the same binlog directory. The lock file holds the owner's pid and
 * start time; a lock left by a process that is gone (killed, crashed) is taken over, so a
 * restart after SIGKILL needs no manual cleanup. (Node has no fcntl locks; the start time
 * guards against pid reuse.)
 */
export class DirLock {
  private constructor(private readonly file: string) {}

  /**
   * Takes the lock, or throws DirLockedError when a live server holds it, a BinlogDirError when
   * something other than a file has the lock's name, or the file system's error.
   */
  static acquire(dir: string): DirLock {
    const file = path.join(dir, LOCK_FILE);
    const me = `${process.pid} ${startTicks(process.pid) ?? '0'}\n`;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        fs.writeFileSync(file, me, { flag: 'wx', mode: 0o600 });
        return new DirLock(file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      // A directory (or a FIFO) under the lock's name is not a lock to take over.
      requireRegularFile(file);
      let owner: string;
      try {
        owner = fs.readFileSync(file, 'latin1');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile: try again
        throw err;
      }
      const [pidText, ticks] = owner.trim().split(' ');
      const pid = Number(pidText);
      if (Number.isInteger(pid) && pid > 0 && ticks !== undefined && isAlive(pid, ticks)) {
        throw new DirLockedError(`${dir} is in use by another server (pid ${pid}); lock file ${file}`);
      }
      fs.rmSync(file, { force: true });
    }
    throw new DirLockedError(`cannot take the lock file ${file}`);
  }

  release(): void {
    fs.rmSync(this.file, { force: true });
  }
}
