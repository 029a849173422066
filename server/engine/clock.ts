/** The engine's only source of time: epoch milliseconds, possibly fractional. */
export interface Clock {
  now(): number;
}

/**
 * Wall-clock time at start, advancing monotonically with sub-millisecond resolution. The
 * resolution matters on the wire: like beanstalkd's nanosecond clock, a job reserved with TTR 10
 * shows `time-left: 9` straight away, because some time has always passed.
 */
const TIME_ORIGIN = performance.timeOrigin; // read once: the getter costs more than performance.now()
export const systemClock: Clock = { now: () => TIME_ORIGIN + performance.now() };

/** A clock that moves only when told to; for tests. */
export class FakeClock implements Clock {
  constructor(private ms = 1_700_000_000_000) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}
