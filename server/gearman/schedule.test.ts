import { describe, expect, it } from 'vitest';
import { nextCronTime, parseCronTime } from './schedule.js';

/** Local time, as cron and SUBMIT_JOB_SCHED use it. */
const at = (y: number, mo: number, d: number, h = 0, mi = 0): number => new Date(y, mo - 1, d, h, mi).getTime();

describe('SUBMIT_JOB_SCHED times', () => {
  it('parses five fields, empty meaning any, and refuses what is out of range or never comes', () => {
    expect(parseCronTime(['30', '4', '', '', ''])).toEqual({ minute: 30, hour: 4, dayOfMonth: null, month: null, dayOfWeek: null });
    expect(parseCronTime(['60', '', '', '', ''])).toBeNull();
    expect(parseCronTime(['x', '', '', '', ''])).toBeNull();
    expect(parseCronTime(['', '', '31', '2', ''])).toBeNull();
    expect(parseCronTime(['', '', '31', '4', ''])).toBeNull();
    expect(parseCronTime(['', '', '29', '2', ''])).not.toBeNull();
  });

  it('finds the first matching minute from now', () => {
    const now = at(2026, 11, 25, 20, 30) + 15_000;
    expect(nextCronTime(parseCronTime(['', '', '', '', ''])!, now)).toBe(at(2026, 11, 25, 20, 31));
    expect(nextCronTime(parseCronTime(['0', '6', '', '', ''])!, now)).toBe(at(2026, 11, 26, 6, 0));
    expect(nextCronTime(parseCronTime(['', '', '1', '1', ''])!, now)).toBe(at(2027, 1, 1, 0, 0));
    // Gearman counts weekdays from Monday = 0: 30 November 2026 is a Monday.
    expect(nextCronTime(parseCronTime(['0', '9', '', '', '0'])!, now)).toBe(at(2026, 11, 30, 9, 0));
  });

  it('finds 29 February on a given weekday years ahead', () => {
    const t = nextCronTime(parseCronTime(['0', '0', '29', '2', '0'])!, at(2026, 11, 25));
    expect(t).not.toBeNull();
    const d = new Date(t!);
    expect([d.getMonth(), d.getDate(), (d.getDay() + 6) % 7]).toEqual([1, 29, 0]);
  });
});
