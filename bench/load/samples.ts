/**
 * Latency samples: a bounded reservoir per worker (so a long, fast run cannot eat memory), merged
 * on the main thread, where percentiles are computed exactly from the sorted samples.
 */

/** Keeps a uniform random sample of at most `cap` values (Vitter's algorithm R). */
export class Reservoir {
  private readonly values: Float64Array;
  private seen = 0;

  constructor(private readonly cap: number) {
    this.values = new Float64Array(cap);
  }

  add(value: number): void {
    if (this.seen < this.cap) {
      this.values[this.seen++] = value;
      return;
    }
    this.seen++;
    const j = Math.floor(Math.random() * this.seen);
    if (j < this.cap) this.values[j] = value;
  }

  /** Values offered so far (kept or not). */
  get count(): number {
    return this.seen;
  }

  /** The kept values (a copy sized to fit, safe to transfer). */
  take(): Float64Array {
    return this.values.slice(0, Math.min(this.seen, this.cap));
  }
}

/** Joins several workers' samples into one array. */
export function mergeSamples(parts: readonly Float64Array[]): Float64Array {
  const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** p50, p99 and p99.9 in the samples' unit; NaN when there are none. */
export interface Percentiles {
  p50: number;
  p99: number;
  p999: number;
  count: number;
}

/** Nanoseconds as microseconds with one decimal. */
export function microseconds(ns: number): number {
  return Math.round(ns / 100) / 10;
}

/** Exact percentiles (nearest rank) of `samples`, which is sorted in place. */
export function percentiles(samples: Float64Array): Percentiles {
  samples.sort();
  const at = (q: number): number => (samples.length === 0 ? NaN : samples[Math.min(samples.length - 1, Math.ceil(q * samples.length) - 1)]!);
  return { p50: at(0.5), p99: at(0.99), p999: at(0.999), count: samples.length };
}
