import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import helmet from 'helmet';
import type { Socket } from 'socket.io';
import type { Ack } from '../../shared/events.js';
import type { AdminOptions } from '../cli.js';
import { hostName } from '../host-name.js';
import { ApiError } from './errors.js';

/** Security headers: a strict CSP (scripts and connections only from this origin), no framing. */
export function securityHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        // Svelte and uPlot set element styles from script; no inline <style> or markup styles.
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        // The page's own <base> (the base path the server writes in); no injected one elsewhere.
        baseUri: ["'self'"],
        frameAncestors: ["'none'"],
        formAction: ["'self'"],
      },
    },
    crossOriginEmbedderPolicy: false,
    strictTransportSecurity: false,
  });
}

/** The bearer token of an `Authorization: Bearer ...` header. */
export function bearer(header: string | undefined): string | undefined {
  const m = header === undefined ? null : /^Bearer\s+(.+)$/i.exec(header);
  return m === null ? undefined : m[1]!.trim();
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Changes only by non-GET methods from this origin: a browser always sends Origin (and
 * Sec-Fetch-Site) with a cross-site request, so another site's page cannot act for an operator.
 * Requests with neither header (curl, scripts) pass; the token guards those when set.
 */
export function sameOriginForChanges(): RequestHandler {
  return (req, _res, next) => {
    if (SAFE_METHODS.has(req.method)) return next();
    const origin = req.headers.origin;
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return next(new ApiError(403, 'CROSS_ORIGIN', 'changes are accepted only from the dashboard itself'));
    }
    if (origin !== undefined) {
      if (originHost(origin) !== req.headers.host) {
        return next(new ApiError(403, 'CROSS_ORIGIN', 'changes are accepted only from the dashboard itself'));
      }
    }
    next();
  };
}

/** Names that always reach this machine, whatever DNS says. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

/**
 * Which Host headers the admin server answers. Without a token only its own names: the listen
 * address, loopback names and --admin-allowed-hosts. A page on `rebind.attacker.example`, whose
 * DNS later points at 127.0.0.1, is same-origin with itself and could otherwise read and change
 * jobs (DNS rebinding); its requests carry `Host: rebind.attacker.example`. With a token (the admin
 * token or a users file), the token
 * is the defence (a rebinding page does not have it) and remote operators may use any name.
 * A request without Host (HTTP/1.0, not a browser) passes; one whose Host cannot be read does not.
 */
export function hostCheck(
  options: Pick<AdminOptions, 'listen' | 'allowedHosts'> & { tokenRequired: boolean },
): (host: string | undefined) => boolean {
  if (options.tokenRequired) return () => true;
  const allowed = new Set([...LOOPBACK_NAMES, ...options.allowedHosts]);
  const listen = hostName(options.listen.includes(':') ? `[${options.listen}]` : options.listen);
  if (listen !== null) allowed.add(listen);
  return (host) => {
    if (host === undefined) return true;
    const name = hostName(host);
    return name !== null && allowed.has(name);
  };
}

/** Every path of the admin server (API, static files, /metrics, /healthz) refuses other Host names. */
export function allowedHostsOnly(isAllowedHost: (host: string | undefined) => boolean): RequestHandler {
  return (req, _res, next) => {
    if (isAllowedHost(req.headers.host)) return next();
    next(new ApiError(403, 'HOST_NOT_ALLOWED', 'this dashboard does not answer to that host name (see --admin-allowed-hosts)'));
  };
}

/**
 * socket.io's handshake: an allowed Host, and same origin only (socket.io's CORS stays off, so a
 * cross-site page cannot connect). Requests without Origin (not a browser) pass the origin check.
 */
export function socketHandshakeAllowed(isAllowedHost: (host: string | undefined) => boolean): (req: IncomingMessage) => boolean {
  return (req) => {
    const host = req.headers.host;
    if (!isAllowedHost(host)) return false;
    const origin = req.headers.origin;
    return origin === undefined || originHost(origin) === host;
  };
}

/** The `host[:port]` of an Origin header, or '' when it is not a URL (`null`, garbage). */
function originHost(origin: string): string {
  try {
    return new URL(origin).host;
  } catch {
    return '';
  }
}

/**
 * Events one dashboard socket may send at once (views and leaves together). A dashboard sends one
 * or two per page it opens and re-joins its one or two rooms on a reconnect, so 200 is far beyond
 * it. Kept small because a socket's events arrive in 64 KiB reads of about 2,000 events each,
 * handled in one go: the burst and the cut-off bound how long one socket can keep the job port
 * waiting (tens of ms at worst on a fresh server; `bench/admin-flood.ts` measures it).
 */
export const SOCKET_EVENT_BURST = 200;
/** Events per second a socket may send once its burst is spent; far above what a person clicks. */
export const SOCKET_EVENTS_PER_SECOND = 100;
/**
 * Refused events after which the socket is disconnected (refusals count against the bucket, so
 * this is how far into debt it may go): a client that ignores 200 refusals is not a dashboard.
 */
export const SOCKET_EVENT_CUTOFF = 200;

/**
 * A token bucket that may go into debt: each event takes a token, whether served or refused, so a
 * client that is refused has to slow down below the rate to be served again, and one that keeps
 * going regardless reaches the cut-off. `now` is in milliseconds.
 */
export class EventBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    private readonly cutoff: number,
    now: number,
  ) {
    this.tokens = burst;
    this.at = now;
  }

  /** Takes a token: 'ok' to serve the event, 'refused' beyond the rate, 'cut-off' far beyond it. */
  take(now: number): 'ok' | 'refused' | 'cut-off' {
    // A clock that steps back gives nothing back, now or later.
    this.tokens = Math.min(this.burst, this.tokens + (Math.max(0, now - this.at) * this.perSecond) / 1000);
    this.at = Math.max(this.at, now);
    this.tokens -= 1;
    if (this.tokens >= 0) return 'ok';
    return this.tokens < -this.cutoff ? 'cut-off' : 'refused';
  }
}

/**
 * Rate-limits what a socket sends: beyond SOCKET_EVENT_BURST at once and SOCKET_EVENTS_PER_SECOND
 * after, an event is not handled and its acknowledgement says why; after SOCKET_EVENT_CUTOFF
 * refusals the socket is disconnected (its views are released as on any disconnect).
 */
export function limitSocketEvents(socket: Socket, now: () => number = () => performance.now()): void {
  const bucket = new EventBucket(SOCKET_EVENT_BURST, SOCKET_EVENTS_PER_SECOND, SOCKET_EVENT_CUTOFF, now());
  socket.use((packet, next) => {
    const verdict = bucket.take(now());
    if (verdict === 'ok') return next();
    const ack: unknown = packet[packet.length - 1];
    if (typeof ack === 'function') (ack as Ack)({ ok: false, error: `too many requests (at most ${SOCKET_EVENTS_PER_SECOND} a second): slow down` });
    if (verdict === 'cut-off') socket.disconnect(true);
  });
}
