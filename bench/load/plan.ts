/**
 * What the main thread tells a load worker to do, what the worker answers, and the shared memory
 * both read: the run phase, the current window and its pace, the jobs-in-system count (flow
 * control and draining), and per-worker counters. Counters live in shared memory so the main
 * thread reads them at the exact instants a window opens and closes, without a message round
 * trip through a busy worker.
 */

/**
 * A producer: pipelined puts of one body size, rotating over `tubes` tubes; as fast as its depth
 * (and the flow window) allows, or, in a window with a pace, its share of the pace by the clock.
 */
export interface ProducerSpec {
  role: 'producer';
  tubes: number;
  bodySize: number;
  /** Puts in flight. */
  depth: number;
  /** Put the send time in each body, for put-to-reserve latency. */
  stamp: boolean;
  /** Respect the shared jobs-in-system window (cycle scenarios). */
  flowControl: boolean;
}

/** A filler: exactly `jobs` pipelined puts into one tube, then idle. */
export interface FillerSpec {
  role: 'filler';
  bodySize: number;
  depth: number;
  jobs: number;
}

/** A consumer: watches `tubes` tubes, keeps `depth` reserves in flight and deletes each job. */
export interface ConsumerSpec {
  role: 'consumer';
  tubes: number;
  /** The body size every job must have. */
  bodySize: number;
  depth: number;
  /** Record put-to-reserve latency from the stamp in each body. */
  stamped: boolean;
  /**
   * Drain mode: `reserve-with-timeout 0`, and a TIMED_OUT stops this consumer (nothing refills
   * the tube), so no delete waits behind a reserve that would block forever.
   */
  drain: boolean;
}

/** One connection without pipelining: put, reserve, delete, each waiting for its reply. */
export interface LatencySpec {
  role: 'latency';
  bodySize: number;
}

/** One connection's job in a load. */
export type ConnectionSpec = ProducerSpec | FillerSpec | ConsumerSpec | LatencySpec;

/** Everything a worker thread needs, passed as workerData. */
export interface WorkerPlan {
  host: string;
  port: number;
  /** Connect over TLS, trusting this CA (PEM); null: plaintext. */
  tlsCa: string | null;
  /** This worker's slot in the shared counters. */
  workerIndex: number;
  shared: SharedArrayBuffer;
  connections: ConnectionSpec[];
  /** Jobs in the system (put minus deleted) above which flow-controlled producers pause. */
  flowWindow: number;
  /** Producer connections in the whole load, over all workers: each sends 1/producers of a pace. */
  producers: number;
  /**
   * Run a 1 ms tick that calls every producer's fill: needed when a window paces producers (the
   * clock, not a reply, says when a put is due) or follows a drain (nothing is in flight to wake
   * the producers up again).
   */
  tick: boolean;
  /** Latency samples kept per metric (reservoir sampling beyond it). */
  sampleCap: number;
  /** How the thread waits for replies (see worker.ts). */
  wait: WaitMode;
}

/**
 * How a worker thread waits for replies: `block` in epoll as usual (a wake-up per reply); `sleep`
 * `us` microseconds between loop turns so replies pile up and each read takes many (pipelined
 * loads); or `spin`, never sleeping, so no wake-up latency is added to a round trip (the
 * unpipelined latency load; it keeps one generator CPU busy).
 */
export type WaitMode = { kind: 'block' } | { kind: 'sleep'; us: number } | { kind: 'spin' };

/** Main thread to worker. */
export type MainMessage = { type: 'start' } | { type: 'stop' };

/** Latency samples (nanoseconds) of one window, keyed by metric. */
export type WindowSamples = Partial<Record<SampleMetric, Float64Array>>;

/** Worker to main thread. A report holds each window's samples, indexed by window. */
export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'error'; message: string }
  | { type: 'report'; samples: WindowSamples[] };

/** Latency series: put-to-reserve for cycles, and per-command round trips for one connection. */
export type SampleMetric = 'cycle' | 'put' | 'reserve' | 'delete';

/**
 * Run phases; the main thread moves them. Each window goes warmup, measure; a window that starts
 * with a drain goes drain first (producers stop, consumers go on until every job put is reserved).
 * Between windows the phase is warmup again, so samples never leak into the wrong window.
 */
export const Phase = { setup: 0, warmup: 1, measure: 2, drain: 3, stop: 4 } as const;

/** Per-worker counters. */
export const Counter = { inserted: 0, deleted: 1, triples: 2 } as const;
export type CounterName = keyof typeof Counter;

const PHASE_INDEX = 0;
const IN_SYSTEM_INDEX = 1;
const WINDOW_INDEX = 2;
/** Total put rate of all producers in jobs/s, 0 for unpaced. */
const PACE_INDEX = 3;
/** Bumped whenever producers must restart their pacing clocks. */
const PACE_EPOCH_INDEX = 4;
const WAITING_INDEX = 5;
/** Int32 slots per worker: 64 bytes, so workers never write the same cache line. */
const SLOT = 16;

/** Typed views over the shared buffer of one load. */
export class SharedState {
  readonly ints: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer) {
    this.ints = new Int32Array(buffer);
  }

  /** A fresh buffer for `workers` workers. */
  static create(workers: number): SharedState {
    return new SharedState(new SharedArrayBuffer((workers + 1) * SLOT * 4));
  }

  get phase(): number {
    return Atomics.load(this.ints, PHASE_INDEX);
  }

  set phase(p: number) {
    Atomics.store(this.ints, PHASE_INDEX, p);
  }

  /** The window being warmed up or measured (0 first). */
  get window(): number {
    return Atomics.load(this.ints, WINDOW_INDEX);
  }

  set window(w: number) {
    Atomics.store(this.ints, WINDOW_INDEX, w);
  }

  /** Total put rate of all producers (jobs/s), 0 when producers are not paced. */
  pace(): number {
    return Atomics.load(this.ints, PACE_INDEX);
  }

  /** Changes the pace; every producer restarts its pacing clock from now. */
  setPace(jobsPerSec: number): void {
    Atomics.store(this.ints, PACE_INDEX, Math.round(jobsPerSec));
    Atomics.add(this.ints, PACE_EPOCH_INDEX, 1);
  }

  /** Changes whenever the pace was set, so producers know to restart their clocks. */
  paceEpoch(): number {
    return Atomics.load(this.ints, PACE_EPOCH_INDEX);
  }

  /** Jobs put (sent, whether answered yet or not) by flow-controlled producers and not yet deleted. */
  inSystem(): number {
    return Atomics.load(this.ints, IN_SYSTEM_INDEX);
  }

  addInSystem(n: number): void {
    Atomics.add(this.ints, IN_SYSTEM_INDEX, n);
  }

  /**
   * Jobs put (sent) and not yet reserved, over all workers: 0 once a drain has emptied the
   * server's queues. (Not "not yet deleted": a consumer's deletes queue behind its blocked
   * reserves when no job is left, and go out only with the next jobs.)
   */
  waiting(): number {
    return Atomics.load(this.ints, WAITING_INDEX);
  }

  addWaiting(n: number): void {
    Atomics.add(this.ints, WAITING_INDEX, n);
  }

  /** Adds to this worker's counter (only the worker writes its slot). */
  add(worker: number, counter: CounterName, n: number): void {
    Atomics.add(this.ints, (worker + 1) * SLOT + Counter[counter], n);
  }

  /** A counter summed over `workers` workers. */
  total(workers: number, counter: CounterName): number {
    let sum = 0;
    for (let w = 0; w < workers; w++) sum += Atomics.load(this.ints, (w + 1) * SLOT + Counter[counter]);
    return sum;
  }
}
