import { Phase, type SampleMetric, SharedState, type WindowSamples, type WorkerPlan } from './plan.js';
import { Reservoir } from './samples.js';

/** A role that flow control can pause, or a tick wake; `fill` tries to send again. */
export interface Refillable {
  fill(): void;
}

/** How often paused producers look at the shared window when no local delete wakes them. */
const FLOW_POLL_MS = 1;

/**
 * What the roles of one worker share: the shared counters, latency reservoirs (one set per
 * window), the flow-control gate and the producers to wake on a tick. (Roles report a broken
 * server by throwing InvalidReplyError; their connection catches it.)
 */
export class RoleContext {
  /** Reservoirs by window index, then by metric. */
  private readonly reservoirs: (Map<SampleMetric, Reservoir> | undefined)[] = [];
  private readonly paused = new Set<Refillable>();
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly ticked = new Set<Refillable>();

  /** This worker's slot in the shared counters. */
  readonly worker: number;
  /** Jobs in the system above which flow-controlled producers pause. */
  readonly flowWindow: number;
  private readonly sampleCap: number;
  /** Producers in the whole load: each sends 1/producers of a pace. */
  private readonly producers: number;
  private readonly ticking: boolean;

  constructor(
    readonly state: SharedState,
    plan: Pick<WorkerPlan, 'workerIndex' | 'flowWindow' | 'sampleCap' | 'producers' | 'tick'>,
  ) {
    this.worker = plan.workerIndex;
    this.flowWindow = plan.flowWindow;
    this.sampleCap = plan.sampleCap;
    this.producers = Math.max(1, plan.producers);
    this.ticking = plan.tick;
  }

  /** True while samples count (a measurement window). */
  measuring(): boolean {
    return this.state.phase === Phase.measure;
  }

  /** True while producers may put (not during setup, a drain, or after the load). */
  sending(): boolean {
    const p = this.state.phase;
    return p === Phase.warmup || p === Phase.measure;
  }

  /** True once the load is over: roles send nothing more. */
  stopping(): boolean {
    return this.state.phase >= Phase.stop;
  }

  /** One producer's put rate (jobs/s) in the current window, 0 when unpaced. */
  paceShare(): number {
    return this.state.pace() / this.producers;
  }

  /** Records one latency sample in nanoseconds, for the current window. */
  sample(metric: SampleMetric, ns: number): void {
    const w = this.state.window;
    let byMetric = this.reservoirs[w];
    if (byMetric === undefined) {
      byMetric = new Map();
      this.reservoirs[w] = byMetric;
    }
    let r = byMetric.get(metric);
    if (r === undefined) {
      r = new Reservoir(this.sampleCap);
      byMetric.set(metric, r);
    }
    r.add(ns);
  }

  /** The kept samples per window and metric, ready to transfer (windows without samples are empty). */
  takeSamples(): WindowSamples[] {
    return Array.from(this.reservoirs, (byMetric) => {
      const out: WindowSamples = {};
      for (const [metric, r] of byMetric ?? []) out[metric] = r.take();
      return out;
    });
  }

  /**
   * A producer found the window full. It is retried when a consumer of this worker deletes jobs,
   * and every millisecond for deletes made by other workers (no busy loop on setImmediate, which
   * would steal the CPU from an unpinned server).
   */
  pause(p: Refillable): void {
    this.paused.add(p);
    this.pollTimer ??= setInterval(() => this.resume(), FLOW_POLL_MS);
  }

  /** Jobs left the system: paused producers may send again. */
  resume(): void {
    if (this.paused.size > 0) {
      const waiting = [...this.paused];
      this.paused.clear();
      for (const p of waiting) p.fill();
    }
    if (this.paused.size === 0 && this.pollTimer !== null) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
  }

  /**
   * Registers a producer for the worker's ticks (when the plan ticks, else does nothing): a paced
   * producer's puts come due by the clock, and after a drain no reply is left in flight to wake
   * a producer up. See `tick` and `turn`.
   */
  onTick(p: Refillable): void {
    if (this.ticking) this.ticked.add(p);
  }

  /** The worker's 1 ms timer: registered producers send what they may. */
  tick(): void {
    for (const p of this.ticked) p.fill();
  }

  /**
   * One event-loop turn of a polling worker (every few µs when it spins, as it does in paced
   * windows): in a paced window, registered producers send what has come due. Far finer than
   * the 1 ms timer, so at 10,000 jobs/s a server gets a put or two at a time rather than bursts
   * of ten, which would queue behind each other and show up as latency.
   */
  turn(): void {
    if (this.state.pace() > 0) for (const p of this.ticked) p.fill();
  }

  /** Stops the flow-control timer and forgets every producer. */
  close(): void {
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.pollTimer = null;
    this.paused.clear();
    this.ticked.clear();
  }
}
