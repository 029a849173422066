/**
 * A model of how beanstalkd 1.12 frames one connection's input, written from its prot.c
 * (`scan_line_end`, `conn_process_io`, `fill_extra_data`, `_skip`, `dispatch_cmd`). Given the
 * bytes a test sends, it says how many replies beanstalkd will send, whether it closes the
 * connection, and whether the input would make the transcript nondeterministic (a blocking
 * reserve, a positive reserve timeout, a delay or TTR short enough to run out during a test run,
 * a peek at a job whose body is still arriving).
 *
 * It knows nothing about jobs or tubes: apart from `quit` and `put`, every command line gets
 * exactly one reply, and no reply ever arrives later on its own as long as nothing can block.
 *
 * Framing facts it relies on (all in the reference notes, section 1.1):
 * - The command buffer holds at most 224 bytes. A line ends at the first `\r` among the buffered
 *   bytes except the last one, and only if `\n` follows it. If that first `\r` is followed by
 *   anything else, nothing ends a line until the buffer is full.
 * - A full buffer without a line end is thrown away; the server keeps throwing away 224-byte
 *   windows until one holds a line end, answers BAD_FORMAT and parses what follows.
 * - A put header that parses reads exactly `bytes + 2` bytes of body (or throws them away for
 *   JOB_TOO_BIG) and answers once they are all there, whatever they are.
 */

/** Bytes in beanstalkd's command line buffer (`LINE_BUF_SIZE`). */
export const LINE_WINDOW = 224;
/** beanstalkd's default `-z`. */
export const DEFAULT_MAX_JOB_SIZE = 65535;
/** Delays, pauses and TTRs shorter than this many seconds could run out during a test run. */
export const SAFE_SECONDS = 1000;

const CR = 13;
const LF = 10;
const U32_MAX = 4294967295n;

/** What beanstalkd does with one chunk of input on one connection. */
export interface Forecast {
  /** Replies it sends because of these bytes (a reply to an earlier put body counts here too). */
  replies: number;
  /** True if these bytes make it close the connection (`quit`). */
  closes: boolean;
  /** True if the connection was already closed, so the server never reads these bytes. */
  ignored: boolean;
  /** Job ids these bytes used up (put headers that parsed). */
  newIds: number;
  /** Why these bytes would make the transcript nondeterministic, or null if they do not. */
  hazard: string | null;
  /** Deterministic reference quirks these bytes touch (see QUIRKS); a fuzzer may steer clear. */
  quirks: Quirk[];
}

/**
 * Named corners of beanstalkd's behaviour that a generator can be told to avoid once a
 * difference there is known, so that a long run finds other differences.
 */
export const QUIRKS = {
  /**
   * beanstalkd 1.12 allocates a job, and puts it in its job table, as soon as a put header
   * parses; until the body is complete, `stats-job <id>` answers with `state: invalid`.
   */
  'stats-job-in-flight': 'stats-job of a job whose put body is still arriving',
} as const;
export type Quirk = keyof typeof QUIRKS;

/** What every connection of one server shares. */
export interface ServerFrames {
  /** Put headers accepted so far (each one used up a job id, even if its body later failed). */
  allocated: number;
  /** Ids of jobs whose put body is still arriving. */
  inFlight: Set<number>;
}

export function newServerFrames(): ServerFrames {
  return { allocated: 0, inFlight: new Set() };
}

export function copyServerFrames(s: ServerFrames): ServerFrames {
  return { allocated: s.allocated, inFlight: new Set(s.inFlight) };
}

type Mode = 'line' | 'discard' | 'body' | 'skip' | 'closed';

/** One connection's framing state. Deterministic: the same bytes give the same forecasts. */
export class FramingModel {
  private mode: Mode = 'line';
  /** Bytes received and not consumed yet (line and discard modes). */
  private pending: Buffer = Buffer.alloc(0);
  /** Body or skip bytes still to come. */
  private left = 0;
  /** The id of the job whose body is being read. */
  private bodyId = 0;

  constructor(
    private readonly server: ServerFrames,
    private readonly maxJobSize = DEFAULT_MAX_JOB_SIZE,
  ) {}

  /** A copy attached to `server` (pass a copy to explore without side effects). */
  clone(server: ServerFrames = this.server): FramingModel {
    const m = new FramingModel(server, this.maxJobSize);
    m.mode = this.mode;
    m.pending = this.pending;
    m.left = this.left;
    m.bodyId = this.bodyId;
    return m;
  }

  /** True once the server has closed this connection. */
  get closed(): boolean {
    return this.mode === 'closed';
  }

  /** True when a put body (or a JOB_TOO_BIG skip) is being read. */
  get inBody(): boolean {
    return this.mode === 'body' || this.mode === 'skip';
  }

  /** Bytes the server holds that do not form a complete line yet. */
  get partialLine(): number {
    return this.mode === 'line' ? this.pending.length : 0;
  }

  feed(bytes: Buffer): Forecast {
    const out: Forecast = { replies: 0, closes: false, ignored: this.closed, newIds: 0, hazard: null, quirks: [] };
    if (out.ignored) return out;
    this.pending = this.pending.length === 0 ? Buffer.from(bytes) : Buffer.concat([this.pending, bytes]);
    for (;;) {
      if (this.closed) {
        this.pending = Buffer.alloc(0);
        return out;
      }
      if (this.mode === 'body' || this.mode === 'skip') {
        const n = Math.min(this.left, this.pending.length);
        this.left -= n;
        this.pending = this.pending.subarray(n);
        if (this.left > 0) return out;
        // INSERTED or EXPECTED_CRLF (body), JOB_TOO_BIG (skip): one reply either way.
        out.replies++;
        if (this.mode === 'body') this.server.inFlight.delete(this.bodyId);
        this.mode = 'line';
        continue;
      }
      const end = this.lineEnd();
      if (end === 'wait') return out;
      if (end === 'overflow') {
        this.pending = this.pending.subarray(LINE_WINDOW);
        this.mode = 'discard';
        continue;
      }
      const line = this.pending.subarray(0, end);
      this.pending = this.pending.subarray(end + 2);
      if (this.mode === 'discard') {
        out.replies++; // BAD_FORMAT for the whole overlong line
        this.mode = 'line';
        continue;
      }
      this.dispatch(line, out);
    }
  }

  /** Index of the CR that ends the buffered line, or what the server does while it has none. */
  private lineEnd(): number | 'wait' | 'overflow' {
    const buffered = Math.min(this.pending.length, LINE_WINDOW);
    // protocol: scan_line_end looks at all buffered bytes but the last, for the first CR only.
    const cr = buffered >= 2 ? this.pending.subarray(0, buffered - 1).indexOf(CR) : -1;
    if (cr >= 0 && this.pending[cr + 1] === LF) return cr;
    return this.pending.length >= LINE_WINDOW ? 'overflow' : 'wait';
  }

  private dispatch(line: Buffer, out: Forecast): void {
    // protocol: a NUL anywhere in the line is BAD_FORMAT before the command is even identified.
    if (line.includes(0)) {
      out.replies++;
      return;
    }
    const s = line.toString('latin1');
    if (s.startsWith('put ')) return this.put(s, out);
    // protocol: `quit` is matched as a prefix; no earlier prefix in which_cmd can also match.
    if (s.startsWith('quit')) {
      out.closes = true;
      this.mode = 'closed';
      return;
    }
    out.replies++;
    out.hazard ??= lineHazard(s);
    const peeked = jobIdArgument(s, 'peek ');
    if (peeked !== null && this.server.inFlight.has(peeked)) {
      // The reference copies the half-filled body buffer: the rest is uninitialised memory.
      out.hazard ??= `peek ${peeked} while its body is still arriving`;
    }
    const stated = jobIdArgument(s, 'stats-job ');
    if (stated !== null && this.server.inFlight.has(stated)) out.quirks.push('stats-job-in-flight');
  }

  private put(s: string, out: Forecast): void {
    const pri = readU32(s, 4);
    const delay = pri && readU32(s, pri.end);
    const ttr = delay && readU32(s, delay.end);
    const bytes = ttr && readU32(s, ttr.end);
    if (!bytes) {
      out.replies++; // BAD_FORMAT, and the body is then parsed as commands
      return;
    }
    if (bytes.value > this.maxJobSize) {
      this.mode = 'skip'; // JOB_TOO_BIG once bytes + 2 bytes have been thrown away
      this.left = bytes.value + 2;
      return;
    }
    if (bytes.end !== s.length) {
      out.replies++; // trailing garbage: BAD_FORMAT, no body consumed
      return;
    }
    this.bodyId = ++this.server.allocated;
    out.newIds++;
    this.server.inFlight.add(this.bodyId);
    this.mode = 'body';
    this.left = bytes.value + 2;
    if (delay.value > 0 && delay.value < SAFE_SECONDS) out.hazard ??= `put delay ${delay.value}`;
    if (ttr.value < SAFE_SECONDS) out.hazard ??= `put ttr ${ttr.value}`;
  }
}

/** beanstalkd's read_u32: skips spaces, needs a digit, rejects values above 2^32-1. */
export function readU32(s: string, from: number): { value: number; end: number } | null {
  let i = from;
  while (s.charCodeAt(i) === 32) i++;
  const start = i;
  while (i < s.length && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) i++;
  if (i === start) return null;
  const v = BigInt(s.slice(start, i));
  if (v > U32_MAX) return null;
  return { value: Number(v), end: i };
}

/** The job id of `<prefix><id>` as beanstalkd's read_u64 reads it (to the end of the line). */
function jobIdArgument(s: string, prefix: string): number | null {
  if (!s.startsWith(prefix)) return null;
  const m = /^ *(\d+)$/.exec(s.slice(prefix.length));
  if (m === null) return null;
  const v = BigInt(m[1]!);
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : null;
}

const NAME_RUN = /^ *[A-Za-z0-9\-+/;.$_()]+/;

/** Why a (non-put) command line would make the outcome depend on time, or null. */
export function lineHazard(s: string): string | null {
  if (s === 'reserve') return 'blocking reserve';
  if (s.startsWith('reserve-with-timeout ')) {
    // protocol (1.12): strtol, so whitespace and a sign are accepted and garbage after the digits
    // is ignored. Anything but a zero value waits (a negative one forever).
    const m = /^[ \t\n\v\f]*[+-]?(\d+)/.exec(s.slice('reserve-with-timeout '.length));
    if (m !== null && /[1-9]/.test(m[1]!)) return 'reserve-with-timeout with a non-zero timeout';
    return null;
  }
  if (s.startsWith('release ')) {
    // release <id> <pri> <delay>: the delay must end the line.
    const m = /^release +\d+ +\d+ +(\d+)$/.exec(s);
    if (m !== null && isShort(m[1]!)) return `release delay ${m[1]}`;
    return null;
  }
  if (s.startsWith('pause-tube')) {
    const name = NAME_RUN.exec(s.slice('pause-tube'.length));
    if (name === null) return null;
    const m = /^ *(\d+)$/.exec(s.slice('pause-tube'.length + name[0].length));
    if (m !== null && isShort(m[1]!)) return `pause-tube delay ${m[1]}`;
    return null;
  }
  return null;
}

function isShort(digits: string): boolean {
  const v = BigInt(digits);
  return v > 0n && v < BigInt(SAFE_SECONDS);
}
