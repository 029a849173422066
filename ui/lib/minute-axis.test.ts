import { describe, expect, it } from 'vitest';
import { MINUTE_AXIS_MIN_SPAN, MINUTE_AXIS_STEPS, minuteAxisLabel, minuteAxisRange } from './minute-axis.js';

describe('the time axis of a minute chart', () => {
  it('shows at least an hour ending at the only sample, so a minute of data has no second ticks', () => {
    const t = 1_790_000_040;
    const [start, end] = minuteAxisRange([t], 0);
    expect(end).toBe(t);
    expect(end - start).toBe(MINUTE_AXIS_MIN_SPAN);
    expect(Math.min(...MINUTE_AXIS_STEPS)).toBe(60);
  });

  it('keeps the whole span of a day of samples', () => {
    const times = Array.from({ length: 1440 }, (_, i) => 1_790_000_040 + i * 60);
    expect(minuteAxisRange(times, 0)).toEqual([times[0], times[1439]]);
  });

  it('labels ticks in hours and minutes, never seconds', () => {
    const label = minuteAxisLabel(1_790_000_040 + 60 * 7);
    expect(label).toMatch(/^\d\d:\d\d$|^[A-Za-z]+ \d+$/);
  });
});
