import type { LoadConnection, RoleHandler, SetupStep } from './connection.js';
import type { RoleContext } from './context.js';
import type { LatencySpec } from './plan.js';
import {
  InvalidReplyError,
  RESERVED_ID_OFFSET,
  commandLine,
  isInserted,
  lineEquals,
  putCommand,
  replyLine,
  reservedIdEnd,
  showReply,
  tubeName,
} from './wire.js';

const DELETE_PREFIX = Buffer.from('delete ', 'latin1');
const CRLF = Buffer.from('\r\n', 'latin1');
const DELETED = replyLine('DELETED');
const RESERVE = commandLine('reserve');

type Step = 'put' | 'reserve' | 'delete';

/**
 * One connection, no pipelining: put, reserve, delete, each sent when the previous reply has
 * arrived; every command's round trip is a sample and each completed triple counts once.
 */
export class LatencyRole implements RoleHandler {
  private readonly put: Buffer;
  private step: Step = 'put';
  private sentAt = 0n;

  constructor(
    private readonly conn: LoadConnection,
    private readonly ctx: RoleContext,
    private readonly spec: LatencySpec,
  ) {
    this.put = putCommand(spec.bodySize).bytes;
  }

  /** Its own tube, so every reserve gets the job this connection just put. */
  static setup(): SetupStep {
    const tube = tubeName(0, 1);
    return {
      commands: [commandLine(`use ${tube}`), commandLine(`watch ${tube}`), commandLine('ignore default')],
      replies: [replyLine(`USING ${tube}`), replyLine('WATCHING 2'), replyLine('WATCHING 1')],
    };
  }

  start(): void {
    this.send('put', this.put);
  }

  onReply(buf: Buffer, lineStart: number, lineEnd: number, bodyStart: number, bodyEnd: number): void {
    const ns = Number(process.hrtime.bigint() - this.sentAt);
    const measuring = this.ctx.measuring();
    if (measuring) this.ctx.sample(this.step, ns);
    const stop = this.ctx.stopping();
    switch (this.step) {
      case 'put':
        if (!isInserted(buf, lineStart, lineEnd)) throw new InvalidReplyError(`put: got ${showReply(buf, lineStart, lineEnd)}, expected INSERTED <id>`);
        if (!stop) this.send('reserve', RESERVE);
        return;
      case 'reserve': {
        if (bodyStart < 0 || bodyEnd - bodyStart !== this.spec.bodySize) {
          throw new InvalidReplyError(`reserve: got ${showReply(buf, lineStart, lineEnd)}, expected RESERVED <id> ${this.spec.bodySize}`);
        }
        const id = buf.subarray(lineStart + RESERVED_ID_OFFSET, reservedIdEnd(buf, lineStart));
        if (!stop) this.send('delete', Buffer.concat([DELETE_PREFIX, id, CRLF]));
        return;
      }
      case 'delete':
        if (!lineEquals(buf, lineStart, lineEnd, DELETED)) throw new InvalidReplyError(`delete: got ${showReply(buf, lineStart, lineEnd)}, expected DELETED`);
        this.ctx.state.add(this.ctx.worker, 'triples', 1);
        if (!stop) this.send('put', this.put);
        return;
    }
  }

  afterChunk(): void {
    // Every reply already sent its successor: nothing is batched on one unpipelined connection.
  }

  private send(step: Step, bytes: Buffer): void {
    this.step = step;
    this.sentAt = process.hrtime.bigint();
    this.conn.write(bytes);
  }
}
