import type { TubeCounts } from '../operations/operations.js';
import type { AlertRule } from './rule.js';

/**
 * The attention conditions an alert rule watches, as the overview computes them (server/admin/
 * tube-health.ts and ui/lib/attention.ts): buried jobs, the oldest ready job's age, ready jobs no
 * worker watches, a growing backlog, a tube policy's concurrency cap full (its reserves held back).
 */

/** What a tube looked like at one tick. */
export interface TubeFacts {
  counts: TubeCounts;
  /** When its oldest ready job was put (epoch ms; Infinity: none ready or not measured). */
  oldestReadyCreatedAt: number;
  /** The fewest ready jobs it had since its backlog last stopped growing (backlog-rising). */
  readyLow: number;
}

/** Whether `rule`'s condition holds for a tube, and the value measured (jobs, or seconds). */
export function conditionHolds(rule: AlertRule, tube: TubeFacts, now: number): { holds: boolean; value: number } {
  const c = tube.counts;
  switch (rule.condition) {
    case 'buried':
      return { holds: c.buried > rule.threshold, value: c.buried };
    case 'oldest-ready': {
      const ageMs = c.ready > 0 && Number.isFinite(tube.oldestReadyCreatedAt) ? Math.max(0, now - tube.oldestReadyCreatedAt) : 0;
      return { holds: c.ready > 0 && ageMs > rule.threshold * 1000, value: Math.floor(ageMs / 1000) };
    }
    case 'unwatched':
      return { holds: c.ready > 0 && c.watching === 0, value: c.ready };
    case 'backlog-rising': {
      const gained = c.ready - tube.readyLow;
      return { holds: gained > 0 && gained >= rule.threshold, value: gained };
    }
    case 'cap-saturated':
      return { holds: c.policy?.capHeld === true, value: c.reserved };
  }
}

/**
 * Each tube's ready-count low point: reset whenever the count is at or below it, so "the backlog
 * has grown for T" is "it stayed above its low for T" (with a rule's `for`), and a queue that
 * drains back to where it was clears the alert.
 */
export class ReadyLows {
  private readonly lows = new Map<string, number>();

  update(tubes: readonly TubeCounts[]): void {
    const seen = new Set<string>();
    for (const t of tubes) {
      seen.add(t.name);
      const low = this.lows.get(t.name);
      if (low === undefined || t.ready <= low) this.lows.set(t.name, t.ready);
    }
    for (const name of this.lows.keys()) if (!seen.has(name)) this.lows.delete(name);
  }

  low(tube: string): number {
    return this.lows.get(tube) ?? 0;
  }
}
