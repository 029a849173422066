import fs from 'node:fs';

/**
 * The file operations the binlog uses, as one seam: production passes `nodeFileSystem`; tests
 * pass a wrapper that fails like a full or broken disk. Writes are synchronous (they go to the
 * page cache, and the reply waits for them anyway); fsync and compaction reads are asynchronous
 * so they never hold up the event loop.
 */
export interface FileSystem {
  openAppend(path: string): number;
  openRead(path: string): number;
  /** Writes all of `buf` at `position`; throws on error (a short write is retried). */
  writeAll(fd: number, buf: Buffer, position: number): void;
  truncate(fd: number, length: number): void;
  close(fd: number): void;
  unlink(path: string): void;
  /** fdatasync, waiting for it. */
  syncNow(fd: number): void;
  /** fdatasync in the background. */
  sync(fd: number, done: (err: Error | null) => void): void;
  read(fd: number, buf: Buffer, position: number, done: (err: Error | null, bytesRead: number) => void): void;
}

export const nodeFileSystem: FileSystem = {
  openAppend: (path) => fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600),
  openRead: (path) => fs.openSync(path, 'r'),
  writeAll(fd, buf, position) {
    for (let done = 0; done < buf.length; ) {
      done += fs.writeSync(fd, buf, done, buf.length - done, position + done);
    }
  },
  truncate: (fd, length) => fs.ftruncateSync(fd, length),
  close: (fd) => fs.closeSync(fd),
  unlink: (path) => fs.unlinkSync(path),
  syncNow: (fd) => fs.fdatasyncSync(fd),
  sync: (fd, done) => fs.fdatasync(fd, (err) => done(err)),
  read: (fd, buf, position, done) => fs.read(fd, buf, 0, buf.length, position, (err, n) => done(err, n)),
};
