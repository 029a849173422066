/**
 * The main thread's side of a load: spreads connections over worker threads, waits until every
 * connection is set up, then runs one or more windows over the same connections, each with its
 * warm-up (reading the shared counters at the exact instants a window opens and closes), and
 * collects the samples, window by window. Every load is bounded: it ends when its last window
 * closes, when its fixed work is done, or on the first failure; a drain has a time limit too.
 */
import { Worker } from 'node:worker_threads';
import { Phase, SharedState, type ConnectionSpec, type CounterName, type WaitMode, type WindowSamples, type WorkerMessage, type WorkerPlan } from './plan.js';
import { mergeSamples } from './samples.js';

/**
 * One measurement window of a load. Windows run one after the other on the same connections; in
 * order: the drain (when asked), `before`, the warm-up, the window itself.
 */
export interface WindowSpec {
  /** Load runs this long before the window opens (0 for fixed work measured from the start). */
  warmupMs: number;
  /** The window; with `until`, the longest it may take. */
  windowMs: number;
  /** Fixed work: the window closes as soon as this counter, counted from the load's start, reaches `total`. */
  until?: { counter: CounterName; total: number };
  /**
   * Total put rate of all producers in jobs/s, from this window's warm-up on: each producer sends
   * its share by the clock. Absent: as fast as depth and the flow window allow.
   */
  pace?: number;
  /**
   * First stop putting and wait until consumers have reserved every job put, so the window starts
   * with empty queues. (Some deletes may still wait behind a consumer's blocked reserve; they go
   * out with the next jobs.)
   */
  drain?: boolean;
  /** Runs before the warm-up while the load goes on (e.g. opens dashboards); awaited. */
  before?: () => Promise<void>;
}

/** One load against one server. */
export interface LoadOptions {
  host: string;
  port: number;
  /** Connect over TLS, trusting this CA (PEM); absent or null: plaintext. */
  tlsCa?: string | null;
  connections: ConnectionSpec[];
  /** Worker threads (at most one per connection). */
  workers: number;
  /** At least one. */
  windows: WindowSpec[];
  /** Jobs in the system above which flow-controlled producers pause. */
  flowWindow?: number;
  /** Latency samples kept per worker, window and metric. */
  sampleCap?: number;
  /** How workers wait for replies (default: block). */
  wait?: WaitMode;
  /** Longest wait for every connection's setup (10,000 watches take a while). */
  setupTimeoutMs?: number;
  /** Called right when window `index` opens and closes, e.g. to read the server's CPU time. */
  onWindowOpen?: (index: number) => void;
  onWindowClose?: (index: number) => void;
}

/** What happened inside one measurement window. */
export interface WindowResult {
  /** Length of the window in seconds. */
  elapsedSec: number;
  /** Counter increments inside the window. */
  counts: Record<CounterName, number>;
  /** Latency samples (ns) recorded inside the window, all workers merged. */
  samples: WindowSamples;
  /** For fixed work: whether it finished before the window's limit. */
  finished: boolean;
  /** How long the drain before it took (ms), 0 without one. */
  drainMs: number;
}

/** What a load measured: one result per window, in order. */
export interface LoadResult {
  windows: WindowResult[];
}

/** A load that could not be measured: a broken reply, a closed connection, a timeout. */
export class LoadError extends Error {
  override name = 'LoadError';
}

const COUNTERS: readonly CounterName[] = ['inserted', 'deleted', 'triples'];
const POLL_MS = 2;
const REPORT_TIMEOUT_MS = 10_000;
/** A drain is a few thousand jobs at most (the flow window); a server that cannot do it in this long fails. */
const DRAIN_TIMEOUT_MS = 60_000;

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readCounts(state: SharedState, workers: number): Record<CounterName, number> {
  const out = { inserted: 0, deleted: 0, triples: 0 };
  for (const c of COUNTERS) out[c] = state.total(workers, c);
  return out;
}

/** Runs one bounded load; throws LoadError on any failure (the workers are gone either way). */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  if (opts.windows.length === 0) throw new Error('runLoad: no window');
  const workerCount = Math.max(1, Math.min(opts.workers, opts.connections.length));
  const state = SharedState.create(workerCount);
  // Round-robin, so producers and consumers listed alternately share every worker (and a
  // consumer's deletes can wake its neighbouring producers without waiting for a timer).
  const shares: ConnectionSpec[][] = Array.from({ length: workerCount }, () => []);
  opts.connections.forEach((c, i) => shares[i % workerCount]!.push(c));
  const producers = opts.connections.filter((c) => c.role === 'producer').length;
  const tick = opts.windows.some((w, i) => (w.pace ?? 0) > 0 || (i > 0 && w.drain === true));

  let failure: string | null = null;
  const fail = (message: string): void => {
    failure ??= message;
  };
  let ready = 0;
  const reports: WindowSamples[][] = [];
  const workers = shares.map((connections, workerIndex) => {
    const plan: WorkerPlan = {
      host: opts.host,
      port: opts.port,
      tlsCa: opts.tlsCa ?? null,
      workerIndex,
      shared: state.buffer,
      connections,
      flowWindow: opts.flowWindow ?? 2048,
      producers,
      tick,
      sampleCap: opts.sampleCap ?? 200_000,
      wait: opts.wait ?? { kind: 'block' },
    };
    const w = new Worker(new URL('./worker.js', import.meta.url), { workerData: plan });
    w.on('message', (m: WorkerMessage) => {
      if (m.type === 'ready') ready++;
      else if (m.type === 'error') fail(m.message);
      else reports.push(m.samples);
    });
    w.on('error', (err) => fail(`load worker crashed: ${err.stack ?? err.message}`));
    return w;
  });
  const exited = workers.map((w) => new Promise<void>((r) => w.once('exit', () => r())));
  const check = (): void => {
    if (failure !== null) throw new LoadError(failure);
  };
  /** Waits `ms`, waking every 50 ms to notice a failure. */
  const sleep = async (ms: number): Promise<void> => {
    const end = performance.now() + ms;
    while (failure === null && performance.now() < end) await delay(Math.min(50, Math.max(1, end - performance.now())));
    check();
  };

  try {
    // Setup: every connection connected and answered its setup commands.
    const setupDeadline = Date.now() + (opts.setupTimeoutMs ?? 60_000);
    while (ready < workerCount && failure === null) {
      if (Date.now() > setupDeadline) fail(`connections not set up within ${opts.setupTimeoutMs ?? 60_000} ms`);
      else await delay(POLL_MS);
    }
    check();

    const measured: Omit<WindowResult, 'samples'>[] = [];
    for (const [index, w] of opts.windows.entries()) {
      let drainMs = 0;
      if (w.drain === true && index > 0) {
        const t = performance.now();
        state.phase = Phase.drain;
        while (failure === null && state.waiting() > 0) {
          if (performance.now() - t > DRAIN_TIMEOUT_MS) fail(`${state.waiting()} jobs still not reserved after a ${DRAIN_TIMEOUT_MS / 1000} s drain`);
          else await delay(POLL_MS);
        }
        check();
        drainMs = Math.round(performance.now() - t);
      }
      // The window and pace first, then the phase: producers resume with the new pace.
      state.window = index;
      state.setPace(w.pace ?? 0);
      state.phase = w.warmupMs > 0 || w.before !== undefined ? Phase.warmup : Phase.measure;
      if (index === 0) for (const worker of workers) worker.postMessage({ type: 'start' });
      if (w.before !== undefined) {
        await w.before();
        check();
      }
      await sleep(w.warmupMs);

      state.phase = Phase.measure;
      const c0 = readCounts(state, workerCount);
      const t0 = performance.now();
      opts.onWindowOpen?.(index);
      const windowEnd = t0 + w.windowMs;
      const until = w.until;
      const done = (): boolean => until !== undefined && state.total(workerCount, until.counter) >= until.total;
      let finished = done();
      while (failure === null && !finished && performance.now() < windowEnd) {
        await delay(until !== undefined ? POLL_MS : Math.min(50, Math.max(1, windowEnd - performance.now())));
        finished = done();
      }
      const c1 = readCounts(state, workerCount);
      const t1 = performance.now();
      opts.onWindowClose?.(index);
      // Out of the measure phase at once: no sample may land in this window after it closed.
      state.phase = index + 1 < opts.windows.length ? Phase.warmup : Phase.stop;
      check();
      const counts = { inserted: c1.inserted - c0.inserted, deleted: c1.deleted - c0.deleted, triples: c1.triples - c0.triples };
      measured.push({ elapsedSec: (t1 - t0) / 1000, counts, finished, drainMs });
    }
    state.phase = Phase.stop;

    for (const w of workers) w.postMessage({ type: 'stop' });
    const reportDeadline = Date.now() + REPORT_TIMEOUT_MS;
    while (reports.length < workerCount && failure === null && Date.now() < reportDeadline) await delay(POLL_MS);
    check();
    if (reports.length < workerCount) throw new LoadError('load workers did not report their samples');

    return {
      windows: measured.map((m, index) => {
        const samples: WindowSamples = {};
        for (const metric of ['cycle', 'put', 'reserve', 'delete'] as const) {
          const parts = reports.flatMap((r) => {
            const s = r[index]?.[metric];
            return s === undefined ? [] : [s];
          });
          if (parts.length > 0) samples[metric] = mergeSamples(parts);
        }
        return { ...m, samples };
      }),
    };
  } finally {
    state.phase = Phase.stop;
    await Promise.all(workers.map((w) => w.terminate()));
    await Promise.all(exited);
  }
}
