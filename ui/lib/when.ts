/** Times as the schedules and alerts pages show them. */

/** `at` (epoch ms) in `timeZone`, with the zone's abbreviation ("Mon 3 Mar, 09:00 CET"). */
export function formatInZone(at: number, timeZone: string): string {
  try {
    return new Date(at).toLocaleString(undefined, {
      timeZone,
      weekday: 'short',
      day: 'numeric',
      month: 'short',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      timeZoneName: 'short',
    });
  } catch {
    return new Date(at).toISOString();
  }
}

/** The browser's own zone, the default for a new schedule. */
export function browserTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** Every zone the browser knows, for the zone field's suggestions. */
export function knownTimeZones(): string[] {
  const intl = Intl as typeof Intl & { supportedValuesOf?: (key: 'timeZone') => string[] };
  return intl.supportedValuesOf?.('timeZone') ?? ['UTC'];
}
