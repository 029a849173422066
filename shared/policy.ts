/**
 * A tube's flow policy: limits an operator sets on a tube (the dashboard, the API, --policies)
 * that clients meet only when they reach one. Every field is optional in effect: null is "no
 * limit of this kind". One shape from the policies file and the API to the engine, the binlog,
 * the cluster's table and the dashboard.
 */
export interface TubePolicy {
  /** At most this many of the tube's jobs reserved at once, across all workers and nodes. */
  concurrency: number | null;
  /** At most `perSecond` jobs handed out per second, with bursts of up to `burst` (a token bucket). */
  rate: { perSecond: number; burst: number } | null;
  /** At most this many ready and delayed jobs; a put beyond it is refused (beanstalkd: OUT_OF_MEMORY). */
  queueCap: number | null;
  /**
   * A job whose TTR runs out goes back delayed by min(maxMs, baseMs * factor^(timeouts - 1)),
   * less a random part of up to `jitter` of it (0..1), instead of ready at once.
   */
  timeoutBackoff: { baseMs: number; factor: number; maxMs: number; jitter: number } | null;
}

/** No limits: what a tube without a policy behaves as. */
export const NO_POLICY: TubePolicy = { concurrency: null, rate: null, queueCap: null, timeoutBackoff: null };

/** True when `policy` limits nothing (it is then stored as no policy at all). */
export function isEmptyPolicy(policy: TubePolicy): boolean {
  return policy.concurrency === null && policy.rate === null && policy.queueCap === null && policy.timeoutBackoff === null;
}

/**
 * The delay (ms) before a job that timed out for the `timeouts`-th time is ready again, given a
 * random number in [0, 1). Pure, so the engine, the cluster's SQL (which computes the same
 * exponent) and the tests agree.
 */
export function backoffDelayMs(backoff: NonNullable<TubePolicy['timeoutBackoff']>, timeouts: number, random: number): number {
  const exponent = Math.max(0, timeouts - 1);
  const full = Math.min(backoff.maxMs, backoff.baseMs * Math.pow(backoff.factor, exponent));
  return Math.max(0, Math.round(full - full * backoff.jitter * random));
}

/** A tube's policy and what it is doing now. */
export interface TubePolicyState {
  policy: TubePolicy;
  /** The concurrency cap is full: reserves pass the tube by until a reservation ends. */
  capHeld: boolean;
  /** The rate is spent: reserves pass the tube by until a token comes back. */
  rateHeld: boolean;
  /** Since when the cap has been full (epoch ms; 0: it is not). */
  capFullSince: number;
  /** Puts refused by the queue cap since the server started (cluster: since the tube's policy was set). */
  refusedPuts: number;
  /** Timed-out jobs sent back delayed by the backoff, counted as refusedPuts is. */
  backoffs: number;
}

/** True when two policies (or their absence) limit the same things the same way. */
export function samePolicy(a: TubePolicy | null, b: TubePolicy | null): boolean {
  if (a === null || b === null) return a === b;
  const { rate: ra, timeoutBackoff: ba } = a;
  const { rate: rb, timeoutBackoff: bb } = b;
  return (
    a.concurrency === b.concurrency &&
    a.queueCap === b.queueCap &&
    (ra === null || rb === null ? ra === rb : ra.perSecond === rb.perSecond && ra.burst === rb.burst) &&
    (ba === null || bb === null ? ba === bb : ba.baseMs === bb.baseMs && ba.factor === bb.factor && ba.maxMs === bb.maxMs && ba.jitter === bb.jitter)
  );
}
