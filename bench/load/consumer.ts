import type { LoadConnection, RoleHandler, SetupStep } from './connection.js';
import type { RoleContext } from './context.js';
import type { ConsumerSpec } from './plan.js';
import {
  InvalidReplyError,
  RESERVED_ID_OFFSET,
  STAMP_DIGITS,
  commandLine,
  lineEquals,
  nowUs,
  readStamp,
  replyLine,
  reservedIdEnd,
  showReply,
  tubeName,
} from './wire.js';

const EXPECT_RESERVE = 1;
const EXPECT_DELETE = 2;
/** Replies in flight are at most a few times `depth`; the ring is far larger and checked. */
const RING_SIZE = 1 << 16;
const RING_MASK = RING_SIZE - 1;

const DELETE_PREFIX = Buffer.from('delete ', 'latin1');
const CRLF = Buffer.from('\r\n', 'latin1');
const DELETED = replyLine('DELETED');
const TIMED_OUT = replyLine('TIMED_OUT');
/** `delete <id>\r\n` plus a reserve command, with room for a 20-digit id. */
const MAX_PER_JOB = DELETE_PREFIX.length + 20 + CRLF.length + 'reserve-with-timeout 0\r\n'.length;

/**
 * Keeps `depth` reserves in flight; for each `RESERVED <id> <bytes>` it checks the body size and
 * its CRLF, then sends `delete <id>` (the id's bytes copied straight from the reply) and a new
 * reserve in the same write, and checks that the delete gets exactly `DELETED`. Like producers,
 * it writes once a quarter of its reserves have come back, not after every reply.
 */
export class Consumer implements RoleHandler {
  /** What each reply in flight answers, in send order. */
  private readonly expect = new Uint8Array(RING_SIZE);
  private head = 0;
  private tail = 0;
  private readonly reserveCmd: Buffer;
  private out: Buffer | null = null;
  private outLen = 0;
  private deletedInChunk = 0;
  private reservedInChunk = 0;
  private chunkNowUs = -1;
  /** Reserves written and not yet answered, and reserves queued in `out` but not yet written. */
  private reservesInFlight = 0;
  private reservesQueued = 0;
  /** Write once this many reserves have come back (a quarter of the depth). */
  private readonly batch: number;
  private started = false;

  constructor(
    private readonly conn: LoadConnection,
    private readonly ctx: RoleContext,
    private readonly spec: ConsumerSpec,
  ) {
    this.reserveCmd = commandLine(spec.drain ? 'reserve-with-timeout 0' : 'reserve');
    this.batch = Math.max(1, spec.depth >> 2);
  }

  /** Watch every tube, then ignore default; each watch must answer the running count. */
  static setup(spec: ConsumerSpec): SetupStep {
    const commands: Buffer[] = [];
    const replies: Buffer[] = [];
    for (let i = 0; i < spec.tubes; i++) {
      commands.push(commandLine(`watch ${tubeName(i, spec.tubes)}`));
      replies.push(replyLine(`WATCHING ${i + 2}`));
    }
    commands.push(commandLine('ignore default'));
    replies.push(replyLine(`WATCHING ${spec.tubes}`));
    return { commands, replies };
  }

  start(): void {
    this.started = true;
    this.ensureOut(this.spec.depth);
    for (let i = 0; i < this.spec.depth; i++) this.queueReserve();
    this.flush();
  }

  onReply(buf: Buffer, lineStart: number, lineEnd: number, bodyStart: number, bodyEnd: number): void {
    if (this.head === this.tail) throw new InvalidReplyError(`unsolicited reply ${showReply(buf, lineStart, lineEnd)}`);
    const kind = this.expect[this.head++ & RING_MASK];
    if (kind === EXPECT_DELETE) {
      if (!lineEquals(buf, lineStart, lineEnd, DELETED)) throw new InvalidReplyError(`delete: got ${showReply(buf, lineStart, lineEnd)}, expected DELETED`);
      this.deletedInChunk++;
      return;
    }
    this.reservesInFlight--;
    if (bodyStart < 0) {
      // Drain mode: the tube is empty for good (nothing puts any more), so this reserve is not replaced.
      if (this.spec.drain && lineEquals(buf, lineStart, lineEnd, TIMED_OUT)) return;
      throw new InvalidReplyError(`reserve: got ${showReply(buf, lineStart, lineEnd)}, expected RESERVED <id> ${this.spec.bodySize}`);
    }
    if (bodyEnd - bodyStart !== this.spec.bodySize) {
      throw new InvalidReplyError(`reserve: got a ${bodyEnd - bodyStart}-byte body, expected ${this.spec.bodySize}: ${showReply(buf, lineStart, lineEnd)}`);
    }
    this.reservedInChunk++;
    if (this.spec.stamped && this.ctx.measuring()) {
      const sentUs = readStamp(buf, bodyStart);
      if (sentUs < 0) throw new InvalidReplyError(`reserve: body does not start with ${STAMP_DIGITS} digits (not a job this run put)`);
      // Jobs put before the window count too: they were waiting, which is what is measured.
      if (this.chunkNowUs < 0) this.chunkNowUs = nowUs();
      this.ctx.sample('cycle', (this.chunkNowUs - sentUs) * 1000);
    }
    this.ensureOut(1);
    const out = this.out!;
    this.outLen += DELETE_PREFIX.copy(out, this.outLen);
    this.outLen += buf.copy(out, this.outLen, lineStart + RESERVED_ID_OFFSET, reservedIdEnd(buf, lineStart));
    this.outLen += CRLF.copy(out, this.outLen);
    this.push(EXPECT_DELETE);
    if (!this.ctx.stopping()) this.queueReserve();
  }

  afterChunk(): void {
    this.chunkNowUs = -1;
    if (this.reservedInChunk > 0) {
      this.ctx.state.addWaiting(-this.reservedInChunk);
      this.reservedInChunk = 0;
    }
    if (this.deletedInChunk > 0) {
      this.ctx.state.add(this.ctx.worker, 'deleted', this.deletedInChunk);
      this.ctx.state.addInSystem(-this.deletedInChunk);
      this.deletedInChunk = 0;
      this.ctx.resume();
    }
    // Each reserve that came back has queued its delete and successor: send them once enough
    // have (in drain mode TIMED_OUT lowers the count too, so the last deletes always go out).
    if (this.started && this.spec.depth - this.reservesInFlight >= this.batch) this.flush();
  }

  private queueReserve(): void {
    this.outLen += this.reserveCmd.copy(this.out!, this.outLen);
    this.reservesQueued++;
    this.push(EXPECT_RESERVE);
  }

  private push(kind: number): void {
    if (this.tail - this.head >= RING_SIZE) throw new Error('consumer: more replies in flight than the ring holds');
    this.expect[this.tail++ & RING_MASK] = kind;
  }

  /** Makes room for `jobs` more delete+reserve pairs in the pending write. */
  private ensureOut(jobs: number): void {
    const need = jobs * MAX_PER_JOB;
    if (this.out !== null && this.out.length - this.outLen >= need) return;
    // At most `depth` jobs arrive per chunk, so one allocation per chunk is the common case.
    const next = Buffer.allocUnsafe(Math.max(need + this.outLen, this.spec.depth * MAX_PER_JOB));
    if (this.out !== null) this.out.copy(next, 0, 0, this.outLen);
    this.out = next;
  }

  private flush(): void {
    if (this.out === null || this.outLen === 0) return;
    this.reservesInFlight += this.reservesQueued;
    this.reservesQueued = 0;
    this.conn.write(this.out.subarray(0, this.outLen));
    this.out = null;
    this.outLen = 0;
  }
}
