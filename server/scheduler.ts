import type { Engine } from './engine/engine.js';

/** Longest single wait, so a far deadline never overflows setTimeout. */
const MAX_WAIT_MS = 60 * 60 * 1000;
/** Units of timed work (jobs coming due, expiries) per turn of the event loop. */
const TICK_BUDGET = 1024;

/**
 * The server's only timer: sleeps until the engine's next deadline, then lets the engine do
 * what is due in bounded slices, yielding to I/O between slices so a million jobs coming due
 * in the same second never freeze other clients.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private armedFor = Number.POSITIVE_INFINITY;
  private sliceQueued = false;
  private stopped = false;

  constructor(
    private readonly engine: Engine,
    private readonly now: () => number = () => engine.now(),
  ) {}

  /** Re-arms the timer if the engine's next deadline moved earlier. Cheap; call after any change. */
  readonly poke = (): void => {
    if (this.stopped || this.sliceQueued) return;
    const next = this.engine.nextDeadline();
    if (next === undefined || next >= this.armedFor) return;
    if (this.timer !== null) clearTimeout(this.timer);
    const wait = Math.min(Math.max(0, next - this.now()), MAX_WAIT_MS);
    this.armedFor = next;
    this.timer = setTimeout(this.fire, wait);
  };

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private readonly fire = (): void => {
    this.timer = null;
    this.armedFor = Number.POSITIVE_INFINITY;
    this.slice();
  };

  private slice(): void {
    if (this.stopped) return;
    const more = this.engine.tick(this.now(), TICK_BUDGET);
    if (more) {
      this.sliceQueued = true;
      setImmediate(() => {
        this.sliceQueued = false;
        this.slice();
      });
    } else {
      this.poke();
    }
  }
}
