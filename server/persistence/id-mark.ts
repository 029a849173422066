import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { requireRegularFile } from './dir-error.js';

export const ID_MARK_FILE = 'next-id';
const MAGIC = 0x44494250; // "PBID"
const BYTES = 16;

/**
 * The id high-water mark, kept outside the segments: after a torn or damaged newest segment
 * the ids in the lost records are still known to be used, so they are never handed out again.
 * 16 bytes: magic u32 | next id u64 | crc u32, rewritten in place with each group commit.
 */
export class IdMark {
  private readonly buf = Buffer.alloc(BYTES);
  private written = 0;

  private constructor(
    private readonly fd: number,
    private readonly write: (fd: number, buf: Buffer, position: number) => void,
  ) {}

  /** Opens (or creates) the mark; throws a BinlogDirError or the open's error when it cannot. */
  static open(dir: string, write: (fd: number, buf: Buffer, position: number) => void): IdMark {
    const file = path.join(dir, ID_MARK_FILE);
    requireRegularFile(file);
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
    return new IdMark(fd, write);
  }

  /** The stored next id, or 0 when the file is missing, short or damaged. */
  static read(dir: string): number {
    const file = path.join(dir, ID_MARK_FILE);
    let data: Buffer;
    try {
      // Only a regular file is read: reading a FIFO would block the start (open() refuses it).
      if (!fs.statSync(file).isFile()) return 0;
      data = fs.readFileSync(file);
    } catch {
      return 0;
    }
    if (data.length < BYTES || data.readUInt32LE(0) !== MAGIC) return 0;
    if (crc32(data.subarray(0, 12), 0) !== data.readUInt32LE(12)) return 0;
    return data.readUInt32LE(4) + data.readUInt32LE(8) * 0x1_0000_0000;
  }

  get fileDescriptor(): number {
    return this.fd;
  }

  /** Records `nextId` if it moved; returns true when it wrote. Throws on a write error. */
  store(nextId: number): boolean {
    if (nextId === this.written) return false;
    const b = this.buf;
    b.writeUInt32LE(MAGIC, 0);
    b.writeUInt32LE(nextId >>> 0, 4);
    b.writeUInt32LE(Math.floor(nextId / 0x1_0000_0000), 8);
    b.writeUInt32LE(crc32(b.subarray(0, 12), 0), 12);
    this.write(this.fd, b, 0);
    this.written = nextId;
    return true;
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
