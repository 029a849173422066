/** The dashboard under a URL prefix (--admin-base-path), for a reverse proxy that keeps it. */

import type http from 'node:http';

/** Requests already rewritten: one that waited for the dashboard to load is emitted again. */
const stripped = new WeakSet<http.IncomingMessage>();

/** '/beanpole/api/tubes' becomes '/api/tubes'; a URL without the prefix is left as it is. */
export function stripBasePath(req: http.IncomingMessage, basePath: string): void {
  if (stripped.has(req)) return;
  stripped.add(req);
  const url = req.url ?? '/';
  if (url === basePath) req.url = '/';
  else if (url.startsWith(basePath) && '/?'.includes(url.charAt(basePath.length))) {
    const rest = url.slice(basePath.length);
    req.url = rest.startsWith('/') ? rest : `/${rest}`;
  }
}

/**
 * The page with the prefix written in: a base element, so that the built assets' relative URLs
 * (Vite's `base: './'`) resolve under it from any deep link, and a meta element the app reads to
 * prefix its links, API calls and socket.io path.
 */
export function withBasePath(indexHtml: string, basePath: string): string {
  const tags = `<base href="${basePath}/" /><meta name="beanpole-base" content="${basePath}" />`;
  return indexHtml.replace(/<head>/i, `<head>${tags}`);
}
