/**
 * Push parser for the Gearman wire format: `write(chunk)` in, binary packets and text admin
 * lines out, with no socket. Each message is told apart by its first byte, as gearmand does: a
 * NUL starts a binary packet (`\0REQ` or `\0RES`, a big-endian u32 type, a big-endian u32 data
 * size, then the data); anything else starts an admin line ending in `\n` (a `\r` before it is
 * dropped).
 *
 * Limits are checked before anything is buffered: a packet whose declared size is over
 * `maxDataBytes` is reported (`oversized`) and its data discarded as it arrives, and an admin
 * line longer than MAX_ADMIN_LINE is discarded up to its end. Data is handed out as a range of
 * the caller's chunk when it arrived whole (valid only during the callback) and as a buffer
 * assembled here otherwise (`owned`).
 */

import { CR, LF, PushParser } from '../push-parser.js';

/** Longest admin line kept; longer ones are answered as errors (`adminOverlong`). */
export const MAX_ADMIN_LINE = 8192;
export const HEADER_BYTES = 12;
/** Packets up to this size are assembled in a buffer of their size; larger ones piece by piece. */
const EAGER_BYTES = 64 * 1024;

/** `\0REQ` (a request) or `\0RES` (a response, which a client must not send). */
export type Magic = 'REQ' | 'RES';

export interface GearmanFrameHandler {
  /**
   * A whole packet: its data is `buf[start, end)`, read in place (no view made per packet), and
   * valid only during the call unless `owned`.
   */
  packet(magic: Magic, type: number, buf: Buffer, start: number, end: number, owned: boolean): void;
  /** A packet declared `size` data bytes, over the limit; its data is being discarded. */
  oversized(magic: Magic, type: number, size: number): void;
  /** The 4 bytes after a NUL were neither REQ nor RES: nothing more is parsed. */
  badMagic(): void;
  /** An admin line without its line end. */
  adminLine(line: string): void;
  /** An admin line over MAX_ADMIN_LINE bytes was discarded up to its end. */
  adminOverlong(): void;
}

type Mode = 'start' | 'header' | 'data' | 'skip' | 'text' | 'overlong' | 'stopped';

export class GearmanParser extends PushParser {
  private mode: Mode = 'start';
  private readonly header = Buffer.allocUnsafe(HEADER_BYTES);
  private headerFilled = 0;
  private magic: Magic = 'REQ';
  private type = 0;
  private dataLength = 0;
  private dataBuffer: Buffer | null = null;
  private dataFilled = 0;
  /** Pieces of a large packet's data, kept as received until it is whole. */
  private dataParts: Buffer[] | null = null;
  private skipLeft = 0;
  /** Pieces of an admin line that began in an earlier chunk. */
  private textParts: Buffer[] = [];
  private textLength = 0;

  constructor(
    private readonly handler: GearmanFrameHandler,
    /** Largest data part of a packet accepted (bytes). */
    private readonly maxDataBytes: number,
  ) {
    super();
  }

  /**
   * Bytes received but not parsed yet: what flow control bounds. Packet data being assembled is
   * not counted: its buffer has the declared size (which the limit bounds) and only more input
   * can complete it.
   */
  get buffered(): number {
    return this.queuedBytes + this.textLength;
  }

  protected override discarding(): boolean {
    return this.mode === 'stopped';
  }

  /** Parses one message (or part of one) from chunk[offset..]; returns the new offset. */
  protected step(chunk: Buffer, offset: number): number {
    switch (this.mode) {
      case 'start':
        this.mode = chunk[offset] === 0 ? 'header' : 'text';
        return offset;
      case 'header':
        return this.readHeader(chunk, offset);
      case 'data':
        return this.readData(chunk, offset);
      case 'skip': {
        const n = Math.min(this.skipLeft, chunk.length - offset);
        this.skipLeft -= n;
        if (this.skipLeft === 0) this.mode = 'start';
        return offset + n;
      }
      case 'text':
      case 'overlong':
        return this.readText(chunk, offset);
      case 'stopped':
        return chunk.length;
    }
  }

  private readHeader(chunk: Buffer, offset: number): number {
    let header: Buffer;
    let at: number;
    let end: number;
    if (this.headerFilled === 0 && chunk.length - offset >= HEADER_BYTES) {
      // Fast path: the whole header is in this chunk, read in place.
      header = chunk;
      at = offset;
      end = offset + HEADER_BYTES;
    } else {
      const n = Math.min(HEADER_BYTES - this.headerFilled, chunk.length - offset);
      chunk.copy(this.header, this.headerFilled, offset, offset + n);
      this.headerFilled += n;
      if (this.headerFilled < HEADER_BYTES) return offset + n;
      this.headerFilled = 0;
      header = this.header;
      at = 0;
      end = offset + n;
    }
    // "\0REQ" = 00 52 45 51, "\0RES" = 00 52 45 53
    if (header[at + 1] !== 0x52 || header[at + 2] !== 0x45 || (header[at + 3] !== 0x51 && header[at + 3] !== 0x53)) {
      this.mode = 'stopped';
      this.handler.badMagic();
      return chunk.length;
    }
    this.magic = header[at + 3] === 0x51 ? 'REQ' : 'RES';
    this.type = u32At(header, at + 4);
    const size = u32At(header, at + 8);
    if (size > this.maxDataBytes) {
      this.skipLeft = size;
      this.mode = size === 0 ? 'start' : 'skip';
      this.handler.oversized(this.magic, this.type, size);
      return end;
    }
    this.dataLength = size;
    this.dataBuffer = null;
    this.dataFilled = 0;
    this.mode = 'data';
    if (size === 0) {
      this.mode = 'start';
      this.handler.packet(this.magic, this.type, EMPTY, 0, 0, false);
    }
    return end;
  }

  private readData(chunk: Buffer, offset: number): number {
    const available = chunk.length - offset;
    if (this.dataBuffer === null && this.dataParts === null) {
      if (available >= this.dataLength) {
        const end = offset + this.dataLength;
        this.mode = 'start';
        this.handler.packet(this.magic, this.type, chunk, offset, end, false);
        return end;
      }
      // A large packet is not given its declared size up front (a header and one byte must
      // not cost a gigabyte): its pieces are kept as they come and joined once it is whole.
      if (this.dataLength <= EAGER_BYTES) this.dataBuffer = Buffer.allocUnsafe(this.dataLength);
      else this.dataParts = [];
      this.dataFilled = 0;
    }
    const n = Math.min(available, this.dataLength - this.dataFilled);
    if (this.dataParts !== null) {
      // Copied: socket chunks are read into a buffer that the next read reuses.
      this.dataParts.push(Buffer.from(chunk.subarray(offset, offset + n)));
      this.dataFilled += n;
      if (this.dataFilled === this.dataLength) {
        const data = Buffer.concat(this.dataParts, this.dataLength);
        this.dataParts = null;
        this.mode = 'start';
        this.handler.packet(this.magic, this.type, data, 0, data.length, true);
      }
      return offset + n;
    }
    chunk.copy(this.dataBuffer!, this.dataFilled, offset, offset + n);
    this.dataFilled += n;
    if (this.dataFilled === this.dataLength) {
      const data = this.dataBuffer!;
      this.dataBuffer = null;
      this.mode = 'start';
      this.handler.packet(this.magic, this.type, data, 0, data.length, true);
    }
    return offset + n;
  }

  private readText(chunk: Buffer, offset: number): number {
    const lf = chunk.indexOf(LF, offset);
    const end = lf < 0 ? chunk.length : lf;
    if (this.mode === 'text') {
      if (this.textLength + (end - offset) > MAX_ADMIN_LINE) {
        this.mode = 'overlong';
        this.textParts = [];
        this.textLength = 0;
      } else if (end > offset) {
        this.textParts.push(Buffer.from(chunk.subarray(offset, end)));
        this.textLength += end - offset;
      }
    }
    if (lf < 0) return chunk.length;
    const overlong = this.mode === 'overlong';
    let line = this.textParts.length === 1 ? this.textParts[0]! : Buffer.concat(this.textParts, this.textLength);
    this.textParts = [];
    this.textLength = 0;
    this.mode = 'start';
    if (overlong) {
      this.handler.adminOverlong();
    } else {
      if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
      this.handler.adminLine(line.toString('latin1'));
    }
    return lf + 1;
  }
}

const EMPTY = Buffer.alloc(0);

/** A big-endian u32 by hand: Buffer's readUInt32BE is a call with checks, once per packet and field. */
function u32At(buf: Buffer, at: number): number {
  return ((buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) | buf[at + 3]!) >>> 0;
}
