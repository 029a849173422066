/**
 * Cron expressions, read by croner (see README "Dependencies" for why croner): 5 fields, or 6
 * with seconds first, in an IANA time zone. Only pure evaluation is used: a Cron made without a
 * callback starts no timer, so this module stays as clock-free as the rest of server/schedules.
 */
import { Cron } from 'croner';

/** A parsed expression in its zone; answers slot times as epoch ms. */
export interface CronSlots {
  /** Up to `n` slots after `after` (exclusive), oldest first. */
  next(n: number, after: number): number[];
  /** The latest slot at or before `at`, or null when there is none. */
  latestAtOrBefore(at: number): number | null;
}

/** Longest expression accepted (croner has no limit; a stored row should). */
export const MAX_CRON_LENGTH = 200;

/** True when `zone` is an IANA time zone name this Node knows ('UTC' included). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Parses `expression` in `timeZone`. Fails with a message a person can act on (croner's own, which
 * names the field), never throws.
 */
export function parseCron(expression: string, timeZone: string): { ok: true; value: CronSlots } | { ok: false; message: string } {
  if (expression.length > MAX_CRON_LENGTH) return { ok: false, message: `longer than ${MAX_CRON_LENGTH} characters` };
  if (!isTimeZone(timeZone)) return { ok: false, message: `unknown time zone: ${timeZone}` };
  let cron: Cron;
  try {
    // 5 fields (minutes) or 6 (seconds first); no year field, so an expression means the same in
    // any other cron a person may have learnt it from.
    cron = new Cron(expression.trim(), { timezone: timeZone, mode: '5-or-6-parts', paused: true });
  } catch (err) {
    return { ok: false, message: (err as Error).message.replace(/^CronPattern: /, '') };
  }
  return {
    ok: true,
    value: {
      next(n, after) {
        const out: number[] = [];
        let from = new Date(after);
        for (let i = 0; i < n; i++) {
          const d = cron.nextRun(from);
          if (d === null) break;
          out.push(d.getTime());
          from = d;
        }
        return out;
      },
      latestAtOrBefore(at) {
        // previousRuns answers slots strictly before its reference.
        const [d] = cron.previousRuns(1, new Date(at + 1));
        return d === undefined ? null : d.getTime();
      },
    },
  };
}
