import type { Socket } from 'node:net';
import { isPending, type ClientDelegate, type JobBytes, type Result } from '../../operations/operations.js';
import type { GearmanStore } from '../../gearman/store.js';
import { jobBody, uniqueEnd } from '../../gearman/job-body.js';
import { MAX_FUNCTION_BYTES, MAX_UNIQUE_BYTES } from '../../gearman/limits.js';
import type { GearmanRegistry, JobStatus, UniqueStatus, WorkStatus } from '../../gearman/registry.js';
import { nextCronTime, parseCronTime } from '../../gearman/schedule.js';
import { GearmanSession, type SessionNews, type SubmitAnswer, type SubmitRefusal, type Submission } from '../../gearman/session.js';
import type { Acl } from '../../acl/acl.js';
import type { ConnectionAccess } from '../../acl/connection-access.js';
import { ClientLink, type LinkContext, type LinkOwner } from '../client-link.js';
import { viewOf } from '../buffer-view.js';
import { runAdminCommand, type GearmanAdminContext } from './admin.js';
import { byType, encodePacket, packetName, PACKET, REQUEST_ARGS, splitArgs } from './packets.js';
import { GearmanParser, type GearmanFrameHandler, type Magic } from './parser.js';
import { NOOP, NO_JOB, OPTION_EXCEPTIONS, errorPacket, type GearmanError } from './replies.js';

/** A client that has this many bytes of forwarded results unread is closed. */
const MAX_FORWARD_BACKLOG = 32 * 1024 * 1024;
/** Bytes of SET_CLIENT_ID kept (gearmand keeps 64). */
const MAX_CLIENT_ID_BYTES = 64;
/**
 * Room in a packet for the arguments besides the data (function name, unique id, handle, the
 * SCHED fields and their separators), over --gearman-max-size, which bounds the data: so a
 * worker can always send back, under its handle, as much data as a client could submit.
 */
const ARGUMENT_ROOM = 1024;

export interface GearmanContext extends LinkContext, GearmanAdminContext {
  ops: GearmanStore;
  registry: GearmanRegistry;
  /** --gearman-round-robin: a worker's functions are served in turn. */
  roundRobin: boolean;
  /** --acl: who may do what; null or absent: everyone everything. */
  acl?: Acl | null;
}

/** Engine priorities for Gearman's three levels: HIGH before NORMAL before LOW, FIFO within each. */
const PRIORITY = { high: 0, normal: 1, low: 2 } as const;

interface Submit {
  priority: number;
  background: boolean;
  /** Argument count: 3 for plain submits, 4 for EPOCH, 5 for REDUCE, 8 for SCHED. */
  args: number;
  /** 'reduce': a map-reduce submit, run as a plain one (its reducer and aggregator are not kept). */
  when: 'now' | 'epoch' | 'sched' | 'reduce';
}

const SUBMIT_KINDS: Readonly<Record<number, Submit>> = {
  [PACKET.SUBMIT_JOB]: { priority: PRIORITY.normal, background: false, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_BG]: { priority: PRIORITY.normal, background: true, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_HIGH]: { priority: PRIORITY.high, background: false, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_HIGH_BG]: { priority: PRIORITY.high, background: true, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_LOW]: { priority: PRIORITY.low, background: false, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_LOW_BG]: { priority: PRIORITY.low, background: true, args: 3, when: 'now' },
  [PACKET.SUBMIT_JOB_EPOCH]: { priority: PRIORITY.normal, background: true, args: 4, when: 'epoch' },
  [PACKET.SUBMIT_JOB_SCHED]: { priority: PRIORITY.normal, background: true, args: 8, when: 'sched' },
  // gearmand 1.1.20 queues these as NORMAL jobs of the function and answers JOB_CREATED.
  [PACKET.SUBMIT_REDUCE_JOB]: { priority: PRIORITY.normal, background: false, args: 5, when: 'reduce' },
  [PACKET.SUBMIT_REDUCE_JOB_BACKGROUND]: { priority: PRIORITY.normal, background: true, args: 5, when: 'reduce' },
};

/** The submits by packet type (an array: read once per packet). */
const SUBMITS: readonly (Submit | undefined)[] = byType(SUBMIT_KINDS);

/** What a packet is to a job: not a WORK_* packet, news of a running job, or its final result. */
const NOT_WORK = 0;
const NEWS = 1;
const FINAL = 2;
/** WORK_* packets a worker sends, and whether each ends the job, by packet type. */
const WORK_RESULTS: readonly number[] = Array.from(byType({
  [PACKET.WORK_DATA]: NEWS,
  [PACKET.WORK_WARNING]: NEWS,
  [PACKET.WORK_STATUS]: NEWS,
  [PACKET.WORK_COMPLETE]: FINAL,
  [PACKET.WORK_FAIL]: FINAL,
  [PACKET.WORK_EXCEPTION]: FINAL,
}), (w) => w ?? NOT_WORK);

let nextFd = 1;

/**
 * One Gearman client or worker (the protocol does not tell them apart): the door of a
 * GearmanSession. Packets go through the push parser; each request is parsed, handed to one
 * call of the session (server/gearman/session.ts, where the jobs' rules live) and answered;
 * replies and forwarded WORK_* packets leave in order through the shared ClientLink. Text admin
 * lines on the same connection are answered by admin.ts.
 */
export class GearmanConnection implements GearmanFrameHandler, ClientDelegate, LinkOwner, SessionNews {
  readonly fd = nextFd++;
  readonly session: GearmanSession;
  private readonly link: ClientLink;
  private readonly parser: GearmanParser;
  private readonly ops: GearmanStore;
  private readonly registry: GearmanRegistry;
  private clientId = '-';
  private lastFunction: { bytes: Buffer; name: string } | null = null;
  /** --gearman-max-size: the store's job size less the unique id kept in front of the data. */
  private readonly maxData: number;
  private exceptions = false;
  /** The submit being parsed, reused: the session copies what it keeps. */
  private readonly submission: Submission = { fn: '', unique: NO_BODY, body: NO_BODY, priority: 0, background: false, delayMs: 0 };
  private readonly unlist: () => void;
  /** What this client may do under --acl; null without rules. */
  private readonly access: ConnectionAccess | null;

  constructor(
    socket: Socket,
    private readonly ctx: GearmanContext,
  ) {
    this.ops = ctx.ops;
    this.maxData = this.ops.maxJobSize - MAX_UNIQUE_BYTES - 1;
    this.registry = ctx.registry;
    this.link = new ClientLink(socket, this, ctx, errorPacket('INTERNAL'), () => this.ops.now());
    const identity = this.link.peerIdentity;
    this.session = new GearmanSession(ctx, this, this.link.peer, this, identity);
    this.access =
      ctx.acl?.connect({ identity, protocol: 'gearman', served: () => this.session.client.watchedTubes(), drop: () => this.link.destroy() }) ?? null;
    this.parser = new GearmanParser(this, this.maxData + ARGUMENT_ROOM);
    this.unlist = this.registry.list(() => ({
      fd: this.fd,
      address: socket.remoteAddress ?? 'unix',
      clientId: this.clientId,
      functions: this.session.client.watchedTubes(),
    }));
    this.link.start(this.parser);
  }

  destroy(): void {
    this.link.destroy();
  }

  // ---- GearmanFrameHandler ---------------------------------------------------------------------

  packet(magic: Magic, type: number, buf: Buffer, start: number, end: number): void {
    if (magic === 'RES') return this.sendError('INVALID_MAGIC');
    this.session.client.noteCommand(packetName(type), this.link.commandTime());
    const count = type < REQUEST_ARGS.length ? REQUEST_ARGS[type]! : -1;
    const work = type < WORK_RESULTS.length ? WORK_RESULTS[type]! : NOT_WORK;
    // A worker that reports a job's result asks for its next job at once: its answers wait for that.
    this.link.holdForInput(work === FINAL);
    if (count < 0) return this.sendError('INVALID_COMMAND');
    // The packets of every job (submits, grabs and results) are read in place, without a view
    // or an array of views per packet; the rest are split into their arguments.
    const submit = type < SUBMITS.length ? SUBMITS[type] : undefined;
    if (submit !== undefined) return this.submit(submit, buf, start, end);
    if (work !== NOT_WORK && type !== PACKET.WORK_STATUS) {
      const handleEnd = count === 1 ? end : nulAt(buf, start, end);
      if (handleEnd < 0) return this.sendError('INVALID_PACKET');
      return this.workResult(type, work === FINAL, buf, start, end, handleEnd, null);
    }
    if (type === PACKET.ECHO_REQ) return this.echo(buf, start, end);
    if (type === PACKET.GRAB_JOB_UNIQ || type === PACKET.GRAB_JOB_ALL) {
      // GRAB_JOB_ALL is answered with JOB_ASSIGN_UNIQ, as gearmand does when there is no reducer.
      return this.link.settle(this.session.grab(), this.onGrabbedUniq);
    }
    const data = buf.subarray(start, end);
    const args = splitArgs(data, count);
    if (args === null) return this.sendError('INVALID_PACKET');
    switch (type) {
      case PACKET.WORK_STATUS:
        return this.workResult(type, false, data, 0, data.length, args[0]!.length, { numerator: args[1]!, denominator: args[2]! });
      case PACKET.CAN_DO:
        return this.canDo(args[0]!, 0);
      case PACKET.CAN_DO_TIMEOUT:
        return this.canDo(args[0]!, Number(args[1]!.toString('latin1')));
      case PACKET.CANT_DO:
        return this.link.settle(this.session.cantDo(args[0]!.toString('latin1')), this.onIgnored);
      case PACKET.RESET_ABILITIES:
        for (const ignored of this.session.resetAbilities()) this.link.settle(ignored, this.onIgnored);
        return;
      case PACKET.PRE_SLEEP:
        return this.link.settle(this.session.sleep(), this.onSlept);
      case PACKET.GRAB_JOB:
        return this.link.settle(this.session.grab(), this.onGrabbed);
      case PACKET.GET_STATUS:
        return this.getStatus(args[0]!);
      case PACKET.GET_STATUS_UNIQUE:
        return this.getStatusUnique(args[0]!);
      case PACKET.OPTION_REQ:
        if (args[0]!.toString('latin1') !== 'exceptions') return this.sendError('UNKNOWN_OPTION');
        this.exceptions = true;
        return this.send(OPTION_EXCEPTIONS);
      case PACKET.SET_CLIENT_ID:
        this.clientId = args[0]!.length > 0 ? args[0]!.toString('latin1', 0, MAX_CLIENT_ID_BYTES).replace(/[\s\x00-\x1f\x7f]/g, '_') : '-';
        return;
      case PACKET.ALL_YOURS:
        return;
      default:
        return this.sendError('INVALID_COMMAND');
    }
  }

  /** ECHO_RES: the request's data, copied from the packet into the reply (no view, no array). */
  private echo(buf: Buffer, start: number, end: number): void {
    if (this.link.finished) return;
    this.link.out.dataPacket(PACKET.ECHO_RES, buf, start, end);
    this.link.flushSoon();
  }

  oversized(): void {
    this.sendError('TOO_LARGE');
  }

  badMagic(): void {
    // gearmand closes such a connection without a word.
    this.link.pauseInput();
    this.link.finish();
  }

  adminLine(line: string): void {
    const words = line.trim().split(/\s+/).filter((w) => w.length > 0);
    if (words.length === 0) return;
    const peer = this.link.peer;
    this.link.settle(runAdminCommand(words, this.ctx, peer, this.access), this.onAdminReply);
  }

  adminOverlong(): void {
    this.sendText('ERR line_too_long Line+is+too+long\r\n');
  }

  // ---- ClientDelegate --------------------------------------------------------------------------

  /** Never called: a Gearman worker only ever grabs without waiting. */
  reserved(): void {}
  timedOut(): void {}
  deadlineSoon(): void {}

  /** A job is ready for a function this sleeping worker can do. */
  woken(): void {
    this.send(NOOP);
  }

  disconnect(): void {
    this.link.destroy();
  }

  // ---- SessionNews: the foreground jobs this client waits on ------------------------------------

  update(jobId: number, type: number, data: Buffer, start: number, end: number): void {
    // WORK_* packets come from the worker's connection, so this client's own flow control cannot
    // hold them back: a client that stops reading them is let go rather than buffered for ever.
    if (this.link.backlog > MAX_FORWARD_BACKLOG) {
      if (!this.link.finished) this.ctx.log.warn({ peer: this.link.peer }, 'Gearman client does not read its job results; closing it');
      this.link.destroy();
      return;
    }
    if (type === PACKET.WORK_EXCEPTION && !this.exceptions) {
      // A client that did not ask for exceptions is told the job failed, as gearmand does.
      const handle = this.registry.handles.handle(jobId);
      this.send(encodePacket(PACKET.WORK_FAIL, [Buffer.concat([Buffer.from(handle, 'latin1'), ZERO])]));
    } else if (!this.link.finished) {
      this.link.out.dataPacket(type, data, start, end);
      this.link.flushSoon();
    }
    if (type < WORK_RESULTS.length && WORK_RESULTS[type] === FINAL) this.session.answered(jobId);
  }

  failed(jobId: number): void {
    // Gone without a result (cancelled, or deleted from the dashboard): the client is told it failed.
    this.sendHandle(PACKET.WORK_FAIL, jobId);
  }

  // ---- LinkOwner -------------------------------------------------------------------------------

  halfClosed(): void {
    this.session.client.halfClose();
  }

  ended(): void | Promise<void> {
    this.access?.close();
    this.unlist();
    const closing = this.session.close();
    this.ctx.ops.onActivity();
    if (isPending(closing)) return closing.catch((err: unknown) => this.ctx.log.error({ err }, 'ending a Gearman session failed'));
  }

  // ---- requests: parse, one call, one reply ----------------------------------------------------

  /** A SUBMIT_JOB*: `function NUL unique NUL [time fields NUL] data`, in buf[start, end). */
  private submit(kind: Submit, buf: Buffer, start: number, end: number): void {
    let fnEnd: number;
    let unique: Buffer;
    let dataStart: number;
    let args: readonly Buffer[] | null = null;
    // The last function's name again (the usual case): no scan for its NUL, no second comparison.
    let sameFunction = false;
    if (kind.when === 'now') {
      fnEnd = this.lastFunctionEnd(buf, start, end);
      sameFunction = fnEnd >= 0;
      if (!sameFunction) fnEnd = nulAt(buf, start, end);
      const uniqueEnd = fnEnd < 0 ? -1 : nulAt(buf, fnEnd + 1, end);
      if (uniqueEnd < 0) return this.sendError('INVALID_PACKET');
      unique = uniqueEnd === fnEnd + 1 ? NO_BODY : viewOf(buf, fnEnd + 1, uniqueEnd);
      dataStart = uniqueEnd + 1;
    } else {
      args = splitArgs(buf.subarray(start, end), kind.args);
      if (args === null) return this.sendError('INVALID_PACKET');
      fnEnd = start + args[0]!.length;
      unique = args[1]!;
      dataStart = end - args[kind.args - 1]!.length;
    }
    // gearmand takes an empty function name; Beanpole does not (a binlog record's tube name is
    // never empty, which is one of its checks against damage).
    if (fnEnd === start || fnEnd - start > MAX_FUNCTION_BYTES) return this.sendError('BAD_FUNCTION');
    if (unique.length > MAX_UNIQUE_BYTES) return this.sendError('BAD_UNIQUE');
    if (end - dataStart > this.maxData) return this.sendError('TOO_LARGE');
    let delayMs = 0;
    if (args !== null && (kind.when === 'epoch' || kind.when === 'sched')) {
      const runAt = kind.when === 'epoch' ? epochMs(args[2]!) : cronMs(args.slice(2, 7), this.ops.now());
      if (runAt === null) return this.sendError('BAD_TIME');
      // Whole milliseconds (never early): a job keeps its delay as a small integer (Job).
      delayMs = Math.max(0, Math.ceil(runAt - this.ops.now()));
    }
    const fn = sameFunction ? this.lastFunction!.name : this.functionName(buf, start, fnEnd);
    if (this.access !== null && !this.access.mayTouch(fn)) return this.sendError('PERMISSION_DENIED');
    const s = this.submission;
    s.fn = fn;
    s.unique = unique;
    // The job's body is `unique NUL data` (job-body.ts): for a plain submit, a view of the packet.
    s.body = args === null ? viewOf(buf, fnEnd + 1, end) : jobBody(unique, args[kind.args - 1]!);
    s.priority = kind.priority;
    s.background = kind.background;
    s.delayMs = delayMs;
    this.link.settle(this.session.submit(s), this.onSubmitted);
    s.unique = s.body = NO_BODY; // do not pin the packet
  }

  /**
   * Where the function name ends (its NUL) when it is the last one this client submitted to, or
   * -1: the usual case is read once, by the comparison, rather than scanned for its NUL first.
   */
  private lastFunctionEnd(buf: Buffer, start: number, end: number): number {
    const last = this.lastFunction;
    if (last === null) return -1;
    const fnEnd = start + last.bytes.length;
    return fnEnd < end && buf[fnEnd] === 0 && bytesAt(buf, start, last.bytes) ? fnEnd : -1;
  }

  /**
   * The function name of a submit as a string. A client submits to the same function again and
   * again, so the last one is kept: no new string per packet (nor a fresh hash for the tube lookup).
   */
  private functionName(buf: Buffer, start: number, end: number): string {
    const last = this.lastFunction;
    if (last !== null && last.bytes.length === end - start && bytesAt(buf, start, last.bytes)) return last.name;
    const name = buf.toString('latin1', start, end);
    this.lastFunction = { bytes: Buffer.from(buf.subarray(start, end)), name };
    return name;
  }

  private canDo(fnBytes: Buffer, timeoutMs: number): void {
    if (fnBytes.length === 0 || fnBytes.length > MAX_FUNCTION_BYTES) return this.sendError('BAD_FUNCTION');
    const fn = fnBytes.toString('latin1');
    if (this.access !== null && !this.access.mayTouch(fn)) return this.sendError('PERMISSION_DENIED');
    const watched = this.session.canDo(fn, timeoutMs);
    if (watched === 'TOO_MANY_FUNCTIONS') return this.sendError('TOO_MANY_FUNCTIONS');
    this.link.settle(watched, this.onWatched);
  }

  /** A WORK_* packet, buf[start, end): it starts with the job's handle, which ends at `handleEnd`. */
  private workResult(type: number, final: boolean, buf: Buffer, start: number, end: number, handleEnd: number, status: WorkStatus | null): void {
    const id = this.registry.handles.idOf(buf, start, handleEnd);
    const notFound = type === PACKET.WORK_DATA || type === PACKET.WORK_WARNING ? this.onNoSuchJob : this.onJobNotFound;
    if (id === null) return notFound(false);
    this.link.settle(this.session.report(id, type, buf, start, end, status, final), notFound);
  }

  private getStatus(handle: Buffer): void {
    const id = this.registry.handles.idOf(handle);
    if (id === null) return this.statusReply(handle, UNKNOWN_JOB);
    const answer = this.session.jobStatus(id);
    const kept = isPending(answer) ? Buffer.from(handle) : handle; // the packet is valid only during this call
    this.link.settle(answer, (a) => this.statusReply(kept, a));
  }

  private getStatusUnique(unique: Buffer): void {
    const answer = this.session.uniqueStatus(unique);
    const kept = isPending(answer) ? Buffer.from(unique) : unique; // the packet is valid only during this call
    this.link.settle(answer, (a) => this.uniqueStatusReply(kept, a));
  }

  /** STATUS_RES_UNIQUE: as STATUS_RES, keyed by the unique id, and the count of clients waiting. */
  private uniqueStatusReply(unique: Buffer, answer: UniqueStatus): void {
    this.send(encodePacket(PACKET.STATUS_RES_UNIQUE, [unique, ...statusFields(answer), String(answer.clients)]));
  }

  private statusReply(handle: Buffer, answer: JobStatus): void {
    this.send(encodePacket(PACKET.STATUS_RES, [handle, ...statusFields(answer)]));
  }

  // ---- replies (bound once per connection) -----------------------------------------------------

  private readonly onSubmitted = (answer: SubmitAnswer): void => {
    if (!answer.ok) return this.sendError(SUBMIT_ERRORS[answer.refusal] ?? 'NO_MEMORY');
    this.sendHandle(PACKET.JOB_CREATED, answer.id);
  };

  private readonly onWatched = (r: Result<number>): void => {
    if (!r.ok) this.sendError('NO_MEMORY');
  };

  private readonly onIgnored = (): void => undefined;

  /** A report the worker may not make: the job is not one it holds. */
  private readonly onNoSuchJob = (held: boolean): void => {
    if (!held) this.sendError('NO_SUCH_JOB');
  };
  private readonly onJobNotFound = (held: boolean): void => {
    if (!held) this.sendError('JOB_NOT_FOUND');
  };

  private readonly onSlept = (readyNow: boolean): void => {
    if (readyNow) this.send(NOOP);
  };

  private readonly onGrabbed = (job: JobBytes | null): void => this.assign(job, false);
  private readonly onGrabbedUniq = (job: JobBytes | null): void => this.assign(job, true);

  private assign(job: JobBytes | null, uniq: boolean): void {
    if (job === null) return this.send(NO_JOB);
    if (this.link.finished) return;
    const prefix = this.registry.handles.prefixBytes;
    const start = job.bodyOffset;
    const end = start + job.bodyLength;
    if (uniq) {
      // The body is already `unique NUL data`, as JOB_ASSIGN_UNIQ lays them out.
      this.link.out.assignPacket(PACKET.JOB_ASSIGN_UNIQ, prefix, job.id, job.tubeName, job.bodyBuf, start, end);
    } else {
      const dataStart = Math.min(uniqueEnd(job.bodyBuf, start, end) + 1, end);
      this.link.out.assignPacket(PACKET.JOB_ASSIGN, prefix, job.id, job.tubeName, job.bodyBuf, dataStart, end);
    }
    this.link.flushSoon();
  }

  private readonly onAdminReply = (text: string | null): void => {
    if (text !== null) this.sendText(text);
  };

  // ---- output ----------------------------------------------------------------------------------

  private send(packet: Buffer): void {
    if (this.link.finished) return;
    this.link.out.bytes(packet);
    this.link.flushSoon();
  }

  /** A packet whose only argument is job `id`'s handle. */
  private sendHandle(type: number, id: number): void {
    if (this.link.finished) return;
    this.link.out.handlePacket(type, this.registry.handles.prefixBytes, id);
    this.link.flushSoon();
  }

  private sendText(text: string): void {
    this.send(Buffer.from(text, 'latin1'));
  }

  private sendError(error: GearmanError): void {
    this.send(errorPacket(error));
  }
}

const ZERO = Buffer.from([0]);
/** A refused submit's error (OUT_OF_MEMORY and anything else: NO_MEMORY, as gearmand says). */
const SUBMIT_ERRORS: Partial<Record<SubmitRefusal, GearmanError>> = {
  DRAINING: 'DRAINING',
  JOB_TOO_BIG: 'TOO_LARGE',
  INTERNAL_ERROR: 'INTERNAL',
  QUEUE_FULL: 'QUEUE_FULL',
};
const UNKNOWN_JOB: JobStatus = { known: false, running: false, status: undefined };
const NO_BODY = Buffer.alloc(0);

/** STATUS_RES's known, running, numerator and denominator (digits; 0 when unknown). */
function statusFields(answer: JobStatus): (string | Buffer)[] {
  return [answer.known ? '1' : '0', answer.running ? '1' : '0', answer.status?.numerator ?? '0', answer.status?.denominator ?? '0'];
}

/** Whether `buf` holds the bytes of `name` at `at` (a short name: a loop beats a native compare). */
function bytesAt(buf: Buffer, at: number, name: Buffer): boolean {
  if (buf.length - at < name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[at + i] !== name[i]) return false;
  return true;
}

/**
 * The first NUL in buf[from, end), or -1. A loop: what it passes over (a function name, a unique
 * id, a handle) is short, and a native indexOf costs more to call than such a scan.
 */
function nulAt(buf: Buffer, from: number, end: number): number {
  for (let i = from; i < end; i++) if (buf[i] === 0) return i;
  return -1;
}

/** SUBMIT_JOB_EPOCH's time: decimal seconds since the epoch, in ms; null when it does not parse. */
function epochMs(text: Buffer): number | null {
  const s = text.toString('latin1');
  if (!/^\d{1,12}$/.test(s)) return null;
  return Number(s) * 1000;
}

function cronMs(fields: Buffer[], now: number): number | null {
  const time = parseCronTime(fields.map((f) => f.toString('latin1')));
  return time === null ? null : nextCronTime(time, now);
}
