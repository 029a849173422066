import type { Socket } from 'node:net';
import { DEFAULT_TUBE } from '../../../shared/limits.js';
import {
  isPending,
  type AdminChanges,
  type ClientDelegate,
  type ClientOperations,
  type Counters,
  type JobBytes,
  type MadeJob,
  type JobReads,
  type JobSnapshot,
  type NewJob,
  type ReleaseOutcome,
  type ReserveOutcome,
  type Result,
  type ServerCounts,
  type Sessions,
  type StoreInfo,
  type TubeCounts,
  type TubeName,
} from '../../operations/operations.js';
import type { Acl } from '../../acl/acl.js';
import type { ConnectionAccess } from '../../acl/connection-access.js';
import { ClientLink, type LinkContext, type LinkOwner } from '../client-link.js';
import { viewOf } from '../buffer-view.js';
import { parseCommand, type Command } from './commands.js';
import { CommandParser, type FrameHandler } from './parser.js';
import { CRLF, REPLY, WORD, failureReply } from './replies.js';
import { formatJobStats, formatServerStats, formatTubeList, formatTubeStats, type ServerInfo } from './yaml.js';

/** What the beanstalkd door uses of a store: its clients, reads, `stats` counters, kick-job and pause-tube. */
export type BeanstalkStore = StoreInfo & Pick<Sessions, 'connect'> & JobReads & Counters & Pick<AdminChanges, 'kickJob' | 'pauseTube'>;

export interface ConnectionContext extends LinkContext {
  ops: BeanstalkStore;
  info: ServerInfo;
  /** --acl: who may do what; null or absent: everyone everything. */
  acl?: Acl | null;
}

const NO_BODY = Buffer.alloc(0);

/**
 * One beanstalkd protocol client: socket bytes go through the push parser, each command becomes
 * one operation, and its result becomes the protocol's reply. Socket plumbing (order, flow
 * control, durability, the end) is the shared ClientLink's. Like beanstalkd, it stops reading
 * commands while it is blocked in reserve or working through a large kick.
 */
export class BeanstalkConnection implements FrameHandler, ClientDelegate, LinkOwner {
  readonly client: ClientOperations;
  private readonly link: ClientLink;
  private readonly parser: CommandParser;
  private readonly ops: BeanstalkStore;
  /** The put whose body is being read: its id and fields (the body arrives later). */
  private readonly pendingPut: { id: number; job: NewJob } = {
    id: 0,
    job: { priority: 0, delayMs: 0, ttrMs: 0, body: NO_BODY, bodyOwned: false },
  };
  private replyAfterSkip: Buffer = REPLY.JOB_TOO_BIG;
  /**
   * The pending reserve was already answered through the delegate. With a store that answers
   * later, a job (or a half-close) can end the wait before the 'waiting' answer itself arrives;
   * that answer must then not pause input again.
   */
  private reserveAnswered = false;
  /** The kind of the pipelined commands whose answers are awaited (overlapKind). */
  private overlapping: 'change' | 'take' | null = null;
  /** What this client may do under --acl; null without rules (one check per command, nothing more). */
  private readonly access: ConnectionAccess | null;

  constructor(
    socket: Socket,
    private readonly ctx: ConnectionContext,
  ) {
    this.ops = ctx.ops;
    this.link = new ClientLink(socket, this, ctx, REPLY.INTERNAL_ERROR, () => this.ops.now());
    const identity = this.link.peerIdentity;
    this.access =
      ctx.acl?.connect({ identity, protocol: 'beanstalkd', served: () => this.client.watchedTubes(), drop: () => this.link.destroy() }) ?? null;
    // A client that may not touch the default tube does not watch it (it watches nothing until
    // it watches a tube it may); it still uses it, and a put there is FORBIDDEN.
    const watchNothing = this.access !== null && !this.access.permits(DEFAULT_TUBE);
    this.client = this.ops.connect(this, this.link.peer, watchNothing ? { identity, watchNothing } : { identity });
    this.parser = new CommandParser(this);
    this.link.start(this.parser);
  }

  /** Server shutdown: close without waiting for the client. */
  destroy(): void {
    this.link.destroy();
  }

  // ---- FrameHandler --------------------------------------------------------------------------

  line(buf: Buffer, start: number, end: number): void {
    this.dispatch(parseCommand(buf, start, end));
  }

  overlong(): void {
    this.send(REPLY.BAD_FORMAT);
  }

  body(buf: Buffer, start: number, end: number, owned: boolean): void {
    const n = end - 2;
    if (buf[n] !== 13 || buf[n + 1] !== 10) {
      this.send(REPLY.EXPECTED_CRLF);
      return;
    }
    // The store copies a view of the socket chunk; a body the parser assembled is this job's
    // alone, so a large one is handed over rather than copied.
    const put = this.pendingPut;
    put.job.body = viewOf(buf, start, n);
    put.job.bodyOwned = owned;
    const result = this.client.put(put.id, put.job);
    put.job.body = NO_BODY; // do not pin the socket chunk
    this.link.settleInOrder(result, this.onInserted);
  }

  skipped(): void {
    this.send(this.replyAfterSkip);
  }

  // ---- ClientDelegate (a blocked reserve ends) -----------------------------------------------

  reserved(job: JobBytes): void {
    this.reserveAnswered = true;
    this.sendJob(WORD.RESERVED, job);
    this.link.resumeSoon();
  }

  timedOut(): void {
    this.reserveAnswered = true;
    this.send(REPLY.TIMED_OUT);
    this.link.resumeSoon();
  }

  deadlineSoon(): void {
    this.reserveAnswered = true;
    this.send(REPLY.DEADLINE_SOON);
    this.link.resumeSoon();
  }

  /** The protocol has no wake-up without a job; nothing asks for one. */
  woken(): void {}

  disconnect(): void {
    this.link.destroy();
  }

  // ---- LinkOwner -----------------------------------------------------------------------------

  halfClosed(): void {
    // protocol: a client that half-closes while blocked in reserve gets TIMED_OUT.
    this.client.halfClose();
  }

  ended(): void | Promise<void> {
    this.access?.close();
    const closing = this.client.close();
    this.ctx.ops.onActivity();
    if (isPending(closing)) {
      return closing.catch((err: unknown) => this.ctx.log.error({ err }, 'ending a client session failed'));
    }
  }

  // ---- commands: parse, call one operation, reply ----------------------------------------------

  private dispatch(cmd: Command): void {
    const link = this.link;
    // In an asynchronous store, pipelined puts and deletes may overlap each other, and
    // non-blocking reserves each other (they then share the store's batches); any other command,
    // or one of the other kind, waits until the answers before it are in.
    // A check that looks up a job (delete under --acl) answers after the commands before it.
    const kind = this.access !== null && 'id' in cmd ? null : overlapKind(cmd);
    if (link.pipelining && (kind === null || kind !== this.overlapping)) return link.whenDrained(() => this.dispatch(cmd));
    this.overlapping = kind;
    this.client.noteCommand(cmd.op, link.commandTime());
    if (this.access !== null) return this.checkAccess(this.access, cmd);
    this.run(cmd);
  }

  /**
   * --acl: FORBIDDEN, changing nothing, for a command the identity may not run, or one on a tube
   * it may not touch: the tube named, the used tube, or the tube of the job named (a job in a
   * forbidden tube is FORBIDDEN, not NOT_FOUND; a job that does not exist is NOT_FOUND as ever).
   */
  private checkAccess(access: ConnectionAccess, cmd: Command): void {
    if (cmd.op === 'bad-format' || cmd.op === 'unknown' || cmd.op === 'put') return this.run(cmd); // put: checked once its line is known good (startPut)
    if (!access.mayRun(cmd.op)) return this.send(REPLY.FORBIDDEN);
    switch (cmd.op) {
      case 'use':
      case 'watch':
      case 'stats-tube':
      case 'pause-tube':
        return access.mayTouch(cmd.tube) ? this.run(cmd) : this.send(REPLY.FORBIDDEN);
      case 'peek-ready':
      case 'peek-delayed':
      case 'peek-buried':
      case 'kick':
        return access.mayTouch(this.client.usedTube()) ? this.run(cmd) : this.send(REPLY.FORBIDDEN);
      case 'peek':
      case 'reserve-job':
      case 'delete':
      case 'release':
      case 'bury':
      case 'touch':
      case 'kick-job':
      case 'stats-job':
        return this.link.settle(access.mayTouchJob(cmd.id), (allowed) => (allowed ? this.run(cmd) : this.send(REPLY.FORBIDDEN)));
      default:
        // reserve takes only from watched tubes, which are all allowed (watch is checked, and a
        // reload closes a connection that watches a tube it may no longer touch); list-tubes
        // lists only allowed tubes; ignore, the listings of its own tubes and stats touch none.
        return this.run(cmd);
    }
  }

  private run(cmd: Command): void {
    const ops = this.ops;
    const client = this.client;
    const link = this.link;
    const op = cmd.op;
    // Counted for stats as beanstalkd counts cmd-*: every command but those the operation counts
    // itself (kick-job and pause-tube, as the dashboard's are) and those stats does not show.
    if (op !== 'kick-job' && op !== 'pause-tube' && op !== 'quit' && op !== 'bad-format' && op !== 'unknown') ops.count(op);
    switch (cmd.op) {
      case 'put': return this.startPut(cmd.pri, cmd.delay, cmd.ttr, cmd.bytes, cmd.trailingGarbage);
      case 'peek': return link.settle(ops.peek(cmd.id), this.onFound);
      case 'peek-ready': return link.settle(client.peekReady(), this.onFound);
      case 'peek-delayed': return link.settle(client.peekDelayed(), this.onFound);
      case 'peek-buried': return link.settle(client.peekBuried(), this.onFound);
      case 'reserve':
        this.reserveAnswered = false;
        return link.settle(client.reserve(null), this.onReserve);
      case 'reserve-with-timeout':
        this.reserveAnswered = false;
        // protocol (1.12): a negative timeout waits forever, like reserve.
        if (cmd.timeout === 0) return link.settleInOrder(client.reserve(0), this.onReserve);
        return link.settle(client.reserve(cmd.timeout < 0 ? null : cmd.timeout * 1000), this.onReserve);
      case 'reserve-job': return link.settle(client.reserveJob(cmd.id), this.onReservedJob);
      case 'delete': return link.settleInOrder(client.delete(cmd.id), this.onDeleted);
      case 'release': return link.settle(client.release(cmd.id, cmd.pri, cmd.delay * 1000), this.onReleased);
      case 'bury': return link.settle(client.bury(cmd.id, cmd.pri), this.onBuried);
      case 'touch': return link.settle(client.touch(cmd.id), this.onTouched);
      case 'kick': return link.settle(client.kick(cmd.bound), this.onKicked);
      case 'kick-job': return link.settle(ops.kickJob(cmd.id), this.onKickedJob);
      case 'stats': return link.settle(ops.serverCounts(), this.onStats);
      case 'stats-job': return link.settle(ops.job(cmd.id), this.onJobStats);
      case 'stats-tube': return link.settle(ops.tube(cmd.tube), this.onTubeStats);
      case 'list-tubes':
        return link.settle(ops.tubeNames(), this.access === null ? this.onTubeList : this.onAllowedTubeList);
      case 'list-tube-used': return this.sendWordText(WORD.USING, client.usedTube());
      case 'list-tubes-watched': return this.sendYaml(formatTubeList(client.watchedTubes()));
      case 'use': return link.settle(client.use(cmd.tube), this.onUsing);
      case 'watch': return link.settle(client.watch(cmd.tube), this.onWatching);
      case 'ignore': return link.settle(client.ignore(cmd.tube), this.onWatching);
      case 'pause-tube': return link.settle(ops.pauseTube(cmd.tube, cmd.delay * 1000), this.onPaused);
      case 'quit':
        link.pauseInput();
        return link.finish();
      case 'bad-format':
        if (cmd.countPauseTube) ops.count('pause-tube');
        return this.send(REPLY.BAD_FORMAT);
      case 'unknown': return this.send(REPLY.UNKNOWN_COMMAND);
    }
  }

  private startPut(pri: number, delaySec: number, ttrSec: number, bytes: number, trailingGarbage: boolean): void {
    // protocol: JOB_TOO_BIG is decided before the trailing-garbage check, and sent after the body is read.
    if (this.ops.isTooBig(bytes)) return this.skipBody(bytes + 2, REPLY.JOB_TOO_BIG);
    if (trailingGarbage) return this.send(REPLY.BAD_FORMAT);
    const access = this.access;
    if (access !== null && !(access.mayRun('put') && access.mayTouch(this.client.usedTube()))) return this.skipBody(bytes + 2, REPLY.FORBIDDEN);
    const admitted = this.client.admitPut(bytes);
    if (!admitted.ok) return this.skipBody(bytes + 2, failureReply(admitted.code));
    const put = this.pendingPut;
    put.id = admitted.value;
    put.job.priority = pri;
    put.job.delayMs = delaySec * 1000;
    put.job.ttrMs = ttrSec * 1000;
    this.parser.expectBody(bytes + 2);
  }

  private skipBody(length: number, reply: Buffer): void {
    this.replyAfterSkip = reply;
    this.parser.skip(length);
  }

  // ---- replies (bound once per connection, so settling a result allocates nothing) -------------

  private readonly onInserted = (r: Result<MadeJob>): void => {
    if (r.ok) this.sendWordNumber(WORD.INSERTED, r.value.id);
    else this.send(failureReply(r.code));
  };

  private readonly onFound = (job: JobBytes | undefined): void => {
    if (job === undefined) this.send(REPLY.NOT_FOUND);
    else this.sendJob(WORD.FOUND, job);
  };

  private readonly onReserve = (outcome: ReserveOutcome<JobBytes>): void => {
    switch (outcome.kind) {
      case 'reserved':
        return this.sendJob(WORD.RESERVED, outcome.job);
      case 'deadline-soon':
        return this.send(REPLY.DEADLINE_SOON);
      case 'timed-out':
        return this.send(REPLY.TIMED_OUT);
      case 'waiting':
        // protocol: a client blocked in reserve is not read from until the reserve ends.
        if (!this.reserveAnswered) this.link.pauseInput();
        return;
    }
  };

  private readonly onReservedJob = (r: Result<JobBytes>): void => {
    if (r.ok) this.sendJob(WORD.RESERVED, r.value);
    else this.send(failureReply(r.code));
  };

  private readonly onDeleted = (r: Result<void>): void => this.sendResult(r, REPLY.DELETED);
  /** The dead-letter rule may bury a released job: beanstalkd's protocol allows BURIED for a release. */
  private readonly onReleased = (r: Result<ReleaseOutcome>): void => this.sendResult(r, r.ok && r.value === 'buried' ? REPLY.BURIED : REPLY.RELEASED);
  private readonly onBuried = (r: Result<void>): void => this.sendResult(r, REPLY.BURIED);
  private readonly onTouched = (r: Result<void>): void => this.sendResult(r, REPLY.TOUCHED);
  private readonly onKickedJob = (r: Result<unknown>): void => this.sendResult(r, REPLY.KICKED);
  private readonly onPaused = (r: Result<unknown>): void => this.sendResult(r, REPLY.PAUSED);
  private readonly onKicked = (n: number): void => this.sendWordNumber(WORD.KICKED, n);

  private readonly onUsing = (r: Result<TubeName>): void => {
    if (r.ok) this.sendWordText(WORD.USING, r.value.name);
    else this.send(failureReply(r.code));
  };

  private readonly onWatching = (r: Result<number>): void => {
    if (r.ok) this.sendWordNumber(WORD.WATCHING, r.value);
    else this.send(failureReply(r.code));
  };

  private readonly onStats = (counts: ServerCounts): void => {
    this.sendYaml(formatServerStats(counts, this.ctx.info, this.ops.now()));
  };

  private readonly onJobStats = (job: JobSnapshot | undefined): void => {
    if (job === undefined) this.send(REPLY.NOT_FOUND);
    else this.sendYaml(formatJobStats(job, this.ops.now()));
  };

  private readonly onTubeStats = (tube: TubeCounts | undefined): void => {
    if (tube === undefined) this.send(REPLY.NOT_FOUND);
    else this.sendYaml(formatTubeStats(tube, this.ops.now()));
  };

  private readonly onTubeList = (names: string[]): void => this.sendYaml(formatTubeList(names));
  private readonly onAllowedTubeList = (names: string[]): void => this.onTubeList(names.filter((name) => this.access!.permits(name)));

  // ---- output --------------------------------------------------------------------------------

  private send(data: Buffer): void {
    if (this.link.finished) return;
    if (this.link.pipelining) return this.link.later(() => this.send(data));
    this.link.out.bytes(data);
    this.link.flushSoon();
  }

  private sendWordNumber(word: Buffer, n: number): void {
    if (this.link.finished) return;
    if (this.link.pipelining) return this.link.later(() => this.sendWordNumber(word, n));
    this.link.out.wordNumber(word, n);
    this.link.flushSoon();
  }

  private sendWordText(word: Buffer, text: string): void {
    if (this.link.finished) return;
    if (this.link.pipelining) return this.link.later(() => this.sendWordText(word, text));
    this.link.out.wordText(word, text);
    this.link.flushSoon();
  }

  private sendJob(word: Buffer, job: JobBytes): void {
    if (this.link.finished) return;
    if (this.link.pipelining) {
      // The body is valid until the next operation: kept for the reply's turn.
      const kept = { id: job.id, bodyBuf: Buffer.from(job.bodyBuf.subarray(job.bodyOffset, job.bodyOffset + job.bodyLength)), bodyOffset: 0, bodyLength: job.bodyLength };
      return this.link.later(() => this.sendJob(word, { ...kept, tubeName: job.tubeName }));
    }
    this.link.out.job(word, job.id, job);
    this.link.flushSoon();
  }

  private sendResult(result: Result<unknown>, success: Buffer): void {
    this.send(result.ok ? success : failureReply(result.code));
  }

  private sendYaml(yaml: string): void {
    if (this.link.finished) return;
    if (this.link.pipelining) return this.link.later(() => this.sendYaml(yaml));
    const body = Buffer.from(yaml, 'latin1');
    const out = this.link.out;
    out.wordNumber(WORD.OK, body.length);
    out.bytes(body);
    out.bytes(CRLF);
    this.link.flushSoon();
  }
}

/**
 * Which pipelined commands may overlap (ClientLink.settleInOrder): puts and deletes, whose
 * effects do not depend on each other (a put's id is not known before its reply), or
 * non-blocking reserves among themselves; null for every other command.
 */
function overlapKind(cmd: Command): 'change' | 'take' | null {
  if (cmd.op === 'put' || cmd.op === 'delete') return 'change';
  if (cmd.op === 'reserve-with-timeout' && cmd.timeout === 0) return 'take';
  return null;
}
