/**
 * The floor of a Gearman job server in Node, for `gmbench` (../shared/tools/gmbench): the least
 * work that still does what each gmbench scenario checks (background and foreground submits,
 * one FIFO queue per function, GRAB_JOB_UNIQ, PRE_SLEEP and NOOP, WORK_COMPLETE sent on to the
 * submitting client, ECHO, and the `status` line gmbench verifies with), over the same socket
 * path as Beanpole (net, the shared read buffer, a connection's replies to one read in one
 * write, replies to other connections at the end of the tick). No priorities, unique ids,
 * limits, persistence, dashboard or bad-input handling: it trusts its client. Whatever Beanpole
 * does per job comes on top of what this measures (BENCHMARKS.md, "Gearman: Node's floor").
 *
 * Usage (as `npm run bench -- --only gearman-... --node-floor` starts it):
 *   node dist/bench/gearman-floor-server.js -l HOST -p PORT --gearman-port GPORT [ignored flags]
 * PORT only accepts connections (the harness checks it is up); GPORT speaks Gearman.
 */
import net from 'node:net';
import { ReplyBuffer } from '../server/protocol/reply-buffer.js';
import { readThroughSharedBuffer } from '../server/protocol/shared-read-buffer.js';

const HEADER = 12;
const T = { CAN_DO: 1, PRE_SLEEP: 4, NOOP: 6, SUBMIT_JOB: 7, JOB_CREATED: 8, NO_JOB: 10, WORK_COMPLETE: 13, ECHO_REQ: 16, ECHO_RES: 17, SUBMIT_JOB_BG: 18, GRAB_JOB_UNIQ: 30, JOB_ASSIGN_UNIQ: 31 } as const;

interface Job {
  id: number;
  fn: string;
  /** `unique NUL data`. */
  body: Buffer;
  /** The submitting client of a foreground job. */
  client: Conn | null;
}

/** A FIFO of jobs: an array with a moving head, compacted now and then. */
class Queue {
  items: (Job | undefined)[] = [];
  head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  push(job: Job): void {
    this.items.push(job);
  }
  shift(): Job | undefined {
    if (this.head >= this.items.length) return undefined;
    const job = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return job;
  }
}

const queues = new Map<string, Queue>();
const running = new Map<number, Job>();
const sleepers = new Set<Conn>();
let nextId = 1;
const PREFIX = Buffer.from('H:floor:');

function queueOf(name: string): Queue {
  let q = queues.get(name);
  if (q === undefined) queues.set(name, (q = new Queue()));
  return q;
}

/** Always durable: the floor keeps nothing on disk. */
const NO_JOURNAL = { appendedSeq: 0, durableSeq: 0, whenDurable: (_seq: number, fn: () => void): void => fn() };
const NOOP_PACKET = Buffer.from([0, 0x52, 0x45, 0x53, 0, 0, 0, T.NOOP, 0, 0, 0, 0]);
const NO_JOB_PACKET = Buffer.from([0, 0x52, 0x45, 0x53, 0, 0, 0, T.NO_JOB, 0, 0, 0, 0]);

/**
 * A connection: parses whole packets, keeps a partial one, and writes its replies through
 * Beanpole's own reply slab (server/protocol/reply-buffer.ts), one write per read.
 */
class Conn {
  private rest: Buffer | null = null;
  private readonly out: ReplyBuffer;
  private flushQueued = false;
  private handling = false;
  private readonly functions: Queue[] = [];
  private lastFn: Buffer | null = null;
  private lastName = '';
  private lastQueue: Queue | null = null;

  constructor(readonly socket: net.Socket) {
    this.out = new ReplyBuffer((bytes) => {
      socket.write(bytes);
      return socket.writableLength === 0;
    }, NO_JOURNAL);
  }

  read(chunk: Buffer): void {
    let buf = chunk;
    if (this.rest !== null) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = null;
    }
    this.handling = true;
    let at = 0;
    while (at < buf.length) {
      if (buf[at] !== 0) {
        const lf = buf.indexOf(10, at);
        if (lf < 0) break;
        this.admin(buf.toString('latin1', at, lf).trim());
        at = lf + 1;
        continue;
      }
      if (buf.length - at < HEADER) break;
      const size = buf.readUInt32BE(at + 8);
      if (buf.length - at - HEADER < size) break;
      this.packet(buf.readUInt32BE(at + 4), buf, at + HEADER, at + HEADER + size);
      at += HEADER + size;
    }
    if (at < buf.length) this.rest = Buffer.from(buf.subarray(at));
    this.handling = false;
    this.out.flush();
  }

  private packet(type: number, buf: Buffer, start: number, end: number): void {
    switch (type) {
      case T.SUBMIT_JOB_BG:
      case T.SUBMIT_JOB: {
        const fnEnd = buf.indexOf(0, start);
        this.fnBytes(buf, start, fnEnd);
        // The job keeps `unique NUL data`, as JOB_ASSIGN_UNIQ lays them out after the function.
        const job: Job = { id: nextId++, fn: this.lastName, body: Buffer.from(buf.subarray(fnEnd + 1, end)), client: type === T.SUBMIT_JOB ? this : null };
        this.lastQueue!.push(job);
        this.out.handlePacket(T.JOB_CREATED, PREFIX, job.id);
        this.flushSoon();
        for (const sleeper of sleepers) sleeper.wake();
        sleepers.clear();
        return;
      }
      case T.GRAB_JOB_UNIQ: {
        let job: Job | undefined;
        for (const q of this.functions) if ((job = q.shift()) !== undefined) break;
        if (job === undefined) return this.send(NO_JOB_PACKET);
        running.set(job.id, job);
        this.out.assignPacket(T.JOB_ASSIGN_UNIQ, PREFIX, job.id, job.fn, job.body, 0, job.body.length);
        return this.flushSoon();
      }
      case T.WORK_COMPLETE: {
        const handleEnd = buf.indexOf(0, start);
        let id = 0;
        for (let i = start + PREFIX.length; i < handleEnd; i++) id = id * 10 + buf[i]! - 48;
        const job = running.get(id);
        if (job === undefined) return;
        running.delete(id);
        if (job.client !== null) job.client.forward(buf.subarray(start, end));
        return;
      }
      case T.PRE_SLEEP:
        for (const q of this.functions) if (q.size > 0) return this.send(NOOP_PACKET);
        sleepers.add(this);
        return;
      case T.CAN_DO:
        this.functions.push(queueOf(buf.toString('latin1', start, end)));
        return;
      case T.ECHO_REQ:
        this.out.dataPacket(T.ECHO_RES, buf, start, end);
        return this.flushSoon();
      default:
        return;
    }
  }

  private fnBytes(buf: Buffer, start: number, end: number): void {
    const last = this.lastFn;
    if (last !== null && last.length === end - start && buf.compare(last, 0, last.length, start, end) === 0) return;
    this.lastFn = Buffer.from(buf.subarray(start, end));
    this.lastName = this.lastFn.toString('latin1');
    this.lastQueue = queueOf(this.lastName);
  }

  private admin(line: string): void {
    if (line !== 'status') return;
    const rows = [...queues].map(([name, q]) => `${name}\t${q.size}\t0\t0\n`).join('');
    this.send(Buffer.from(`${rows}.\n`, 'latin1'));
  }

  wake(): void {
    this.send(NOOP_PACKET);
  }

  /** A worker's WORK_COMPLETE (`data`: handle NUL result), sent on to this client. */
  forward(data: Buffer): void {
    this.out.dataPacket(T.WORK_COMPLETE, data, 0, data.length);
    this.flushSoon();
  }

  private send(bytes: Buffer): void {
    this.out.bytes(bytes);
    this.flushSoon();
  }

  /** Replies to this connection's own input leave at the end of it; others at the end of the tick. */
  private flushSoon(): void {
    if (this.handling || this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(this.flushQueued_);
  }

  private readonly flushQueued_ = (): void => {
    this.flushQueued = false;
    this.out.flush();
  };
}

function flag(args: string[], name: string, fallback?: string): string {
  const at = args.indexOf(name);
  if (at >= 0 && at + 1 < args.length) return args[at + 1]!;
  if (fallback !== undefined) return fallback;
  throw new Error(`gearman-floor-server: ${name} is required`);
}

const args = process.argv.slice(2);
const host = flag(args, '-l', '127.0.0.1');
const beanstalkPort = flag(args, '-p', '');
if (beanstalkPort !== '') net.createServer((socket) => socket.destroy()).listen(Number(beanstalkPort), host);
const server = net.createServer({ noDelay: true }, (socket) => {
  const conn = new Conn(socket);
  socket.on('error', () => undefined);
  socket.on('close', () => sleepers.delete(conn));
  if (!readThroughSharedBuffer(socket, (chunk) => conn.read(chunk))) socket.on('data', (chunk: Buffer) => conn.read(chunk));
});
server.listen(Number(flag(args, '--gearman-port')), host);
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
