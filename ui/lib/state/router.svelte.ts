/** History API routing: the current location as state, and same-origin link clicks kept in the app. */

import { withBase, withoutBase } from '../base.js';
import { parseRoute, routeKey, type Route } from '../routes.js';

export class Router {
  /** The path inside the app, without --admin-base-path's prefix. */
  pathname = $state(withoutBase(window.location.pathname));
  search = $state(window.location.search);
  readonly route: Route = $derived(parseRoute(this.pathname, this.search));
  readonly key: string = $derived(routeKey(this.route));
  /** Bumped on each navigation made inside the app (not on the first load), to move focus. */
  navigations = $state(0);

  /** Listens to back/forward and to clicks on plain links. Call once. */
  start(): void {
    window.addEventListener('popstate', () => this.sync());
    document.addEventListener('click', (event) => this.onClick(event));
  }

  /**
   * Goes to a path (`/tubes/x?state=buried`, with or without the base path: the route helpers'
   * links carry it); `replace` rewrites the current history entry.
   */
  navigate(href: string, options: { replace?: boolean } = {}): void {
    const url = new URL(href, window.location.href);
    if (url.origin !== window.location.origin) {
      window.location.assign(url.href);
      return;
    }
    const target = withBase(withoutBase(url.pathname)) + url.search + url.hash;
    const current = window.location.pathname + window.location.search + window.location.hash;
    if (target !== current) {
      if (options.replace === true) window.history.replaceState(null, '', target);
      else window.history.pushState(null, '', target);
    }
    this.sync();
    this.navigations++;
    if (options.replace !== true) window.scrollTo(0, 0);
  }

  private sync(): void {
    this.pathname = withoutBase(window.location.pathname);
    this.search = window.location.search;
  }

  private onClick(event: MouseEvent): void {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const target = event.target;
    if (!(target instanceof Element)) return;
    const anchor = target.closest('a');
    if (anchor === null || !anchor.hasAttribute('href')) return;
    if ((anchor.target !== '' && anchor.target !== '_self') || anchor.hasAttribute('download')) return;
    const url = new URL(anchor.href, window.location.href);
    if (url.origin !== window.location.origin || withoutBase(url.pathname).startsWith('/api/')) return;
    // In-page anchors (the skip link) keep the browser's own behaviour.
    if (url.hash !== '' && url.pathname === window.location.pathname && url.search === window.location.search) return;
    event.preventDefault();
    this.navigate(url.pathname + url.search + url.hash);
  }
}

export const router = new Router();
