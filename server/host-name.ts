import { isIPv6 } from 'node:net';

/**
 * The name in a Host header value (`name`, `name:port`, `[v6]` or `[v6]:port`) in lower case,
 * without port or brackets: `Example.COM:80` -> `example.com`, `[::1]:8080` -> `::1`. Null for
 * anything else (empty, a bare IPv6 address, characters no host name has, a port over 65535),
 * so a caller can refuse what it cannot read instead of guessing.
 */
export function hostName(host: string): string | null {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._~-]+))(?::(\d{1,5}))?$/.exec(host);
  if (m === null) return null;
  if (m[3] !== undefined && Number(m[3]) > 65535) return null;
  if (m[1] !== undefined) return isIPv6(m[1]) ? m[1].toLowerCase() : null;
  return m[2]!.toLowerCase();
}

/** True for a loopback address or name (an IPv4-mapped IPv6 loopback too, as a socket reports it). */
export function isLoopback(address: string): boolean {
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return plain === 'localhost' || plain === '::1' || /^127\.\d+\.\d+\.\d+$/.test(plain);
}
