/**
 * The Gearman load generator: raw binary packets over TCP from this thread, with every reply
 * checked (a server that answers wrongly fails the run instead of scoring). Roles: submitters
 * (background or foreground jobs, pipelined), workers (GRAB_JOB_UNIQ, WORK_COMPLETE, and
 * PRE_SLEEP/NOOP when the queue is empty, as real workers do), and an unpipelined echo client.
 * It counts completed units in a measured window after a warm-up, and records round-trip
 * latencies where a scenario asks for them.
 */
import net from 'node:net';
import { encodePacket } from '../../server/protocol/gearman/packets.js';
import { Reservoir } from './samples.js';

export const GEARMAN = {
  CAN_DO: 1,
  PRE_SLEEP: 4,
  NOOP: 6,
  SUBMIT_JOB: 7,
  JOB_CREATED: 8,
  NO_JOB: 10,
  WORK_COMPLETE: 13,
  ECHO_REQ: 16,
  ECHO_RES: 17,
  SUBMIT_JOB_BG: 18,
  ERROR: 19,
  GRAB_JOB_UNIQ: 30,
  JOB_ASSIGN_UNIQ: 31,
} as const;

export const FUNCTION_NAME = 'bench';
/** Latency samples kept per window (reservoir sampling beyond it): enough for a stable p99.9. */
const SAMPLE_CAP = 200_000;

/** A request packet. */
export function packet(type: number, ...args: (string | Buffer)[]): Buffer {
  return encodePacket(type, args, 'REQ');
}

export class GearmanReplyError extends Error {
  override name = 'GearmanReplyError';
}

/** Called per response packet; `data` is valid only during the call. */
type PacketHandler = (type: number, buf: Buffer, start: number, end: number) => void;

/** One connection: writes requests, cuts the response stream into packets. */
export class GearmanConnection {
  readonly socket: net.Socket;
  private pending: Buffer = Buffer.alloc(0);
  handler: PacketHandler = () => undefined;

  private constructor(socket: net.Socket, onError: (err: Error) => void) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      try {
        this.read(chunk);
      } catch (err) {
        onError(err as Error);
      }
    });
    socket.on('error', onError);
  }

  static open(host: string, port: number, onError: (err: Error) => void): Promise<GearmanConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port, noDelay: true }, () => resolve(new GearmanConnection(socket, onError)));
      socket.once('error', reject);
    });
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    const buf = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let at = 0;
    while (buf.length - at >= 12) {
      if (buf[at] !== 0 || buf[at + 1] !== 0x52 || buf[at + 2] !== 0x45 || buf[at + 3] !== 0x53) {
        throw new GearmanReplyError('a response without the \\0RES magic');
      }
      const size = buf.readUInt32BE(at + 8);
      if (buf.length - at < 12 + size) break;
      this.handler(buf.readUInt32BE(at + 4), buf, at + 12, at + 12 + size);
      at += 12 + size;
    }
    this.pending = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
  }
}

/** What one measured window saw. */
export interface GearmanWindow {
  count: number;
  elapsedSec: number;
  /** Round trips in ns, when the load measures them (else empty). */
  latencies: Float64Array;
}

/** Shared state of one load: the phase, the counters and the jobs in the system (flow control). */
export class LoadState {
  measuring = false;
  stopped = false;
  count = 0;
  inSystem = 0;
  /** Round trips in ns (a bounded uniform sample). */
  readonly latencies = new Reservoir(SAMPLE_CAP);
  failure: Error | null = null;

  fail = (err: Error): void => {
    this.failure ??= err;
    this.stopped = true;
  };

  /** Counts a unit of work done in the measured window. */
  done(latencyNs = -1): void {
    if (!this.measuring) return;
    this.count++;
    if (latencyNs >= 0) this.latencies.add(latencyNs);
  }
}

/** A submitter: keeps `depth` submits in flight (background) until the flow window is full. */
export function submitter(conn: GearmanConnection, state: LoadState, opts: { depth: number; body: Buffer; background: boolean; flowWindow: number }): () => void {
  const request = packet(opts.background ? GEARMAN.SUBMIT_JOB_BG : GEARMAN.SUBMIT_JOB, FUNCTION_NAME, '', opts.body);
  let inFlight = 0;
  // Foreground round trips: send times by submit order, then by handle once JOB_CREATED names it.
  const sentAt: bigint[] = [];
  const byHandle = new Map<string, bigint>();
  const fill = (): void => {
    while (!state.stopped && inFlight < opts.depth && state.inSystem < opts.flowWindow) {
      inFlight++;
      state.inSystem++;
      if (!opts.background) sentAt.push(process.hrtime.bigint());
      conn.write(request);
    }
  };
  conn.handler = (type, buf, start, end) => {
    if (type === GEARMAN.JOB_CREATED) {
      if (opts.background) {
        inFlight--;
        state.done();
        fill();
      } else {
        byHandle.set(buf.toString('latin1', start, end), sentAt.shift()!);
      }
      return;
    }
    if (type === GEARMAN.WORK_COMPLETE && !opts.background) {
      const nul = buf.indexOf(0, start);
      const handle = buf.toString('latin1', start, nul < 0 || nul > end ? end : nul);
      const t0 = byHandle.get(handle);
      if (t0 === undefined) throw new GearmanReplyError(`WORK_COMPLETE for ${handle}, which this client did not submit`);
      byHandle.delete(handle);
      inFlight--;
      state.done(Number(process.hrtime.bigint() - t0));
      fill();
      return;
    }
    throw new GearmanReplyError(`unexpected packet type ${type} for a submitter`);
  };
  return fill;
}

/** A worker: `depth` grabs in flight; completes each job at once; sleeps (PRE_SLEEP) when told NO_JOB. */
export function worker(conn: GearmanConnection, state: LoadState, opts: { depth: number; countCompletions: boolean }): void {
  const grab = packet(GEARMAN.GRAB_JOB_UNIQ);
  const sleep = packet(GEARMAN.PRE_SLEEP);
  let grabs = 0;
  let sleeping = false;
  conn.write(packet(GEARMAN.CAN_DO, FUNCTION_NAME));
  const more = (): void => {
    while (!state.stopped && !sleeping && grabs < opts.depth) {
      grabs++;
      conn.write(grab);
    }
  };
  conn.handler = (type, buf, start, end) => {
    switch (type) {
      case GEARMAN.JOB_ASSIGN_UNIQ: {
        grabs--;
        const nul = buf.indexOf(0, start);
        if (nul < 0 || nul > end) throw new GearmanReplyError('JOB_ASSIGN_UNIQ without a handle');
        conn.write(packet(GEARMAN.WORK_COMPLETE, buf.subarray(start, nul), ''));
        state.inSystem--;
        if (opts.countCompletions) state.done();
        more();
        return;
      }
      case GEARMAN.NO_JOB:
        grabs--;
        if (grabs === 0 && !sleeping) {
          sleeping = true;
          conn.write(sleep);
        }
        return;
      case GEARMAN.NOOP:
        if (sleeping) {
          sleeping = false;
          more();
        }
        return;
      default:
        throw new GearmanReplyError(`unexpected packet type ${type} for a worker`);
    }
  };
  more();
}

/** One connection, one ECHO_REQ at a time: the server's round trip. */
export function echoClient(conn: GearmanConnection, state: LoadState, body: Buffer): () => void {
  const request = packet(GEARMAN.ECHO_REQ, body);
  let t0 = 0n;
  const send = (): void => {
    if (state.stopped) return;
    t0 = process.hrtime.bigint();
    conn.write(request);
  };
  conn.handler = (type, _buf, start, end) => {
    if (type !== GEARMAN.ECHO_RES || end - start !== body.length) throw new GearmanReplyError(`unexpected packet type ${type} for echo`);
    state.done(Number(process.hrtime.bigint() - t0));
    send();
  };
  return send;
}

/** Runs a warm-up, then one measured window; returns what the window saw. */
export async function measureWindow(state: LoadState, warmupMs: number, windowMs: number, stopEarly?: () => boolean): Promise<GearmanWindow> {
  await new Promise((r) => setTimeout(r, warmupMs));
  if (state.failure !== null) throw state.failure;
  state.measuring = true;
  const started = performance.now();
  while (performance.now() - started < windowMs && !state.stopped && !(stopEarly?.() ?? false)) {
    await new Promise((r) => setTimeout(r, 10));
  }
  state.measuring = false;
  const elapsedSec = (performance.now() - started) / 1000;
  state.stopped = true;
  if (state.failure !== null) throw state.failure;
  return { count: state.count, elapsedSec, latencies: state.latencies.take() };
}
