import { timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import helmet from 'helmet';
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
        baseUri: ["'none'"],
        frameAncestors: ["'none'"],
        formAction: ["'self'"],
      },
    },
    crossOriginEmbedderPolicy: false,
    strictTransportSecurity: false,
  });
}

/** True when `given` is the token (constant time). */
export function tokenMatches(token: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(token);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The bearer token of an `Authorization: Bearer ...` header. */
export function bearer(header: string | undefined): string | undefined {
  const m = header === undefined ? null : /^Bearer\s+(.+)$/i.exec(header);
  return m === null ? undefined : m[1]!.trim();
}

/** With a token set, every request needs it. */
export function requireToken(token: string | null): RequestHandler {
  return (req, _res, next) => {
    if (token === null || tokenMatches(token, bearer(req.headers.authorization))) return next();
    next(new ApiError(401, 'UNAUTHORIZED', 'this API needs the admin token (Authorization: Bearer ...)'));
  };
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
      let host: string;
      try {
        host = new URL(origin).host;
      } catch {
        host = '';
      }
      if (host !== req.headers.host) {
        return next(new ApiError(403, 'CROSS_ORIGIN', 'changes are accepted only from the dashboard itself'));
      }
    }
    next();
  };
}

/** --admin-read-only: every change is refused. */
export function readOnlyGuard(readOnly: boolean): RequestHandler {
  return (req, _res, next) => {
    if (!readOnly || SAFE_METHODS.has(req.method)) return next();
    next(new ApiError(403, 'READ_ONLY', 'this dashboard is read-only (--admin-read-only)'));
  };
}
