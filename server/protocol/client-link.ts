import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { isPending, type Pending, type StoreActivity } from '../operations/operations.js';
import { peerIdentityOf } from '../tls/peer-identity.js';
import { ReplyBuffer } from './reply-buffer.js';
import { readThroughSharedBuffer } from './shared-read-buffer.js';

/** Stop reading from a client whose unparsed input or unsent replies grow beyond this. */
const MAX_BUFFERED_INPUT = 4 * 1024 * 1024;
const MAX_BUFFERED_OUTPUT = 8 * 1024 * 1024;

/** A door's push parser, as the link drives it. */
export interface LinkReader {
  /** `transient`: the chunk's memory is reused after the call (see PushParser.write). */
  write(chunk: Buffer, transient?: boolean): void;
  pause(): void;
  resume(): void;
  readonly paused: boolean;
  /** Input bytes it holds but has not handled. */
  readonly buffered: number;
}

/** What the door's connection does at the link's turning points. */
export interface LinkOwner {
  /** The peer half-closed: it will send nothing more. */
  halfClosed(): void;
  /**
   * The connection is over (either side): end the client's session. A store that answers later
   * (a database) returns a promise that settles once the session's jobs are given back.
   */
  ended(): void | Promise<void>;
}

/**
 * How long replies wait for a client's next input once its door asks them to (holdForInput): a
 * little over the 40 ms a delayed ACK takes, since a client with Nagle's algorithm on (most
 * Gearman libraries) sends its next request only once our ACK of the last one has come.
 */
const HOLD_FOR_INPUT_MS = 50;

/** Pipelined operations a connection may have awaited at once; then it stops reading. */
const MAX_PIPELINED = 64;

/** A pipelined answer (or a reply made after one), waiting for its turn. */
interface InOrder {
  done: boolean;
  value: unknown;
  reply: (value: unknown) => void;
}

/**
 * Logs failed store operations at most once a second for the whole process, with how many
 * there were since: a database outage fails every client's commands at once.
 */
class FailureLog {
  private loggedAt = 0;
  private since = 0;

  note(log: Logger, err: unknown): void {
    this.since++;
    const now = Date.now();
    if (now - this.loggedAt < 1000) return;
    log.warn({ err: (err as Error)?.message ?? String(err), failures: this.since }, "store operations failed; their commands were answered with the protocol's error");
    this.loggedAt = now;
    this.since = 0;
  }
}

const storeFailures = new FailureLog();

export interface LinkContext {
  log: Logger;
  /** Replies wait until the records made before them are durable; told after each batch of work. */
  ops: StoreActivity;
}

/**
 * What every front door's connection needs besides its protocol: socket bytes into the door's
 * parser, replies out in order (held until durable, one socket write per turn), flow control
 * both ways, operations that answer later kept in command order, a guard that closes only this
 * connection on an internal error, and a clean end.
 */
export class ClientLink {
  /** Replies not yet written to the socket (some may wait for the binlog). */
  readonly out: ReplyBuffer;
  /** No more replies: the client quit, was closed or went away. */
  finished = false;
  private inputEnded = false;
  /** True while this connection's own input is being handled: replies are flushed at its end. */
  private handling = false;
  private flushQueued = false;
  /** Replies wait for the client's next input (holdForInput), or for holdTimer. */
  private holding = false;
  /** The next input came: the hold ends once the answers to it are made (an answer may come later). */
  private releaseAfterAnswer = false;
  private holdTimer: NodeJS.Timeout | null = null;
  /** The parser was paused because too many replies wait to be sent. */
  private pausedForOutput = false;
  private endWhenFlushed = false;
  /** Counts pauses asked for by the door, so a settled operation knows whether its reply paused again. */
  private pauses = 0;
  /** Operations whose answers are awaited: input stays paused until the last one is replied to. */
  private inFlight = 0;
  /**
   * Answers of pipelined operations (settleInOrder) and replies made after them, in command
   * order: while any is awaited, reading goes on (up to MAX_PIPELINED), so a client's pipelined
   * puts reach the store in one turn and share its batch.
   */
  private readonly inOrder: InOrder[] = [];
  /** A command that must wait until every pipelined answer is in (whenDrained). */
  private deferred: (() => void) | null = null;
  /** True while pipelined answers are being replied, in order: a reply made then goes out at once. */
  private replying = false;
  /** Reading stopped because MAX_PIPELINED answers and replies wait. */
  private pipelineFull = false;
  private reader!: LinkReader;
  /** When the input being handled came (epoch ms), read once per turn; -1 until asked. */
  private turnTime = -1;
  private identity: string | null | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly owner: LinkOwner,
    private readonly ctx: LinkContext,
    /** What the client is told for a command the store failed, and when an internal error ends the connection. */
    private readonly internalErrorReply: Buffer,
    /** The store's clock (epoch ms). */
    private readonly now: () => number,
  ) {
    this.out = new ReplyBuffer((bytes) => this.writeOut(bytes), ctx.ops.durability);
  }

  /** Bytes made for this client and not yet taken by the kernel (held replies included). */
  get backlog(): number {
    return this.out.pending + this.socket.writableLength;
  }

  /** Who the peer is, for the dashboard's connection list. */
  get peer(): string {
    return this.socket.remoteAddress === undefined ? 'unix' : `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  /**
   * The subject CN of the client certificate the peer presented over mutual TLS; null for
   * plaintext and for TLS without a client certificate. Read once, at the first ask.
   */
  get peerIdentity(): string | null {
    if (this.identity === undefined) this.identity = peerIdentityOf(this.socket);
    return this.identity;
  }

  /**
   * When the commands being handled came (epoch ms), for the dashboard's "last command": one
   * clock reading per turn of input, however many commands it holds.
   */
  commandTime(): number {
    if (this.turnTime < 0) this.turnTime = this.now();
    return this.turnTime;
  }

  /** Starts reading: from here on socket bytes go to `reader`. */
  start(reader: LinkReader): void {
    this.reader = reader;
    const socket = this.socket;
    // A socket whose first bytes were read to tell plaintext from TLS (tls/tls-doorway.ts) holds
    // them, paused, in its stream buffer: they are the first input, handled on the next tick
    // (before any later read, which comes from the event loop); updateFlow then resumes reading.
    const early: Buffer[] = [];
    for (let chunk: unknown; socket.readableLength > 0 && (chunk = socket.read()) !== null; ) early.push(chunk as Buffer);
    if (early.length > 0) {
      process.nextTick(() => {
        for (const chunk of early) if (!this.finished) this.handle(this.writeOwned, chunk, false);
      });
    }
    if (!readThroughSharedBuffer(socket, this.onTransientBytes)) socket.on('data', (chunk: Buffer) => this.handle(this.writeOwned, chunk, false));
    socket.on('end', () => this.onEnd());
    socket.on('drain', () => this.onDrain());
    socket.on('error', (err) => this.ctx.log.debug({ err: err.message }, 'client socket error'));
    socket.on('close', () => this.onClose());
  }

  /** Server shutdown: close without waiting for the client. */
  destroy(): void {
    this.socket.destroy();
  }

  // Bound once: the read path hands `handle` a method and the chunk, so no closure per read.
  private readonly onTransientBytes = (chunk: Buffer): void => this.handle(this.writeTransient, chunk, false);
  private readonly writeTransient = (chunk: Buffer): void => this.reader.write(chunk, true);
  private readonly writeOwned = (chunk: Buffer): void => this.reader.write(chunk, false);

  /**
   * Replies with `reply(value)` now or, when the store answers later, stops reading commands
   * until it does, so replies stay in command order. `reply` should be a method bound once per
   * connection: the in-memory path then allocates nothing.
   */
  settle<T>(value: Pending<T>, reply: (value: T) => void): void {
    if (!isPending(value)) return reply(value);
    this.pauseInput();
    const pauses = this.pauses;
    this.inFlight++;
    value.then(
      (settled) => {
        this.inFlight--;
        if (this.finished) return;
        this.guard(() => {
          reply(settled);
          // The reply may itself have paused input (a reserve that waits): then it stays paused.
          // Nor does input resume while replies wait for the socket: onDrain resumes it then.
          if (this.pauses === pauses && !this.pausedForOutput) this.resumeSoon();
        }, true);
      },
      (err: unknown) => {
        this.inFlight--;
        if (this.finished) {
          this.ctx.log.debug({ err }, 'an operation failed after its client had gone');
          return;
        }
        this.guard(() => {
          this.storeFailed(err);
          if (this.pauses === pauses && !this.pausedForOutput) this.resumeSoon();
        }, true);
      },
    );
  }

  /**
   * The store could not do an operation (a database that is down, a statement that failed): the
   * client gets the protocol's error for that command, in its place, and the connection goes on.
   */
  private storeFailed(err: unknown): void {
    storeFailures.note(this.ctx.log, err);
    this.out.bytes(this.internalErrorReply);
  }

  /** True while pipelined answers are awaited: replies go through `later`, other commands through `whenDrained`. */
  get pipelining(): boolean {
    return this.inOrder.length > 0 && !this.replying;
  }

  /**
   * Like `settle`, for an operation that may overlap the ones before it (a put, a delete): when
   * the store answers later, reading goes on; the reply is made once every earlier one is.
   * Only an asynchronous store (a database) ever gets here with a promise; the in-memory store
   * answers at once and replies at once.
   */
  settleInOrder<T>(value: Pending<T>, reply: (value: T) => void): void {
    if (!isPending(value)) {
      if (this.inOrder.length === 0) return reply(value);
      return this.waitInOrder({ done: true, value, reply: reply as (value: unknown) => void });
    }
    const entry: InOrder = { done: false, value: undefined, reply: reply as (value: unknown) => void };
    this.waitInOrder(entry);
    value.then(
      (settled) => {
        entry.done = true;
        entry.value = settled;
        this.replyInOrder();
      },
      (err: unknown) => {
        if (this.finished) return this.ctx.log.debug({ err }, 'an operation failed after its client had gone');
        entry.done = true;
        entry.reply = () => this.storeFailed(err);
        this.replyInOrder();
      },
    );
  }

  /** A reply made now: at once, or after the pipelined answers still awaited. */
  later(write: () => void): void {
    if (!this.pipelining) return write();
    this.waitInOrder({ done: true, value: undefined, reply: write });
  }

  /** Queues an answer or reply; reading stops while MAX_PIPELINED of them wait. */
  private waitInOrder(entry: InOrder): void {
    this.inOrder.push(entry);
    if (!this.pipelineFull && this.inOrder.length >= MAX_PIPELINED) {
      this.pipelineFull = true;
      this.pauseInput();
    }
  }

  /**
   * Runs `command` once every pipelined answer is in (at once when none is awaited), reading
   * nothing meanwhile: a command that is not pipelined sees the effects of those before it.
   */
  whenDrained(command: () => void): void {
    if (this.inOrder.length === 0) return command();
    this.deferred = command;
    this.pauseInput();
  }

  private replyInOrder(): void {
    if (this.finished) return;
    this.guard(() => {
      this.replying = true;
      try {
        while (this.inOrder.length > 0 && this.inOrder[0]!.done) {
          const entry = this.inOrder.shift()!;
          entry.reply(entry.value);
        }
      } finally {
        this.replying = false;
      }
      if (this.pipelineFull && this.inOrder.length < MAX_PIPELINED) {
        this.pipelineFull = false;
        // Unless replies wait for the socket: onDrain resumes reading then.
        if (this.deferred === null && !this.pausedForOutput) this.resumeSoon();
      }
      const deferred = this.deferred;
      if (this.inOrder.length > 0 || deferred === null) return;
      this.deferred = null;
      const pauses = this.pauses;
      deferred();
      // As after a settle: unless the command paused input again (it waits for an answer).
      if (this.pauses === pauses && !this.pausedForOutput) this.resumeSoon();
    }, true);
  }

  /** Stops handling commands until `resumeSoon` (a blocked reserve, an operation in flight). */
  pauseInput(): void {
    this.pauses++;
    this.reader.pause();
  }

  /** Continues parsing on a later tick: never re-enter the parser from inside an operation. */
  resumeSoon(): void {
    // Whatever paused the parser, it resumes now (a later reply pauses it again if need be).
    this.pausedForOutput = false;
    process.nextTick(() => {
      // While an answer is awaited, later commands must not overtake its reply: the settle
      // resumes input once it has replied.
      if (!this.finished && this.inFlight === 0 && this.deferred === null && !this.pipelineFull) {
        this.guard(() => this.reader.resume());
      }
    });
  }

  /** Replies were added to `out`: they leave at the end of this input, or of this tick. */
  flushSoon(): void {
    // Replies are copies: a pipeline of big peeks must not build up more than the output limit
    // before flow control looks, so command parsing stops here until the socket drains.
    if (!this.pausedForOutput && this.out.pending + this.socket.writableLength > MAX_BUFFERED_OUTPUT) {
      this.pausedForOutput = true;
      this.reader.pause();
    }
    if (this.handling) return;
    this.flushAtTickEnd();
  }

  /**
   * Whether replies should wait for this client's next input (at most HOLD_FOR_INPUT_MS) rather
   * than leave at the end of this input: said by the door after each command. A Gearman worker
   * that has just reported a job's result sends its next GRAB_JOB at once; waiting for it lets
   * both answers leave in one write, as they do from gearmand, whose replies leave a moment
   * later. node-gearman, as client and worker on one connection, closes when the result arrives
   * and reconnects when the GRAB_JOB's answer comes after it.
   */
  holdForInput(hold: boolean): void {
    if (hold) {
      this.holding = true;
      this.releaseAfterAnswer = false;
    } else if (this.holding) {
      // Until this command is answered: with a database, its answer comes later.
      this.releaseAfterAnswer = true;
    }
  }

  private readonly releaseHold = (): void => {
    this.holdTimer = null;
    this.holding = false;
    this.releaseAfterAnswer = false;
    if (!this.finished) this.flushAtTickEnd();
  };

  /** False (and a timer armed) while replies wait for the client's next input. */
  private mayFlush(): boolean {
    if (this.holding) {
      // The wait starts once the store has answered (a database may take a while): the client's
      // next request comes only after our ACK of the last one, whatever the store does.
      if (this.inFlight === 0) this.holdTimer ??= setTimeout(this.releaseHold, HOLD_FOR_INPUT_MS);
      return false;
    }
    if (this.holdTimer !== null) {
      clearTimeout(this.holdTimer);
      this.holdTimer = null;
    }
    return true;
  }

  private flushAtTickEnd(): void {
    if (this.flushQueued || !this.mayFlush()) return;
    this.flushQueued = true;
    process.nextTick(this.flushQueuedReplies);
  }

  private readonly flushQueuedReplies = (): void => {
    this.flushQueued = false;
    this.out.flush();
    this.updateFlow();
  };

  /**
   * Runs parser work; afterwards wakes the scheduler, applies flow control and ends a half-closed client.
   * `answered`: the work replies to answers the store gave later. Its replies leave at the end of
   * the tick, not at once: a database statement answers many of this client's pipelined commands
   * at once, each in a promise callback of its own, and they should leave in one socket write.
   */
  guard(work: () => void, answered = false): void {
    this.handle(runWork, work, answered);
  }

  /** `guard` for `work(arg)`. */
  private handle<A>(work: (arg: A) => void, arg: A, answered: boolean): void {
    this.handling = true;
    this.turnTime = -1;
    try {
      work(arg);
    } catch (err) {
      this.ctx.log.error({ err }, 'internal error while serving a client; closing that connection');
      if (!this.finished) this.out.bytes(this.internalErrorReply);
      this.finish();
      return;
    } finally {
      this.handling = false;
      if (this.releaseAfterAnswer && this.inFlight === 0 && this.inOrder.length === 0) {
        this.releaseAfterAnswer = false;
        this.holding = false;
      }
      if (answered) this.flushAtTickEnd();
      else if (this.mayFlush()) this.out.flush();
    }
    this.ctx.ops.onActivity();
    this.updateFlow();
    // A half-closed client still gets the answers to what it sent.
    if (this.inputEnded && !this.reader.paused && this.inOrder.length === 0) this.finish();
  }

  /** Closes our side once pending replies are written; the owner ends the session. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.holding = false;
    this.releaseAfterAnswer = false;
    if (this.holdTimer !== null) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    const closing = this.owner.ended();
    // Our side closes once the session's jobs are given back: a client that sees the close and
    // asks again on another connection finds them ready, as with beanstalkd.
    if (isPending(closing)) void closing.finally(() => this.endOurSide());
    else this.endOurSide();
  }

  private endOurSide(): void {
    // Replies still waiting for the binlog go out first.
    if (this.out.pending > 0) this.endWhenFlushed = true;
    else this.socket.end();
  }

  /** Writes replies; true when the kernel took them all (nothing is left queued in the socket). */
  private writeOut(bytes: Buffer): boolean {
    if (this.socket.destroyed) return false;
    this.socket.write(bytes);
    if (this.endWhenFlushed && this.out.pending === 0) this.socket.end();
    const taken = this.socket.writableLength === 0;
    // Parsing paused for output resumes on 'drain', which never comes when the kernel took every
    // byte at once (its buffers grow with the traffic: a client that reads nothing can absorb
    // more than the output limit): then it resumes here.
    if (taken) this.resumeIfOutputFits();
    return taken;
  }

  private onDrain(): void {
    this.resumeIfOutputFits();
    this.updateFlow();
  }

  /** Parsing paused for output goes on once the replies not yet taken by the kernel fit the limit again. */
  private resumeIfOutputFits(): void {
    if (this.pausedForOutput && this.out.pending + this.socket.writableLength <= MAX_BUFFERED_OUTPUT) this.resumeSoon();
  }

  private updateFlow(): void {
    if (this.finished) return;
    const tooMuch =
      this.reader.buffered > MAX_BUFFERED_INPUT || this.socket.writableLength + this.out.pending > MAX_BUFFERED_OUTPUT;
    if (tooMuch && !this.socket.isPaused()) this.socket.pause();
    else if (!tooMuch && this.socket.isPaused()) this.socket.resume();
  }

  private onEnd(): void {
    this.inputEnded = true;
    this.owner.halfClosed();
    this.guard(() => undefined);
  }

  private onClose(): void {
    if (this.finished) return;
    this.finished = true;
    this.owner.ended();
  }
}

function runWork(work: () => void): void {
  work();
}
