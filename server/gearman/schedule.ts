/**
 * SUBMIT_JOB_SCHED's time: minute (0-59), hour (0-23), day of month (1-31), month (1-12) and
 * day of week (0-6, 0 = Monday), each a number or empty for "any", as in a crontab line. The
 * job runs once, at the first matching minute from now (local time, as cron).
 */
export interface CronTime {
  minute: number | null;
  hour: number | null;
  dayOfMonth: number | null;
  month: number | null;
  dayOfWeek: number | null;
}

const RANGES: Record<keyof CronTime, [number, number]> = {
  minute: [0, 59],
  hour: [0, 23],
  dayOfMonth: [1, 31],
  month: [1, 12],
  dayOfWeek: [0, 6],
};
const ORDER: (keyof CronTime)[] = ['minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'];

/** Parses the five fields; null when one is not empty and not a number in its range. */
export function parseCronTime(fields: readonly string[]): CronTime | null {
  const values: (number | null)[] = [];
  for (let i = 0; i < ORDER.length; i++) {
    const text = (fields[i] ?? '').trim();
    if (text === '') {
      values.push(null);
      continue;
    }
    if (!/^\d{1,2}$/.test(text)) return null;
    const n = Number(text);
    const [lo, hi] = RANGES[ORDER[i]!];
    if (n < lo || n > hi) return null;
    values.push(n);
  }
  const [minute = null, hour = null, dayOfMonth = null, month = null, dayOfWeek = null] = values;
  // A day that no such month has (31 February) never comes: refused here, not searched for.
  if (dayOfMonth !== null && month !== null && dayOfMonth > DAYS_IN_MONTH[month - 1]!) return null;
  return { minute, hour, dayOfMonth, month, dayOfWeek };
}

/** Longest month by number (29 February counts: it comes in leap years). */
const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
/**
 * Steps of the search before giving up: whole days are skipped, so this covers 28 years of days
 * (29 February on a Monday comes once in 28) plus a day of minute steps, and
 * bounds one packet's cost to about a millisecond.
 */
const MAX_STEPS = 28 * 366 + 24 * 60 + 24;

/** The first minute at or after `now` (epoch ms) that matches `time`, in epoch ms; null when none comes within 28 years. */
export function nextCronTime(time: CronTime, now: number): number | null {
  const t = new Date(now);
  t.setSeconds(0, 0);
  if (t.getTime() < now) t.setMinutes(t.getMinutes() + 1);
  for (let n = 0; n < MAX_STEPS; n++) {
    if (matches(time, t)) return t.getTime();
    // Skip whole hours or days that cannot match, so the search stays short.
    if (!dayMatches(time, t)) {
      t.setHours(24, 0, 0, 0);
      continue;
    }
    if (time.hour !== null && t.getHours() !== time.hour) {
      t.setHours(t.getHours() + 1, 0, 0, 0);
      continue;
    }
    t.setMinutes(t.getMinutes() + 1);
  }
  return null;
}

function dayMatches(time: CronTime, t: Date): boolean {
  return (
    (time.month === null || t.getMonth() + 1 === time.month) &&
    (time.dayOfMonth === null || t.getDate() === time.dayOfMonth) &&
    // Gearman counts weekdays from Monday = 0; Date from Sunday = 0.
    (time.dayOfWeek === null || (t.getDay() + 6) % 7 === time.dayOfWeek)
  );
}

function matches(time: CronTime, t: Date): boolean {
  return dayMatches(time, t) && (time.hour === null || t.getHours() === time.hour) && (time.minute === null || t.getMinutes() === time.minute);
}
