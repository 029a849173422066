/** Number, size and duration formatting for display. */

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const rate = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

export function formatCount(value: number): string {
  return integer.format(value);
}

export function formatRate(value: number): string {
  return rate.format(value);
}

/** 1536 -> "1.5 KiB" (bytes below 1 KiB exactly). */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/**
 * 93784 -> "1d 2h 3m 4s"; 0 -> "0s". `units` keeps that many units from the largest one present,
 * cutting (not rounding) the rest: 7199 with 2 units is "1h 59m", 3605 is "1h" (never "1h 5s").
 */
export function formatDuration(totalSeconds: number, { units = 4 }: { units?: number } = {}): string {
  let seconds = Math.max(0, Math.floor(totalSeconds));
  const amounts: [number, string][] = [];
  for (const [size, suffix] of DURATION_UNITS) {
    amounts.push([Math.floor(seconds / size), suffix]);
    seconds %= size;
  }
  const first = amounts.findIndex(([amount]) => amount > 0);
  if (first === -1) return '0s';
  return amounts
    .slice(first, first + units)
    .filter(([amount]) => amount > 0)
    .map(([amount, suffix]) => `${amount}${suffix}`)
    .join(' ');
}

const DURATION_UNITS: readonly (readonly [number, string])[] = [
  [86400, 'd'],
  [3600, 'h'],
  [60, 'm'],
  [1, 's'],
];

/** A stats value of unknown type as text. */
export function formatStat(value: number | string | boolean | undefined): string {
  if (value === undefined) return '—';
  if (typeof value === 'number') return Number.isInteger(value) ? formatCount(value) : String(value);
  return String(value);
}
