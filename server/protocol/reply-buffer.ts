import type { Durability, JobBytes } from '../operations/operations.js';
import { LastMemory, viewOf } from './buffer-view.js';

/** First slab size: under half of Node's buffer pool, so small slabs are cheap slices of it. */
const SMALL_SLAB = 4000;

/**
 * A connection's outgoing bytes (any front door's). Replies are encoded straight into a slab as they are made (no
 * string or Buffer per reply) and leave in one socket write per turn of the event loop.
 *
 * A reply must not tell of a change that a crash could still lose: each reply is tagged with
 * the journal sequence appended before it, and `flush` writes only the prefix whose records
 * are durable. The rest waits (`held`) and is flushed when the journal catches up; order is
 * kept because the bytes are one contiguous run.
 */
export class ReplyBuffer {
  private slab: Buffer = Buffer.alloc(0);
  /** Unsent bytes are slab[start, end). Bytes before `start` belong to earlier socket writes. */
  private start = 0;
  private end = 0;
  /** Positions from which a higher journal sequence is needed, ascending: [pos, seq, pos, seq...]. */
  private marks: number[] = [];
  private waiting = false;

  constructor(
    /** Sends bytes; true when the kernel took all of them, so their memory may be written over. */
    private readonly write: (bytes: Buffer) => boolean,
    private readonly durability: Durability,
  ) {}

  /** Unsent bytes, held or not. */
  get pending(): number {
    return this.end - this.start;
  }

  /** Bytes waiting for the journal. */
  get held(): number {
    return this.marks.length === 0 ? 0 : this.end - this.marks[0]!;
  }

  /** Copies a fixed reply. (TypedArray `set` is several times cheaper than `Buffer.copy` for a few bytes.) */
  bytes(data: Buffer): void {
    const at = this.reserve(data.length);
    this.slab.set(data, at);
  }

  /** `WORD N\r\n`, as in `INSERTED 7` or `WATCHING 2`. */
  wordNumber(word: Buffer, n: number): void {
    const at = this.reserve(word.length + decimalLength(n) + 2);
    this.slab.set(word, at);
    crlfAt(this.slab, writeDecimal(this.slab, at + word.length, n));
  }

  /** `WORD text\r\n` for Latin-1 text, as in `USING name`. */
  wordText(word: Buffer, text: string): void {
    const at = this.reserve(word.length + text.length + 2);
    this.slab.set(word, at);
    this.slab.write(text, at + word.length, 'latin1');
    crlfAt(this.slab, at + word.length + text.length);
  }

  /** `WORD id bytes\r\n<body>\r\n` (RESERVED, FOUND), copied from where the store holds the body. */
  job(word: Buffer, id: number, body: Pick<JobBytes, 'bodyBuf' | 'bodyOffset' | 'bodyLength'>): void {
    const n = body.bodyLength;
    const at = this.reserve(word.length + decimalLength(id) + 1 + decimalLength(n) + 2 + n + 2);
    const slab = this.slab;
    slab.set(word, at);
    let p = writeDecimal(slab, at + word.length, id);
    slab[p++] = 32;
    p = writeDecimal(slab, p, n);
    crlfAt(slab, p);
    body.bodyBuf.copy(slab, p + 2, body.bodyOffset, body.bodyOffset + n);
    crlfAt(slab, p + 2 + n);
  }

  /**
   * A binary packet whose only argument is a job handle, `prefix` then `id`'s digits
   * (JOB_CREATED, WORK_FAIL): written in place, with no string or array per reply.
   */
  handlePacket(type: number, prefix: Buffer, id: number): void {
    const size = prefix.length + decimalLength(id);
    const at = this.packetHeader(type, size);
    copySmall(prefix, 0, prefix.length, this.slab, at);
    writeDecimal(this.slab, at + prefix.length, id);
  }

  /**
   * JOB_ASSIGN and JOB_ASSIGN_UNIQ: the handle (`prefix`, `id`), the function name and
   * body[start, end), written in place.
   */
  assignPacket(type: number, prefix: Buffer, id: number, fn: string, body: Buffer, start: number, end: number): void {
    const size = prefix.length + decimalLength(id) + 1 + fn.length + 1 + (end - start);
    let p = this.packetHeader(type, size);
    const slab = this.slab;
    copySmall(prefix, 0, prefix.length, slab, p);
    p = writeDecimal(slab, p + prefix.length, id);
    slab[p++] = 0;
    p = writeLatin1(slab, p, fn);
    slab[p++] = 0;
    copySmall(body, start, end, slab, p);
  }

  /** A binary packet with one argument, `data[start, end)` (a WORK_* packet forwarded as it came). */
  dataPacket(type: number, data: Buffer, start: number, end: number): void {
    const at = this.packetHeader(type, end - start);
    copySmall(data, start, end, this.slab, at);
  }

  /** Room for a packet of `size` data bytes, its header written; returns where its data goes. */
  private packetHeader(type: number, size: number): number {
    const at = this.reserve(12 + size);
    const slab = this.slab;
    slab[at] = 0;
    slab[at + 1] = 0x52; // R
    slab[at + 2] = 0x45; // E
    slab[at + 3] = 0x53; // S
    writeU32(slab, at + 4, type);
    writeU32(slab, at + 8, size);
    return at + 12;
  }

  /**
   * Sends every unsent byte whose records are durable, in one write; the rest is sent when the
   * journal catches up.
   */
  flush(): void {
    if (this.end === this.start) return;
    let limit = this.end;
    const marks = this.marks;
    if (marks.length > 0) {
      const durable = this.durability.durableSeq;
      let i = 0;
      while (i < marks.length && marks[i + 1]! <= durable) i += 2;
      if (i > 0) marks.splice(0, i);
      if (marks.length > 0) {
        limit = marks[0]!;
        if (!this.waiting) {
          this.waiting = true;
          this.durability.whenDurable(marks[1]!, this.onDurable);
        }
      }
    }
    if (limit > this.start) {
      const out = viewOf(this.slab, this.start, limit);
      this.start = limit;
      // A drained big slab is let go: an idle connection keeps at most a small pooled one.
      if (this.start === this.end && this.slab.length > SMALL_SLAB) this.dropSlab();
      // Once the kernel has every byte, the next replies go to the slab's start again: a client
      // that waits for each reply gets them all from the same few bytes of memory, still in the
      // CPU's cache, and the slab is never outgrown and replaced.
      if (this.write(out) && this.start === this.end) this.start = this.end = 0;
    }
  }

  private readonly onDurable = (): void => {
    this.waiting = false;
    this.flush();
  };

  /** Makes room for `n` more bytes and tags them with the journal sequence; returns where they go. */
  private reserve(n: number): number {
    const seq = this.durability.appendedSeq;
    if (seq > this.durability.durableSeq) {
      const marks = this.marks;
      if (marks.length === 0 || marks[marks.length - 1]! < seq) marks.push(this.end, seq);
    }
    if (this.slab.length - this.end < n) this.grow(n);
    const at = this.end;
    this.end += n;
    return at;
  }

  /** Moves the unsent bytes to a bigger slab (or a fresh small one). */
  private grow(n: number): void {
    const pending = this.end - this.start;
    const size = Math.max(SMALL_SLAB, pending + n, pending > 0 ? this.slab.length * 2 : 0);
    const slab = Buffer.allocUnsafe(size);
    this.slab.copy(slab, 0, this.start, this.end);
    const shift = this.start;
    for (let i = 0; i < this.marks.length; i += 2) this.marks[i]! -= shift;
    this.slab = slab;
    this.start = 0;
    this.end = pending;
  }

  private dropSlab(): void {
    this.slab = Buffer.alloc(0);
    this.start = this.end = 0;
  }

}

/** Big-endian u32 by hand: Buffer's writeUInt32BE checks its arguments on every call. */
function writeU32(buf: Buffer, at: number, n: number): void {
  buf[at] = n >>> 24;
  buf[at + 1] = (n >>> 16) & 0xff;
  buf[at + 2] = (n >>> 8) & 0xff;
  buf[at + 3] = n & 0xff;
}

/**
 * Up to this many bytes a loop copies (about 1 ns a byte); a native copy costs about 40 ns
 * whatever its length, since Buffer.copy of part of a buffer first makes a view of it.
 */
const SMALL_COPY = 24;
/** The same for Latin-1 text: a short function name is written by a loop, a long one natively. */
const SMALL_TEXT = 32;

/** The memory copySmall copies from last (a body store slab is 128 KiB; a larger buffer is not kept). */
const copiedFrom = new LastMemory(256 * 1024);

function copySmall(src: Buffer, start: number, end: number, dst: Buffer, at: number): void {
  if (end - start > SMALL_COPY) {
    // A plain Uint8Array view for TypedArray `set`: Buffer.copy makes the same view, after
    // checks of its own, and a Buffer view (subarray) costs a constructor call more. Job bodies
    // come from the same store slab for many jobs in a row: its memory is kept (LastMemory).
    dst.set(new Uint8Array(copiedFrom.of(src), src.byteOffset + start, end - start), at);
    return;
  }
  for (let i = start; i < end; i++) dst[at++] = src[i]!;
}

/** Writes Latin-1 text at `at` (short names by a loop, no native call); returns the position after it. */
function writeLatin1(buf: Buffer, at: number, text: string): number {
  if (text.length > SMALL_TEXT) return at + buf.write(text, at, 'latin1');
  for (let i = 0; i < text.length; i++) buf[at++] = text.charCodeAt(i);
  return at;
}

function crlfAt(buf: Buffer, at: number): void {
  buf[at] = 13;
  buf[at + 1] = 10;
}

/** Digits of a non-negative integer: compared, not divided (this runs for every job handle and id). */
function decimalLength(n: number): number {
  if (n < 1e8) return n < 1e4 ? (n < 100 ? (n < 10 ? 1 : 2) : n < 1000 ? 3 : 4) : n < 1e6 ? (n < 1e5 ? 5 : 6) : n < 1e7 ? 7 : 8;
  let digits = 9;
  for (let v = Math.floor(n / 1e9); v >= 1; v = Math.floor(v / 10)) digits++;
  return digits;
}

/** Writes a non-negative integer's digits at `at`; returns the position after them. */
function writeDecimal(buf: Buffer, at: number, n: number): number {
  const end = at + decimalLength(n);
  let p = end;
  let v = n;
  // Small integer arithmetic below 2^31 (a division by 10 becomes a multiply); floats above.
  while (v > 0x7fffffff) {
    buf[--p] = 48 + (v % 10);
    v = Math.floor(v / 10);
  }
  let i = v | 0;
  do {
    const q = (i / 10) | 0;
    buf[--p] = 48 + i - q * 10;
    i = q;
  } while (i > 0);
  return end;
}
