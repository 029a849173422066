import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { MIN_TTR_MS } from '../../../shared/limits.js';
import type { Engine, Job, PutRequest, Session, SessionDelegate } from '../../engine/engine.js';
import type { KickKind } from '../../engine/engine.js';
import type { Durability } from '../../engine/journal.js';
import type { ReserveOutcome } from '../../engine/results.js';
import type { Tube } from '../../engine/tube.js';
import { parseCommand, type Command } from './commands.js';
import { CommandParser, type FrameHandler } from './parser.js';
import { CRLF, REPLY, WORD, failureReply } from './replies.js';
import { ReplyBuffer } from './reply-buffer.js';
import { formatJobStats, formatServerStats, formatTubeList, formatTubeStats, type ServerInfo } from './yaml.js';

export interface ConnectionContext {
  engine: Engine;
  info: ServerInfo;
  log: Logger;
  /** Called after anything that may have changed the engine's next deadline. */
  onActivity: () => void;
  /** Replies wait until the records made before them are durable. */
  durability: Durability;
}

/** Jobs moved per slice of a large kick or of a departing client's reservations. */
const KICK_SLICE = 1024;
const RELEASE_SLICE = 1024;
/** Stop reading from a client whose unparsed input or unsent replies grow beyond this. */
const MAX_BUFFERED_INPUT = 4 * 1024 * 1024;
const MAX_BUFFERED_OUTPUT = 8 * 1024 * 1024;
const NO_BODY = Buffer.alloc(0);

/**
 * One beanstalkd protocol client: socket bytes go through the push parser, each command becomes
 * one engine call, and replies are written in command order. Like beanstalkd, it stops reading
 * commands while it is blocked in reserve or working through a large kick.
 */
export class BeanstalkConnection implements FrameHandler, SessionDelegate {
  readonly session: Session;
  private readonly parser: CommandParser;
  private readonly engine: Engine;
  /** The put whose body is being read; reused, as the engine copies what it keeps. */
  private readonly pendingPut: PutRequest;
  private replyAfterSkip: Buffer = REPLY.JOB_TOO_BIG;
  private inputEnded = false;
  private finished = false;
  /** Replies not yet written to the socket (some may wait for the binlog). */
  private readonly out: ReplyBuffer;
  /** True while this connection's own input is being handled: replies are flushed at its end. */
  private handling = false;
  private flushQueued = false;
  /** The parser was paused because too many replies wait to be sent. */
  private pausedForOutput = false;
  private endWhenFlushed = false;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: ConnectionContext,
  ) {
    this.engine = ctx.engine;
    this.session = this.engine.openSession(this);
    this.session.peer = socket.remoteAddress === undefined ? 'unix' : `${socket.remoteAddress}:${socket.remotePort}`;
    this.parser = new CommandParser(this);
    this.pendingPut = { tube: this.session.used, priority: 0, delayMs: 0, ttrMs: 0, body: NO_BODY, bodyOwned: false, id: 0 };
    this.out = new ReplyBuffer((bytes) => this.writeOut(bytes), ctx.durability);
    socket.on('data', (chunk: Buffer) => this.guard(() => this.parser.write(chunk)));
    socket.on('end', () => this.onEnd());
    socket.on('drain', () => this.onDrain());
    socket.on('error', (err) => ctx.log.debug({ err: err.message }, 'client socket error'));
    socket.on('close', () => this.onClose());
  }

  /** Server shutdown: close without waiting for the client. */
  destroy(): void {
    this.socket.destroy();
  }

  // ---- FrameHandler --------------------------------------------------------------------------

  line(buf: Buffer, start: number, end: number): void {
    this.dispatch(parseCommand(buf, start, end));
  }

  overlong(): void {
    this.send(REPLY.BAD_FORMAT);
  }

  body(body: Buffer, owned: boolean): void {
    const n = body.length - 2;
    if (body[n] !== 13 || body[n + 1] !== 10) {
      this.send(REPLY.EXPECTED_CRLF);
      return;
    }
    // The engine copies a view of the socket chunk into its store; a body the parser assembled
    // is this job's alone, so a large one is handed over rather than copied.
    const put = this.pendingPut;
    put.tube = this.session.used;
    put.body = body.subarray(0, n);
    put.bodyOwned = owned;
    const result = this.engine.put(put);
    put.body = NO_BODY; // do not pin the socket chunk
    if (result.ok) this.sendWordNumber(WORD.INSERTED, put.id!);
    else this.send(failureReply(result.code));
  }

  skipped(): void {
    this.send(this.replyAfterSkip);
  }

  // ---- SessionDelegate (a blocked reserve ends) ----------------------------------------------

  reserved(job: Job): void {
    this.sendJob(WORD.RESERVED, job);
    this.resumeSoon();
  }

  timedOut(): void {
    this.send(REPLY.TIMED_OUT);
    this.resumeSoon();
  }

  deadlineSoon(): void {
    this.send(REPLY.DEADLINE_SOON);
    this.resumeSoon();
  }

  // ---- commands ------------------------------------------------------------------------------

  private dispatch(cmd: Command): void {
    const engine = this.engine;
    const session = this.session;
    switch (cmd.op) {
      case 'put':
        engine.count('put');
        return this.startPut(cmd.pri, cmd.delay, cmd.ttr, cmd.bytes, cmd.trailingGarbage);
      case 'peek':
        engine.count('peek');
        return this.sendFound(engine.job(cmd.id));
      case 'peek-ready':
        engine.count('peek-ready');
        return this.sendFound(engine.peekReady(session.used));
      case 'peek-delayed':
        engine.count('peek-delayed');
        return this.sendFound(engine.peekDelayed(session.used));
      case 'peek-buried':
        engine.count('peek-buried');
        return this.sendFound(engine.peekBuried(session.used));
      case 'reserve':
        engine.count('reserve');
        return this.reserveOutcome(engine.reserve(session, null));
      case 'reserve-with-timeout':
        engine.count('reserve-with-timeout');
        // protocol (1.12): a negative timeout waits forever, like reserve.
        return this.reserveOutcome(engine.reserve(session, cmd.timeout < 0 ? null : cmd.timeout * 1000));
      case 'reserve-job': {
        engine.count('reserve-job');
        const r = engine.reserveJob(session, cmd.id);
        return r.ok ? this.sendJob(WORD.RESERVED, r.value) : this.send(failureReply(r.code));
      }
      case 'delete':
        engine.count('delete');
        return this.sendResult(engine.delete(session, cmd.id), REPLY.DELETED);
      case 'release':
        engine.count('release');
        return this.sendResult(engine.release(session, cmd.id, cmd.pri, cmd.delay * 1000), REPLY.RELEASED);
      case 'bury':
        engine.count('bury');
        return this.sendResult(engine.bury(session, cmd.id, cmd.pri), REPLY.BURIED);
      case 'touch':
        engine.count('touch');
        return this.sendResult(engine.touch(session, cmd.id), REPLY.TOUCHED);
      case 'kick':
        engine.count('kick');
        return this.kick(session.used, engine.kickKind(session.used), cmd.bound, 0);
      case 'kick-job':
        engine.count('kick-job');
        return this.sendResult(engine.kickJob(cmd.id), REPLY.KICKED);
      case 'stats':
        engine.count('stats');
        return this.sendYaml(formatServerStats(engine, this.ctx.info, engine.now()));
      case 'stats-job': {
        engine.count('stats-job');
        const job = engine.job(cmd.id);
        return job ? this.sendYaml(formatJobStats(job, engine.now())) : this.send(REPLY.NOT_FOUND);
      }
      case 'stats-tube': {
        engine.count('stats-tube');
        const tube = engine.tube(cmd.tube);
        return tube ? this.sendYaml(formatTubeStats(tube, engine.now())) : this.send(REPLY.NOT_FOUND);
      }
      case 'list-tubes':
        engine.count('list-tubes');
        return this.sendYaml(formatTubeList(engine.tubes()));
      case 'list-tube-used':
        engine.count('list-tube-used');
        return this.sendWordText(WORD.USING, session.used.name);
      case 'list-tubes-watched':
        engine.count('list-tubes-watched');
        return this.sendYaml(formatTubeList(session.watched.values()));
      case 'use': {
        engine.count('use');
        const r = engine.use(session, cmd.tube);
        return r.ok ? this.sendWordText(WORD.USING, r.value.name) : this.send(failureReply(r.code));
      }
      case 'watch': {
        engine.count('watch');
        const r = engine.watch(session, cmd.tube);
        return r.ok ? this.sendWordNumber(WORD.WATCHING, r.value) : this.send(failureReply(r.code));
      }
      case 'ignore': {
        engine.count('ignore');
        const r = engine.ignore(session, cmd.tube);
        return r.ok ? this.sendWordNumber(WORD.WATCHING, r.value) : this.send(failureReply(r.code));
      }
      case 'pause-tube':
        engine.count('pause-tube');
        return this.sendResult(engine.pauseTube(cmd.tube, cmd.delay * 1000), REPLY.PAUSED);
      case 'quit':
        this.parser.pause();
        return this.finish();
      case 'bad-format':
        if (cmd.countPauseTube) engine.count('pause-tube');
        return this.send(REPLY.BAD_FORMAT);
      case 'unknown':
        return this.send(REPLY.UNKNOWN_COMMAND);
    }
  }

  private startPut(pri: number, delaySec: number, ttrSec: number, bytes: number, trailingGarbage: boolean): void {
    // protocol: JOB_TOO_BIG is decided before the trailing-garbage check, and sent after the body is read.
    if (bytes > this.ctx.info.maxJobSize) return this.skipBody(bytes + 2, REPLY.JOB_TOO_BIG);
    if (trailingGarbage) return this.send(REPLY.BAD_FORMAT);
    this.engine.markProducer(this.session);
    // Beyond beanstalkd: the memory budget is checked before any of the body is buffered.
    if (!this.engine.hasRoomFor(bytes)) return this.skipBody(bytes + 2, REPLY.OUT_OF_MEMORY);
    const put = this.pendingPut;
    put.id = this.engine.allocateJobId();
    put.priority = pri;
    put.delayMs = delaySec * 1000;
    // protocol: a TTR below one second is raised to one second.
    put.ttrMs = Math.max(ttrSec * 1000, MIN_TTR_MS);
    this.parser.expectBody(bytes + 2);
  }

  private skipBody(length: number, reply: Buffer): void {
    this.replyAfterSkip = reply;
    this.parser.skip(length);
  }

  private reserveOutcome(outcome: ReserveOutcome): void {
    switch (outcome.kind) {
      case 'reserved':
        return this.sendJob(WORD.RESERVED, outcome.job);
      case 'deadline-soon':
        return this.send(REPLY.DEADLINE_SOON);
      case 'timed-out':
        return this.send(REPLY.TIMED_OUT);
      case 'waiting':
        // protocol: a client blocked in reserve is not read from until the reserve ends.
        this.parser.pause();
        return;
    }
  }

  /** Kicks in slices so that a kick of millions of jobs never stalls other clients. */
  private kick(tube: Tube, kind: KickKind, bound: number, done: number): void {
    const want = Math.min(KICK_SLICE, bound - done);
    const moved = this.engine.kickSome(tube, kind, want);
    const total = done + moved;
    if (moved < want || total >= bound) {
      this.sendWordNumber(WORD.KICKED, total);
      if (this.parser.paused) this.resumeSoon();
      return;
    }
    this.parser.pause();
    setImmediate(() => {
      if (!this.finished) this.guard(() => this.kick(tube, kind, bound, total));
    });
  }

  // ---- output --------------------------------------------------------------------------------

  private send(data: Buffer): void {
    if (this.finished) return;
    this.out.bytes(data);
    this.flushSoon();
  }

  private sendWordNumber(word: Buffer, n: number): void {
    if (this.finished) return;
    this.out.wordNumber(word, n);
    this.flushSoon();
  }

  private sendWordText(word: Buffer, text: string): void {
    if (this.finished) return;
    this.out.wordText(word, text);
    this.flushSoon();
  }

  private sendJob(word: Buffer, job: Job): void {
    if (this.finished) return;
    this.out.job(word, job.id, job);
    this.flushSoon();
  }

  /**
   * Replies made while this connection's input is handled leave together when that ends; one
   * made for another reason (a job for a blocked reserve, a timeout) leaves at the end of the tick.
   */
  private flushSoon(): void {
    // Replies are copies: a pipeline of big peeks must not build up more than the output limit
    // before flow control looks, so command parsing stops here until the socket drains.
    if (!this.pausedForOutput && this.out.pending + this.socket.writableLength > MAX_BUFFERED_OUTPUT) {
      this.pausedForOutput = true;
      this.parser.pause();
    }
    if (this.handling || this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(() => {
      this.flushQueued = false;
      this.out.flush();
      this.updateFlow();
    });
  }

  private writeOut(bytes: Buffer): void {
    if (this.socket.destroyed) return;
    this.socket.write(bytes);
    if (this.endWhenFlushed && this.out.pending === 0) this.socket.end();
  }

  private sendFound(job: Job | undefined): void {
    if (job === undefined) this.send(REPLY.NOT_FOUND);
    else this.sendJob(WORD.FOUND, job);
  }

  private sendResult(result: { ok: true } | { ok: false; code: Parameters<typeof failureReply>[0] }, success: Buffer): void {
    this.send(result.ok ? success : failureReply(result.code));
  }

  private sendYaml(yaml: string): void {
    if (this.finished) return;
    const body = Buffer.from(yaml, 'latin1');
    this.out.wordNumber(WORD.OK, body.length);
    this.out.bytes(body);
    this.out.bytes(CRLF);
    this.flushSoon();
  }

  // ---- flow and lifecycle --------------------------------------------------------------------

  /** Continues parsing on a later tick: never re-enter the parser from inside an engine call. */
  private resumeSoon(): void {
    // Whatever paused the parser, it resumes now (a later reply pauses it again if need be).
    this.pausedForOutput = false;
    process.nextTick(() => {
      if (!this.finished) this.guard(() => this.parser.resume());
    });
  }

  /** Runs parser work; afterwards wakes the scheduler, applies flow control and ends a half-closed client. */
  private guard(work: () => void): void {
    this.handling = true;
    try {
      work();
    } catch (err) {
      this.ctx.log.error({ err }, 'internal error while serving a client; closing that connection');
      this.send(REPLY.INTERNAL_ERROR);
      this.finish();
      return;
    } finally {
      this.handling = false;
      this.out.flush();
    }
    this.ctx.onActivity();
    this.updateFlow();
    if (this.inputEnded && !this.parser.paused) this.finish();
  }

  private onDrain(): void {
    if (this.pausedForOutput && this.out.pending + this.socket.writableLength <= MAX_BUFFERED_OUTPUT) this.resumeSoon();
    this.updateFlow();
  }

  private updateFlow(): void {
    if (this.finished) return;
    const tooMuch =
      this.parser.buffered > MAX_BUFFERED_INPUT || this.socket.writableLength + this.out.pending > MAX_BUFFERED_OUTPUT;
    if (tooMuch && !this.socket.isPaused()) this.socket.pause();
    else if (!tooMuch && this.socket.isPaused()) this.socket.resume();
  }

  private onEnd(): void {
    this.inputEnded = true;
    // protocol: a client that half-closes while blocked in reserve gets TIMED_OUT.
    this.engine.halfClose(this.session);
    this.guard(() => undefined);
  }

  /** Closes our side once pending replies are written; reserved jobs go back to ready. */
  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.endSession();
    // Replies still waiting for the binlog go out first.
    if (this.out.pending > 0) this.endWhenFlushed = true;
    else this.socket.end();
  }

  private onClose(): void {
    if (this.finished) return;
    this.finished = true;
    this.endSession();
  }

  /** Returns the client's reserved jobs to ready in slices, then lets go of its tubes. */
  private endSession(): void {
    const done = this.engine.closeSession(this.session, RELEASE_SLICE);
    this.ctx.onActivity();
    if (!done) setImmediate(() => this.endSession());
  }
}
