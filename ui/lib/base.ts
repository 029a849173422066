/**
 * The URL prefix the dashboard is served under (--admin-base-path), written into the page by the
 * server. Inside the app every path is from the root ('/tubes/x'); only links, the address bar,
 * API calls and the socket.io path carry the prefix.
 */

function readBasePath(): string {
  if (typeof document === 'undefined') return '';
  const meta = document.querySelector<HTMLMetaElement>('meta[name="beanpole-base"]');
  return meta?.content ?? '';
}

export const basePath = readBasePath();

/** '/tubes/x' as a link or request path: '/beanpole/tubes/x'. */
export function withBase(appPath: string): string {
  return basePath + appPath;
}

/** A location's path as the app knows it: '/beanpole/tubes/x' becomes '/tubes/x'. */
export function withoutBase(urlPath: string): string {
  if (basePath === '') return urlPath;
  if (urlPath === basePath) return '/';
  return urlPath.startsWith(`${basePath}/`) ? urlPath.slice(basePath.length) : urlPath;
}
