/**
 * `npm run build:server && node dist/bench/admin-flood.js`: what one socket.io client that floods
 * the dashboard with view subscriptions does to the job port. Starts Beanpole on free ports of
 * 127.0.0.1, fills it with jobs (so job views watch real jobs), then measures put + reserve +
 * delete round trips on the beanstalk port from one connection: a quiet baseline, while a client
 * in a worker thread sends `--events` tube:view / job:view events, and for `--hold` seconds after
 * (sweeps keep running while the flooder stays connected). Prints p50 / p99 / max per phase, what
 * the flooder was answered, and the server's RSS before, at its peak and after. Ends by itself.
 */
import net from 'node:net';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { FloodMessage, FloodPlan, FloodResult } from './load/flood-worker.js';
import { percentiles } from './load/samples.js';
import { startTarget, type Target } from './targets.js';

const HELP = `Usage: node dist/bench/admin-flood.js [options]

  --events N      view events the flooder sends (default 200000)
  --sockets N     spread them over N socket.io clients (default 1)
  --per-second N  each socket sends N events a second (default 0: as fast as it can)
  --fill N        jobs put before the flood (default 100000)
  --baseline S    seconds measured before the flood (default 2)
  --hold S        seconds measured after the flood ends (default 5)
  --max-seconds S give up on the flood after S seconds (default 90)
  --help          this text
`;

interface Options {
  events: number;
  sockets: number;
  perSecond: number;
  fill: number;
  baselineSec: number;
  holdSec: number;
  maxSec: number;
}

/** One completed put + reserve + delete. */
interface Sample {
  /** When it completed (performance.now(), ms). */
  at: number;
  ms: number;
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(0)} MiB`;

function parseOptions(argv: string[]): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      events: { type: 'string', default: '200000' },
      sockets: { type: 'string', default: '1' },
      'per-second': { type: 'string', default: '0' },
      fill: { type: 'string', default: '100000' },
      baseline: { type: 'string', default: '2' },
      hold: { type: 'string', default: '5' },
      'max-seconds': { type: 'string', default: '90' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return null;
  const num = (name: string, text: string): number => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name}: not a number: ${text}`);
    return n;
  };
  return {
    events: num('events', values.events),
    sockets: Math.max(1, num('sockets', values.sockets)),
    perSecond: num('per-second', values['per-second']),
    fill: num('fill', values.fill),
    baselineSec: num('baseline', values.baseline),
    holdSec: num('hold', values.hold),
    maxSec: num('max-seconds', values['max-seconds']),
  };
}

/** A beanstalk connection that sends one command and waits for its whole reply. */
class Probe {
  private buf = '';
  private waiter: (() => void) | null = null;

  private constructor(private readonly sock: net.Socket) {
    sock.setEncoding('latin1');
    sock.setNoDelay(true);
    sock.on('data', (d: string) => {
      this.buf += d;
      this.waiter?.();
    });
  }

  static async connect(port: number): Promise<Probe> {
    const sock = net.connect({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    return new Probe(sock);
  }

  /** Sends `command` and resolves with the reply's first line once `extra` more bytes arrived too. */
  async call(command: string, extra = (line: string): number => (line.startsWith('RESERVED ') ? Number(line.split(' ')[2]) + 2 : 0)): Promise<string> {
    this.sock.write(command);
    for (;;) {
      const eol = this.buf.indexOf('\r\n');
      if (eol >= 0) {
        const line = this.buf.slice(0, eol);
        const end = eol + 2 + extra(line);
        if (this.buf.length >= end) {
          this.buf = this.buf.slice(end);
          return line;
        }
      }
      await new Promise<void>((r) => (this.waiter = r));
      this.waiter = null;
    }
  }

  /** Writes `count` copies of `command` at once and waits for `count` one-line replies. */
  async pipeline(command: string, count: number): Promise<void> {
    let lines = 0;
    this.sock.write(command.repeat(count));
    while (lines < count) {
      let eol: number;
      while ((eol = this.buf.indexOf('\r\n')) >= 0) {
        if (!this.buf.startsWith('INSERTED ')) throw new Error(`fill: ${JSON.stringify(this.buf.slice(0, eol))}`);
        this.buf = this.buf.slice(eol + 2);
        lines++;
      }
      if (lines < count) {
        await new Promise<void>((r) => (this.waiter = r));
        this.waiter = null;
      }
    }
  }

  close(): void {
    this.sock.destroy();
  }
}

async function expectReply(probe: Probe, command: string, want: RegExp): Promise<string> {
  const line = await probe.call(command);
  if (!want.test(line)) throw new Error(`${command.trim()}: ${line}`);
  return line;
}

/** put + reserve + delete in a loop until `stop()` says so; one sample per triple. */
async function measure(probe: Probe, samples: Sample[], stop: () => boolean): Promise<void> {
  await expectReply(probe, 'use probe\r\n', /^USING probe$/);
  await expectReply(probe, 'watch probe\r\n', /^WATCHING 2$/);
  await expectReply(probe, 'ignore default\r\n', /^WATCHING 1$/);
  while (!stop()) {
    const t0 = performance.now();
    await expectReply(probe, 'put 0 0 60 1\r\nx\r\n', /^INSERTED \d+$/);
    const id = (await expectReply(probe, 'reserve-with-timeout 5\r\n', /^RESERVED \d+ 1$/)).split(' ')[1]!;
    await expectReply(probe, `delete ${id}\r\n`, /^DELETED$/);
    const at = performance.now();
    samples.push({ at, ms: at - t0 });
  }
}

/** Starts the flooder thread; resolves once its client is connected. */
async function startFlooder(plan: FloodPlan): Promise<{ flood: () => Promise<FloodResult>; close: () => Promise<void> }> {
  const worker = new Worker(new URL('./load/flood-worker.js', import.meta.url), { workerData: plan });
  const exited = new Promise<void>((r) => worker.once('exit', () => r()));
  let onDone: (r: FloodResult) => void = () => {};
  await new Promise<void>((resolve, reject) => {
    worker.on('message', (m: FloodMessage) => {
      if (m.type === 'connected') resolve();
      else if (m.type === 'done') onDone(m.result);
      else reject(new Error(m.message));
    });
    worker.once('error', reject);
  });
  return {
    flood: () =>
      new Promise((resolve) => {
        onDone = resolve;
        worker.postMessage('flood');
      }),
    close: async () => {
      worker.postMessage('stop');
      const timer = setTimeout(() => void worker.terminate(), 2000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function phaseLine(name: string, samples: readonly Sample[], from: number, to: number): string {
  const ms = Float64Array.from(samples.filter((s) => s.at >= from && s.at < to).map((s) => s.ms));
  const p = percentiles(ms);
  const max = ms.length === 0 ? NaN : ms[ms.length - 1]!;
  const f = (x: number): string => (Number.isNaN(x) ? '-' : x.toFixed(2)).padStart(10);
  return `${name.padEnd(10)}${String(p.count).padStart(9)}${f(p.p50)}${f(p.p99)}${f(max)}`;
}

async function run(opts: Options, target: Target): Promise<void> {
  const filler = await Probe.connect(target.port);
  await expectReply(filler, 'use flood-fill\r\n', /^USING flood-fill$/);
  for (let left = opts.fill; left > 0; left -= 10_000) await filler.pipeline('put 0 0 600 1\r\nx\r\n', Math.min(left, 10_000));
  filler.close();

  const flooder = await startFlooder({
    url: `http://127.0.0.1:${target.adminPort}`,
    events: opts.events,
    sockets: opts.sockets,
    perSecond: opts.perSecond,
    ackTimeoutMs: opts.maxSec * 1000,
  });
  const probe = await Probe.connect(target.port);
  const samples: Sample[] = [];
  let stopping = false;
  const measuring = measure(probe, samples, () => stopping);
  let peakRss = target.rssBytes();
  const rssTimer = setInterval(() => (peakRss = Math.max(peakRss, target.rssBytes())), 100);

  const t0 = performance.now();
  await delay(opts.baselineSec * 1000);
  const rssBefore = target.rssBytes();
  const floodAt = performance.now();
  const flood = await flooder.flood();
  const floodEnd = performance.now();
  await delay(opts.holdSec * 1000);
  stopping = true;
  // The triple in flight still counts: a stalled one is the number that matters.
  await Promise.race([measuring, delay(opts.maxSec * 1000)]);
  const end = performance.now();
  clearInterval(rssTimer);
  const rssAfter = target.rssBytes();
  await flooder.close();
  probe.close();

  console.log(`put + reserve + delete round trips on the job port (ms), ${opts.fill} jobs in the server:`);
  console.log(`${'phase'.padEnd(10)}${'triples'.padStart(9)}${'p50'.padStart(10)}${'p99'.padStart(10)}${'max'.padStart(10)}`);
  console.log(phaseLine('baseline', samples, t0, floodAt));
  console.log(phaseLine('flood', samples, floodAt, floodEnd));
  console.log(phaseLine('after', samples, floodEnd, end + 1));
  console.log(phaseLine('all', samples, floodAt, end + 1));
  const pace = opts.perSecond === 0 ? 'unpaced' : `${opts.perSecond}/s per socket`;
  console.log(
    `flooder (${opts.sockets} socket${opts.sockets === 1 ? '' : 's'}, ${pace}): sent ${flood.sent} of ${opts.events} events in ${(flood.ms / 1000).toFixed(1)} s; ` +
      `${flood.acked} acknowledged, ${flood.refused} refused; ${flood.disconnected} socket(s) disconnected by the server`,
  );
  for (const [error, n] of Object.entries(flood.errors)) console.log(`  refused ${n}x: ${error}`);
  console.log(`server RSS: before the flood ${mib(rssBefore)}, peak ${mib(peakRss)}, after ${mib(rssAfter)}`);
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts === null) {
    process.stdout.write(HELP);
    return;
  }
  const target = await startTarget({ kind: 'beanpole', cpus: null, binlog: null, admin: true, cpuProfile: null, maxJobSize: 65535 });
  try {
    await run(opts, target);
  } finally {
    await target.stop();
  }
}

await main();
