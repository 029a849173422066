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
  return { minute, hour, dayOfMonth, month, dayOfWeek };
}

/** Minutes looked at before giving up (a little over four years: Feb 29 on a Monday and so on). */
const MAX_MINUTES = 4 * 366 * 24 * 60 + 60;

/**
 * The first minute at or after `now` (epoch ms) that matches `time`, in epoch ms; null when none
 * comes within four years (31 February).
 */
export function nextCronTime(time: CronTime, now: number): number | null {
  const t = new Date(now);
  t.setSeconds(0, 0);
  if (t.getTime() < now) t.setMinutes(t.getMinutes() + 1);
  for (let n = 0; n < MAX_MINUTES; n++) {
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
