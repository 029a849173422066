/**
 * Push parser for the beanstalkd wire format: `write(chunk)` in, command lines and job bodies
 * out, with no socket. It frames exactly as beanstalkd 1.12 does:
 *
 * - A line ends at the *first* `\r` of the current 224-byte window, and only if `\n` follows it
 *   inside the window. A window that fills with no line end is discarded; windows keep being
 *   discarded until one holds a line end, and that line is answered with BAD_FORMAT (`overlong`).
 * - After a `put` line the handler asks for the body (`expectBody`) or for it to be thrown away
 *   (`skip`); both count bytes exactly and never look for line ends.
 *
 * Lines are handed out as a range of a buffer, valid only during the callback (no view object per
 * line). A body is a view that points into the caller's chunk unless `owned` is true (then it was
 * assembled here).
 */
import { CR as CR_BYTE, LF as LF_BYTE, PushParser } from '../push-parser.js';

export const LINE_WINDOW = 224;

export interface FrameHandler {
  /** A command line without its CRLF: buf[start, end). */
  line(buf: Buffer, start: number, end: number): void;
  /** A line longer than the window was discarded up to its CRLF. */
  overlong(): void;
  /**
   * The body asked for with `expectBody`, including its final two bytes: buf[start, end), read in
   * place (no view made per body) and valid only during the call unless `owned` (a buffer
   * assembled for this body alone, which the handler may keep).
   */
  body(buf: Buffer, start: number, end: number, owned: boolean): void;
  /** The bytes asked to `skip` have all been discarded. */
  skipped(): void;
}

type Mode = 'line' | 'overlong' | 'body' | 'skip';

// This module's own constants: V8 folds those, but not an imported binding, and findLineEnd
// compares every byte of a line with CR.
const CR = CR_BYTE;
const LF = LF_BYTE;

export class CommandParser extends PushParser {
  private mode: Mode = 'line';
  /** Bytes of a line window that started in an earlier chunk. */
  private readonly window = Buffer.allocUnsafe(LINE_WINDOW);
  private windowLength = 0;
  private bodyLength = 0;
  private bodyBuffer: Buffer | null = null;
  private bodyFilled = 0;
  private skipLeft = 0;

  constructor(private readonly handler: FrameHandler) {
    super();
  }

  /**
   * Bytes received but not parsed yet: what flow control bounds. A body being assembled is not
   * counted: its buffer was allocated at the size the put line declared (which -z bounds), and
   * only more input can complete it, so throttling on it would wait forever.
   */
  get buffered(): number {
    return this.queuedBytes + this.windowLength;
  }

  /** True when no partial line, body or skip is in progress and nothing is queued. */
  get idle(): boolean {
    return this.mode === 'line' && this.windowLength === 0 && this.queuedBytes === 0;
  }

  /** Called from `line`: the next `length` bytes are a body. */
  expectBody(length: number): void {
    this.mode = 'body';
    this.bodyLength = length;
    this.bodyBuffer = null;
    this.bodyFilled = 0;
  }

  /** Called from `line`: discard the next `length` bytes, then report `skipped`. */
  skip(length: number): void {
    this.mode = 'skip';
    this.skipLeft = length;
  }

  protected step(chunk: Buffer, offset: number): number {
    switch (this.mode) {
      case 'line':
      case 'overlong':
        return this.windowLength === 0 ? this.scanChunk(chunk, offset) : this.scanWindow(chunk, offset);
      case 'body':
        return this.readBody(chunk, offset);
      case 'skip': {
        const n = Math.min(this.skipLeft, chunk.length - offset);
        this.skipLeft -= n;
        if (this.skipLeft === 0) this.finishSkip();
        return offset + n;
      }
    }
  }

  /** Fast path: the window starts inside this chunk, so lines are views of it. */
  private scanChunk(chunk: Buffer, offset: number): number {
    const available = chunk.length - offset;
    const size = Math.min(available, LINE_WINDOW);
    const lineLength = findLineEnd(chunk, offset, size);
    if (lineLength > 0) {
      this.emitLine(chunk, offset, offset + lineLength - 2);
      return offset + lineLength;
    }
    if (size === LINE_WINDOW) {
      this.mode = 'overlong';
      return offset + LINE_WINDOW;
    }
    chunk.copy(this.window, 0, offset);
    this.windowLength = available;
    return chunk.length;
  }

  /** Slow path: a window that began in an earlier chunk is continued with this one. */
  private scanWindow(chunk: Buffer, offset: number): number {
    const before = this.windowLength;
    const take = Math.min(LINE_WINDOW - before, chunk.length - offset);
    chunk.copy(this.window, before, offset, offset + take);
    this.windowLength = before + take;
    const lineLength = findLineEnd(this.window, 0, this.windowLength);
    if (lineLength > 0) {
      this.windowLength = 0;
      this.emitLine(this.window, 0, lineLength - 2);
      return offset + (lineLength - before);
    }
    if (this.windowLength === LINE_WINDOW) {
      this.windowLength = 0;
      this.mode = 'overlong';
    }
    return offset + take;
  }

  private emitLine(buf: Buffer, start: number, end: number): void {
    if (this.mode === 'overlong') {
      this.mode = 'line';
      this.handler.overlong();
    } else {
      this.handler.line(buf, start, end);
    }
  }

  private readBody(chunk: Buffer, offset: number): number {
    const available = chunk.length - offset;
    if (this.bodyBuffer === null) {
      if (available >= this.bodyLength) {
        const end = offset + this.bodyLength;
        this.mode = 'line';
        this.handler.body(chunk, offset, end, false);
        return end;
      }
      this.bodyBuffer = Buffer.allocUnsafe(this.bodyLength);
      this.bodyFilled = 0;
    }
    const n = Math.min(available, this.bodyLength - this.bodyFilled);
    chunk.copy(this.bodyBuffer, this.bodyFilled, offset, offset + n);
    this.bodyFilled += n;
    if (this.bodyFilled === this.bodyLength) {
      const body = this.bodyBuffer;
      this.bodyBuffer = null;
      this.bodyFilled = 0;
      this.mode = 'line';
      this.handler.body(body, 0, body.length, true);
    }
    return offset + n;
  }

  private finishSkip(): void {
    this.mode = 'line';
    this.handler.skipped();
  }
}

/**
 * Length of the line (CRLF included) that ends in buf[start..start+size), or 0. Like beanstalkd,
 * only the first `\r` counts, and only when the byte after it is `\n` and inside the window.
 */
function findLineEnd(buf: Buffer, start: number, size: number): number {
  // A plain loop: the window is short, and indexOf would scan past it on a long chunk.
  const last = start + size - 1;
  for (let i = start; i < last; i++) {
    if (buf[i] === CR) return buf[i + 1] === LF ? i - start + 2 : 0;
  }
  return 0;
}
