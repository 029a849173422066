/** How often the same peer address may be logged for the same kind of refusal. */
export const PEER_LOG_INTERVAL_MS = 60_000;
/** Addresses remembered at most; past this the memory is cleared (a flood logs a little more, never grows memory). */
const MAX_REMEMBERED = 4096;

/**
 * Says whether a refusal of `peer` should be logged: once per address per interval, so a client
 * that reconnects in a loop, or a scan, cannot fill the log.
 */
export class PeerLogLimiter {
  private readonly lastLoggedAt = new Map<string, number>();

  /** `now`: epoch ms (injected so tests need no sleeping). */
  constructor(
    private readonly now: () => number,
    private readonly intervalMs = PEER_LOG_INTERVAL_MS,
  ) {}

  shouldLog(peer: string): boolean {
    const now = this.now();
    const last = this.lastLoggedAt.get(peer);
    if (last !== undefined && now - last < this.intervalMs) return false;
    if (this.lastLoggedAt.size >= MAX_REMEMBERED) this.lastLoggedAt.clear();
    this.lastLoggedAt.set(peer, now);
    return true;
  }
}
