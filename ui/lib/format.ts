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

/** 93784 -> "1d 2h 3m 4s"; 0 -> "0s". */
export function formatDuration(totalSeconds: number): string {
  let seconds = Math.max(0, Math.floor(totalSeconds));
  const days = Math.floor(seconds / 86400);
  seconds -= days * 86400;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  const parts: string[] = [];
  if (days > 0) parts.push(`${days}d`);
  if (hours > 0) parts.push(`${hours}h`);
  if (minutes > 0) parts.push(`${minutes}m`);
  if (seconds > 0 || parts.length === 0) parts.push(`${seconds}s`);
  return parts.join(' ');
}

/** A stats value of unknown type as text. */
export function formatStat(value: number | string | boolean | undefined): string {
  if (value === undefined) return '—';
  if (typeof value === 'number') return Number.isInteger(value) ? formatCount(value) : String(value);
  return String(value);
}
