import fs from 'node:fs';

/**
 * The binlog directory, or a file the binlog keeps in it, cannot be used: the server does not
 * start (exit status 10, like beanstalkd). The message is one line naming the path and the cause.
 */
export class BinlogDirError extends Error {}

/** True for an error the operating system reported (it names a system call), as opposed to a bug. */
export function isSystemError(err: unknown): err is NodeJS.ErrnoException {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).syscall === 'string';
}

/**
 * `err`, met while using `file`, as a BinlogDirError naming the file (the one in the error when
 * Node gives it, else `file`) and the cause. A BinlogDirError is passed through.
 */
export function fileError(err: unknown, file: string): BinlogDirError {
  if (err instanceof BinlogDirError) return err;
  const e = err as NodeJS.ErrnoException;
  return new BinlogDirError(`${e.path ?? file}: ${cause(e)}`);
}

function cause(e: NodeJS.ErrnoException): string {
  // Node says "illegal operation on a directory", which does not tell that a file was expected.
  if (e.code === 'EISDIR') return 'is a directory, not a file (EISDIR)';
  // Node's messages end with the call and the path ("EACCES: permission denied, open '/x'"),
  // and the path is said already.
  return String(e.message).replace(/, \w+ '[^']*'( -> '[^']*')?$/, '');
}

/**
 * Throws a BinlogDirError when `file` exists but is not a regular file: a directory cannot be
 * read as one, and reading a FIFO would block the start for good. A missing file is fine.
 */
export function requireRegularFile(file: string): void {
  let stats: fs.Stats;
  try {
    stats = fs.statSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw fileError(err, file);
  }
  if (stats.isDirectory()) throw new BinlogDirError(`${file}: is a directory, not a file`);
  if (!stats.isFile()) throw new BinlogDirError(`${file}: is not a regular file`);
}

/** Runs `fn`, which uses `file`; an operating system error becomes a BinlogDirError naming the file. */
export function withFile<T>(file: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw isSystemError(err) ? fileError(err, file) : err;
  }
}
