/** `host:port` (an IPv6 host in brackets) as typed by a person: null when it is not one. */
export function parseHostPort(text: string): { host: string; port: number } | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]{1,253})):(\d{1,5})$/.exec(text.trim());
  if (m === null) return null;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1] ?? m[2]!, port };
}
