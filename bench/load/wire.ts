/**
 * The beanstalkd protocol as the load generator needs it: pre-built command bytes, a push reader
 * that cuts the reply stream into replies without copying in the common case, and exact checks
 * of each reply, so a server that answers wrongly fails the run instead of scoring.
 */

const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;

/** Reply lines longer than this are not beanstalkd replies (the longest is USING + a 200-byte name). */
const MAX_LINE = 256;

/** Bytes at the start of a stamped body that hold the put's send time (µs, ASCII, zero-padded). */
export const STAMP_DIGITS = 16;

/** Priority, delay and TTR of every put: a TTR far beyond any run, so no job comes back. */
const PUT_PREFIX = 'put 1024 0 600 ';

/** A reply the server should not have sent; it fails the scenario. */
export class InvalidReplyError extends Error {
  override name = 'InvalidReplyError';
}

/**
 * Called once per complete reply. `buf` is valid only during the call. The line is
 * [lineStart, lineEnd) without its CRLF; for RESERVED the body is [bodyStart, bodyEnd) (its CRLF
 * already checked), otherwise both are -1.
 */
export type ReplyHandler = (buf: Buffer, lineStart: number, lineEnd: number, bodyStart: number, bodyEnd: number) => void;

/** The tube a load uses when it uses one; `index` picks one of `count` fixed-width names. */
export function tubeName(index: number, count: number): string {
  return count <= 1 ? 'bench' : `bench-${String(index).padStart(5, '0')}`;
}

/** A body of `size` bytes of 'x'; its first STAMP_DIGITS bytes are '0' when it is large enough. */
export function makeBody(size: number): Buffer {
  const body = Buffer.alloc(size, 'x');
  if (size >= STAMP_DIGITS) body.fill('0', 0, STAMP_DIGITS);
  return body;
}

/** `put ...\r\n<body>\r\n`, and where the body starts in it. */
export function putCommand(bodySize: number): { bytes: Buffer; bodyOffset: number } {
  const head = Buffer.from(`${PUT_PREFIX}${bodySize}\r\n`, 'latin1');
  return { bytes: Buffer.concat([head, makeBody(bodySize), Buffer.from('\r\n')]), bodyOffset: head.length };
}

/** One command line with its CRLF. */
export function commandLine(line: string): Buffer {
  return Buffer.from(`${line}\r\n`, 'latin1');
}

/** The exact bytes of a reply line without its CRLF, for `lineEquals`. */
export function replyLine(line: string): Buffer {
  return Buffer.from(line, 'latin1');
}

/** Writes `us` as STAMP_DIGITS ASCII digits at `offset` (no allocation: this runs per put). */
export function writeStamp(buf: Buffer, offset: number, us: number): void {
  let v = us;
  for (let i = offset + STAMP_DIGITS - 1; i >= offset; i--) {
    buf[i] = DIGIT_0 + (v % 10);
    v = Math.floor(v / 10);
  }
}

/** Reads a stamp written by `writeStamp`, or -1 when the bytes are not digits. */
export function readStamp(buf: Buffer, offset: number): number {
  let v = 0;
  for (let i = offset; i < offset + STAMP_DIGITS; i++) {
    const c = buf[i]!;
    if (c < DIGIT_0 || c > DIGIT_9) return -1;
    v = v * 10 + (c - DIGIT_0);
  }
  return v;
}

/** Microseconds on the monotonic clock, which all threads of the process share. */
export function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** True when [start, end) is one or more ASCII digits. */
function allDigits(buf: Buffer, start: number, end: number): boolean {
  if (end <= start) return false;
  for (let i = start; i < end; i++) {
    const c = buf[i]!;
    if (c < DIGIT_0 || c > DIGIT_9) return false;
  }
  return true;
}

const INSERTED = Buffer.from('INSERTED ', 'latin1');
const RESERVED = Buffer.from('RESERVED ', 'latin1');

/** Byte loop, not Buffer.compare: for replies of a few bytes the native call costs more than the bytes. */
function bytesAt(buf: Buffer, at: number, expected: Buffer): boolean {
  for (let i = 0; i < expected.length; i++) if (buf[at + i] !== expected[i]) return false;
  return true;
}

function startsWith(buf: Buffer, start: number, end: number, prefix: Buffer): boolean {
  return end - start >= prefix.length && bytesAt(buf, start, prefix);
}

/** True for exactly `INSERTED <digits>` (the line without CRLF). */
export function isInserted(buf: Buffer, start: number, end: number): boolean {
  return startsWith(buf, start, end, INSERTED) && allDigits(buf, start + INSERTED.length, end);
}

/** True when the line [start, end) is exactly `expected`. */
export function lineEquals(buf: Buffer, start: number, end: number, expected: Buffer): boolean {
  return end - start === expected.length && bytesAt(buf, start, expected);
}

/** Where the id of a RESERVED line (already checked by the reader) ends: the space before the byte count. */
export function reservedIdEnd(buf: Buffer, lineStart: number): number {
  return buf.indexOf(SPACE, lineStart + RESERVED.length);
}

/** Offset of the id in a RESERVED line. */
export const RESERVED_ID_OFFSET = RESERVED.length;

/** A reply for error messages: quoted, escaped, cut to 60 bytes. */
export function showReply(buf: Buffer, start: number, end: number): string {
  const cut = Math.min(end, start + 60);
  return JSON.stringify(buf.toString('latin1', start, cut)) + (cut < end ? '...' : '');
}

/**
 * Splits a reply stream into replies. Chunks are parsed in place; only a reply cut by a chunk
 * boundary is copied (and joined once enough bytes have arrived), so the common case allocates
 * nothing.
 */
export class ReplyReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes the pending partial reply needs before parsing can make progress. */
  private need = 0;

  constructor(
    private readonly onReply: ReplyHandler,
    /** The largest body a RESERVED reply may announce. */
    private readonly maxBody: number,
  ) {}

  /** Feeds received bytes; `chunk` may be reused by the caller after this returns. Throws InvalidReplyError. */
  push(chunk: Buffer): void {
    let buf = chunk;
    if (this.pendingBytes > 0) {
      if (this.pendingBytes + chunk.length < this.need) {
        this.pending.push(Buffer.from(chunk));
        this.pendingBytes += chunk.length;
        return;
      }
      this.pending.push(chunk);
      buf = Buffer.concat(this.pending, this.pendingBytes + chunk.length);
      this.pending = [];
      this.pendingBytes = 0;
    }
    const used = this.parse(buf);
    if (used < buf.length) {
      const rest = Buffer.from(buf.subarray(used));
      this.pending.push(rest);
      this.pendingBytes = rest.length;
    }
  }

  /** Bytes held back because they do not yet form a whole reply. */
  get buffered(): number {
    return this.pendingBytes;
  }

  /** Calls onReply for each whole reply in `buf`; returns how many bytes were consumed. */
  private parse(buf: Buffer): number {
    const len = buf.length;
    let pos = 0;
    while (pos < len) {
      const nl = buf.indexOf(LF, pos);
      if (nl < 0) {
        if (len - pos > MAX_LINE) throw new InvalidReplyError(`reply line longer than ${MAX_LINE} bytes: ${showReply(buf, pos, len)}`);
        this.need = len - pos + 1;
        return pos;
      }
      if (nl === pos || buf[nl - 1] !== CR) throw new InvalidReplyError(`reply not ended by CRLF: ${showReply(buf, pos, nl + 1)}`);
      const lineEnd = nl - 1;
      if (!startsWith(buf, pos, lineEnd, RESERVED)) {
        this.onReply(buf, pos, lineEnd, -1, -1);
        pos = nl + 1;
        continue;
      }
      const bytes = this.reservedBytes(buf, pos, lineEnd);
      const bodyStart = nl + 1;
      const bodyEnd = bodyStart + bytes;
      if (bodyEnd + 2 > len) {
        this.need = bodyEnd + 2 - pos;
        return pos;
      }
      if (buf[bodyEnd] !== CR || buf[bodyEnd + 1] !== LF) {
        throw new InvalidReplyError(`RESERVED body of ${bytes} bytes not followed by CRLF: ${showReply(buf, pos, Math.min(len, bodyEnd + 2))}`);
      }
      this.onReply(buf, pos, lineEnd, bodyStart, bodyEnd);
      pos = bodyEnd + 2;
    }
    this.need = 0;
    return pos;
  }

  /** The byte count of `RESERVED <id> <bytes>`, checking the whole line's shape. */
  private reservedBytes(buf: Buffer, start: number, end: number): number {
    const idStart = start + RESERVED.length;
    const space = buf.indexOf(SPACE, idStart);
    if (space < 0 || space >= end || !allDigits(buf, idStart, space) || !allDigits(buf, space + 1, end)) {
      throw new InvalidReplyError(`malformed RESERVED line: ${showReply(buf, start, end)}`);
    }
    let bytes = 0;
    for (let i = space + 1; i < end; i++) bytes = bytes * 10 + (buf[i]! - DIGIT_0);
    if (bytes > this.maxBody) throw new InvalidReplyError(`RESERVED announces ${bytes} bytes, more than the ${this.maxBody} put: ${showReply(buf, start, end)}`);
    return bytes;
  }
}
