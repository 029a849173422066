import type { TubePolicy } from '../../shared/policy.js';

/**
 * A tube's policy and what it has counted: its token bucket, whether its cap or rate holds
 * reserves back now and since when, the puts it refused and the timeouts it delayed. Only tubes
 * with a policy have one, so a tube without pays nothing on any path.
 */
export class TubeGate {
  /** Tokens in the rate's bucket as of `refilledAt` (epoch ms); a hand-out takes one. */
  tokens: number;
  refilledAt: number;
  /** When the rate allows the next hand-out (epoch ms), while rateHeld. */
  reopenAt = 0;
  /** Position in PolicyGates' heap of tubes waiting for tokens. */
  refillIndex = -1;
  capHeld = false;
  rateHeld = false;
  /** Since when the concurrency cap has been full (epoch ms; 0: it is not). */
  capFullSince = 0;
  /** Puts refused by the queue cap, and timeouts sent back delayed by the backoff, since start. */
  refusedPuts = 0;
  backoffs = 0;

  constructor(
    public policy: TubePolicy,
    now: number,
  ) {
    this.tokens = policy.rate?.burst ?? 0;
    this.refilledAt = now;
  }
}
