import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { MIN_TTR_MS } from '../../../shared/limits.js';
import type { Engine, Job, Session, SessionDelegate } from '../../engine/engine.js';
import type { KickKind } from '../../engine/engine.js';
import type { Durability } from '../../engine/journal.js';
import type { ReserveOutcome } from '../../engine/results.js';
import type { Tube } from '../../engine/tube.js';
import { parseCommand, type Command } from './commands.js';
import { CommandParser, type FrameHandler } from './parser.js';
import { CRLF, REPLY, failureReply, line } from './replies.js';
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

interface PendingPut {
  id: number;
  priority: number;
  delayMs: number;
  ttrMs: number;
}

/**
 * One beanstalkd protocol client: socket bytes go through the push parser, each command becomes
 * one engine call, and replies are written in command order. Like beanstalkd, it stops reading
 * commands while it is blocked in reserve or working through a large kick.
 */
export class BeanstalkConnection implements FrameHandler, SessionDelegate {
  readonly session: Session;
  private readonly parser: CommandParser;
  private readonly engine: Engine;
  private pendingPut: PendingPut | null = null;
  private replyAfterSkip: Buffer = REPLY.JOB_TOO_BIG;
  private inputEnded = false;
  private finished = false;
  private corked = false;
  /** Replies waiting for binlog records to become durable, with the record count each waits for. */
  private held: Buffer[] = [];
  private heldSeq: number[] = [];
  private heldBytes = 0;
  private endWhenReleased = false;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: ConnectionContext,
  ) {
    this.engine = ctx.engine;
    this.session = this.engine.openSession(this);
    this.session.peer = socket.remoteAddress === undefined ? 'unix' : `${socket.remoteAddress}:${socket.remotePort}`;
    this.parser = new CommandParser(this);
    socket.on('data', (chunk: Buffer) => this.guard(() => this.parser.write(chunk)));
    socket.on('end', () => this.onEnd());
    socket.on('drain', () => this.updateFlow());
    socket.on('error', (err) => ctx.log.debug({ err: err.message }, 'client socket error'));
    socket.on('close', () => this.onClose());
  }

  /** Server shutdown: close without waiting for the client. */
  destroy(): void {
    this.socket.destroy();
  }

  // ---- FrameHandler --------------------------------------------------------------------------

  line(raw: Buffer): void {
    this.dispatch(parseCommand(raw));
  }

  overlong(): void {
    this.send(REPLY.BAD_FORMAT);
  }

  body(body: Buffer, owned: boolean): void {
    const put = this.pendingPut!;
    this.pendingPut = null;
    const n = body.length - 2;
    if (body[n] !== 13 || body[n + 1] !== 10) {
      this.send(REPLY.EXPECTED_CRLF);
      return;
    }
    // A body that is a view of a socket chunk is copied once, so the job does not pin the chunk.
    const data = owned ? body.subarray(0, n) : Buffer.from(body.subarray(0, n));
    const result = this.engine.put({
      tube: this.session.used,
      priority: put.priority,
      delayMs: put.delayMs,
      ttrMs: put.ttrMs,
      body: data,
      id: put.id,
    });
    this.send(result.ok ? line(`INSERTED ${put.id}`) : failureReply(result.code));
  }

  skipped(): void {
    this.send(this.replyAfterSkip);
  }

  // ---- SessionDelegate (a blocked reserve ends) ----------------------------------------------

  reserved(job: Job): void {
    this.sendJob('RESERVED', job);
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
        return r.ok ? this.sendJob('RESERVED', r.value) : this.send(failureReply(r.code));
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
        return this.send(line(`USING ${session.used.name}`));
      case 'list-tubes-watched':
        engine.count('list-tubes-watched');
        return this.sendYaml(formatTubeList(session.watched.values()));
      case 'use':
        engine.count('use');
        return this.send(line(`USING ${engine.use(session, cmd.tube).name}`));
      case 'watch':
        engine.count('watch');
        return this.send(line(`WATCHING ${engine.watch(session, cmd.tube)}`));
      case 'ignore': {
        engine.count('ignore');
        const r = engine.ignore(session, cmd.tube);
        return this.send(r.ok ? line(`WATCHING ${r.value}`) : failureReply(r.code));
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
    this.pendingPut = {
      id: this.engine.allocateJobId(),
      priority: pri,
      delayMs: delaySec * 1000,
      // protocol: a TTR below one second is raised to one second.
      ttrMs: Math.max(ttrSec * 1000, MIN_TTR_MS),
    };
    this.parser.expectBody(bytes + 2);
  }

  private skipBody(length: number, reply: Buffer): void {
    this.replyAfterSkip = reply;
    this.parser.skip(length);
  }

  private reserveOutcome(outcome: ReserveOutcome): void {
    switch (outcome.kind) {
      case 'reserved':
        return this.sendJob('RESERVED', outcome.job);
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
      this.send(line(`KICKED ${total}`));
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
    // No reply may tell of a change that a crash could still lose, and replies keep their order.
    const durability = this.ctx.durability;
    const seq = durability.appendedSeq;
    if (this.held.length > 0 || seq > durability.durableSeq) {
      if (this.held.length === 0) durability.whenDurable(seq, this.releaseHeld);
      this.held.push(data);
      this.heldSeq.push(seq);
      this.heldBytes += data.length;
      return;
    }
    if (!this.corked) {
      // Replies made in one turn of the event loop leave in one write.
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
        this.updateFlow();
      });
    }
    this.socket.write(data);
  }

  /** Sends, in one write, every held reply whose records are now durable. */
  private readonly releaseHeld = (): void => {
    if (this.socket.destroyed) return;
    const durable = this.ctx.durability.durableSeq;
    let n = 0;
    this.socket.cork();
    while (n < this.held.length && this.heldSeq[n]! <= durable) {
      this.heldBytes -= this.held[n]!.length;
      this.socket.write(this.held[n++]!);
    }
    this.socket.uncork();
    this.held = this.held.slice(n);
    this.heldSeq = this.heldSeq.slice(n);
    if (this.held.length > 0) this.ctx.durability.whenDurable(this.heldSeq[0]!, this.releaseHeld);
    else if (this.endWhenReleased) this.socket.end();
    this.updateFlow();
  };

  private sendJob(word: 'RESERVED' | 'FOUND', job: Job): void {
    this.send(line(`${word} ${job.id} ${job.body.length}`));
    this.send(job.body);
    this.send(CRLF);
  }

  private sendFound(job: Job | undefined): void {
    if (job === undefined) this.send(REPLY.NOT_FOUND);
    else this.sendJob('FOUND', job);
  }

  private sendResult(result: { ok: true } | { ok: false; code: Parameters<typeof failureReply>[0] }, success: Buffer): void {
    this.send(result.ok ? success : failureReply(result.code));
  }

  private sendYaml(yaml: string): void {
    const body = Buffer.from(yaml, 'latin1');
    this.send(Buffer.concat([line(`OK ${body.length}`), body, CRLF]));
  }

  // ---- flow and lifecycle --------------------------------------------------------------------

  /** Continues parsing on a later tick: never re-enter the parser from inside an engine call. */
  private resumeSoon(): void {
    process.nextTick(() => {
      if (!this.finished) this.guard(() => this.parser.resume());
    });
  }

  /** Runs parser work; afterwards wakes the scheduler, applies flow control and ends a half-closed client. */
  private guard(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.ctx.log.error({ err }, 'internal error while serving a client; closing that connection');
      this.send(REPLY.INTERNAL_ERROR);
      this.finish();
      return;
    }
    this.ctx.onActivity();
    this.updateFlow();
    if (this.inputEnded && !this.parser.paused) this.finish();
  }

  private updateFlow(): void {
    if (this.finished) return;
    const tooMuch =
      this.parser.buffered > MAX_BUFFERED_INPUT || this.socket.writableLength + this.heldBytes > MAX_BUFFERED_OUTPUT;
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
    if (this.held.length > 0) this.endWhenReleased = true;
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
