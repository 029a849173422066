import { backoffDelayMs, type TubePolicy } from '../../shared/policy.js';
import { IndexedHeap } from './heap.js';
import { TubeGate } from './tube-gate.js';
import type { Job, Tube } from './records.js';
import type { WaitingSessions } from './waiting.js';
import { jobCounters } from './records.js';

/**
 * The engine's side of tube policies: it gates reserves by each tube's concurrency cap and rate,
 * refuses puts beyond the queue cap, and picks a timed-out job's backoff. A gated tube is closed
 * (Tube.closed) exactly as a paused one is: reserves and waiters pass it by as if it had no
 * ready job, and it opens again when a reservation ends or tokens come back (tick).
 */
export class PolicyGates {
  /** Rate-held tubes by when they may hand out a job again. */
  private readonly refilling = new IndexedHeap<Tube>(
    (a, b) => a.gate!.reopenAt < b.gate!.reopenAt,
    (t, i) => (t.gate!.refillIndex = i),
  );
  /** A cap opened in the operation under way (unreserved); serveOpened serves waiters. */
  private opened = false;

  constructor(
    private readonly waiting: WaitingSessions,
    private readonly now: () => number,
    /** A number in [0, 1) for the backoff's jitter (tests pass their own). */
    private readonly random: () => number,
  ) {}

  /** Gives `tube` its policy (null: none), keeping what the old one counted. */
  apply(tube: Tube, policy: TubePolicy | null): void {
    const now = this.now();
    const old = tube.gate;
    if (old !== null && old.refillIndex >= 0) this.refilling.removeAt(old.refillIndex);
    if (policy === null) {
      tube.gate = null;
    } else {
      const gate = new TubeGate(policy, now);
      if (old !== null) {
        gate.refusedPuts = old.refusedPuts;
        gate.backoffs = old.backoffs;
        if (old.policy.rate !== null && policy.rate !== null) gate.tokens = Math.min(old.tokens, policy.rate.burst);
      }
      tube.gate = gate;
      this.holdRate(tube, gate, now);
    }
    this.refresh(tube, now);
    this.waiting.processQueue();
  }

  /** The tube is gone: its gate leaves the refill heap. */
  forget(tube: Tube): void {
    const gate = tube.gate;
    if (gate !== null && gate.refillIndex >= 0) this.refilling.removeAt(gate.refillIndex);
  }

  /** A put into `tube`: false when its queue cap is reached (the put is refused and counted). */
  admits(tube: Tube): boolean {
    const gate = tube.gate;
    if (gate === null || gate.policy.queueCap === null) return true;
    if (tube.ready.size + tube.delayed.size < gate.policy.queueCap) return true;
    gate.refusedPuts++;
    return false;
  }

  /** One of the tube's jobs was just reserved (tube.reserved counts it): takes a token, checks the cap. */
  reserved(tube: Tube, now: number): void {
    const gate = tube.gate!;
    if (gate.policy.rate !== null) {
      this.refill(gate, now);
      gate.tokens--;
      this.holdRate(tube, gate, now);
    }
    this.refresh(tube, now);
  }

  /**
   * One of the tube's reservations ended: the cap may open. Waiters are served by serveOpened,
   * once the operation has put the job where it goes (a released job may be the best one).
   */
  unreserved(tube: Tube, now: number): void {
    if (this.refresh(tube, now)) this.opened = true;
  }

  /** Serves waiters if a cap opened during the operation that ends now. */
  serveOpened(): void {
    if (!this.opened) return;
    this.opened = false;
    this.waiting.processQueue();
  }

  /** A job of `tube` timed out: its delay before it is ready again (0: ready now). */
  timeoutDelayMs(tube: Tube, job: Job): number {
    const backoff = tube.gate?.policy.timeoutBackoff ?? null;
    if (backoff === null) return 0;
    tube.gate!.backoffs++;
    return backoffDelayMs(backoff, jobCounters(job).timeouts, this.random());
  }

  /** When the next rate-held tube may hand out a job (epoch ms), or undefined. */
  nextReopenAt(): number | undefined {
    return this.refilling.peek()?.gate!.reopenAt;
  }

  /** Opens up to `budget` rate-held tubes whose tokens are back by `now`, then serves waiters once. */
  reopen(now: number, budget: number): number {
    let n = 0;
    for (let tube = this.refilling.peek(); tube !== undefined && tube.gate!.reopenAt <= now && n < budget; tube = this.refilling.peek()) {
      const gate = tube.gate!;
      this.refilling.removeAt(gate.refillIndex);
      this.refill(gate, now);
      // The reopen time was computed to give one whole token; rounding must not hold it again.
      gate.tokens = Math.max(gate.tokens, 1);
      gate.rateHeld = false;
      this.refresh(tube, now);
      n++;
    }
    if (n > 0) this.waiting.processQueue();
    return n;
  }

  private refill(gate: TubeGate, now: number): void {
    const rate = gate.policy.rate!;
    if (now > gate.refilledAt) gate.tokens = Math.min(rate.burst, gate.tokens + ((now - gate.refilledAt) * rate.perSecond) / 1000);
    gate.refilledAt = now;
  }

  /** Out of tokens: held until one whole token is back. */
  private holdRate(tube: Tube, gate: TubeGate, now: number): void {
    const rate = gate.policy.rate;
    if (rate === null || gate.tokens >= 1) return;
    gate.rateHeld = true;
    gate.reopenAt = now + Math.ceil(((1 - gate.tokens) * 1000) / rate.perSecond);
    if (gate.refillIndex < 0) this.refilling.push(tube);
    else this.refilling.update(gate.refillIndex);
  }

  /** Recomputes whether `tube` is gated; true when it just opened. */
  private refresh(tube: Tube, now: number): boolean {
    const gate = tube.gate;
    const cap = gate?.policy.concurrency ?? null;
    if (gate !== null) {
      const full = cap !== null && tube.reserved >= cap;
      if (full && !gate.capHeld) gate.capFullSince = now;
      if (!full) gate.capFullSince = 0;
      gate.capHeld = full;
    }
    const gated = gate !== null && (gate.capHeld || gate.rateHeld);
    if (gated === tube.gated) return false;
    tube.gated = gated;
    this.waiting.refreshAwaited(tube);
    if (gated || tube.ready.size === 0) return false;
    this.waiting.noteWideNews(tube);
    return true;
  }
}
