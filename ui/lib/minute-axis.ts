/**
 * The time axis of a chart of minute samples: ticks never closer than a minute, and a range of at
 * least an hour ending at the last sample, so one or two samples do not stretch over the whole
 * width with a tick every few seconds. Times are epoch seconds (uPlot's time scale).
 */

/** Tick steps in seconds, from a minute to a week; uPlot picks the smallest that leaves room. */
export const MINUTE_AXIS_STEPS: readonly number[] = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];

/** The shortest span the axis shows, in seconds. */
export const MINUTE_AXIS_MIN_SPAN = 3600;

/** [start, end] in epoch seconds for samples at `times` (ascending); `nowSec` when there are none. */
export function minuteAxisRange(times: ArrayLike<number>, nowSec: number): [number, number] {
  const end = times.length === 0 ? nowSec : times[times.length - 1]!;
  const start = times.length === 0 ? end - MINUTE_AXIS_MIN_SPAN : Math.min(times[0]!, end - MINUTE_AXIS_MIN_SPAN);
  return [start, end];
}

/** A tick's label: hours and minutes, with the day when the tick starts one (local time). */
export function minuteAxisLabel(timeSec: number): string {
  const at = new Date(timeSec * 1000);
  const hm = `${String(at.getHours()).padStart(2, '0')}:${String(at.getMinutes()).padStart(2, '0')}`;
  return hm === '00:00' ? at.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }) : hm;
}
