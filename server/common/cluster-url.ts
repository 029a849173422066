/**
 * The --cluster URL as libpq reads it, hosts and all: `postgres://USER@db1:5432,db2:5432/DB?
 * target_session_attrs=read-write`. node-postgres parses only one host (its connection-string
 * parser throws on a list), so the list is taken apart here and each host handed to `pg` as a
 * single-host URL that keeps everything else (user, password, database, sslmode,
 * application_name, options) as written.
 */

export interface DatabaseHost {
  readonly host: string;
  readonly port: number;
}

/** What a connection must find at the other end (libpq's target_session_attrs, the ones a job server can use). */
export type SessionAttrs = 'any' | 'read-write' | 'primary';

export interface ClusterUrl {
  /** In the order written: the order in which they are tried. */
  readonly hosts: readonly DatabaseHost[];
  readonly sessionAttrs: SessionAttrs;
  /** connect_timeout, per host (libpq: seconds, at least 2); null: not given. */
  readonly connectTimeoutMs: number | null;
  /** The URL of one host of the list, for `pg`'s own parser. */
  hostUrl(host: DatabaseHost): string;
  /** The database's name (the URL's path), for what is named after it. */
  readonly database: string;
  /** The URL without its password, for logs. */
  readonly display: string;
  /** The URL holds a password (which `ps` shows other users). */
  readonly hasPassword: boolean;
}

const DEFAULT_PORT = 5432;
/** libpq takes a connect_timeout under 2 s as 2 s. */
const MIN_CONNECT_TIMEOUT_S = 2;
/** Parameters this file consumes; `pg` is not told of them. */
const CONSUMED = new Set(['target_session_attrs', 'connect_timeout']);
/** target_session_attrs that name a server a job server cannot write to. */
const READ_ONLY_ATTRS = new Set(['read-only', 'standby', 'prefer-standby']);

export class ClusterUrlError extends Error {}

/** Parses a postgres:// URL with one host or several; throws ClusterUrlError saying what is wrong. */
export function parseClusterUrl(value: string): ClusterUrl {
  const scheme = /^(postgres(?:ql)?):\/\//i.exec(value);
  if (scheme === null) throw new ClusterUrlError(`wants a URL such as postgres://USER@HOST:PORT/DB, not ${JSON.stringify(value)}`);
  const rest = value.slice(scheme[0].length);
  const authorityEnd = firstOf(rest, ['/', '?', '#']);
  const authority = rest.slice(0, authorityEnd);
  const tail = rest.slice(authorityEnd);
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  const hostList = at < 0 ? authority : authority.slice(at + 1);
  const hosts = hostList === '' ? [] : hostList.split(',').map(parseHost);
  const { path, params, fragment } = splitTail(tail);
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (READ_ONLY_ATTRS.has(attrs)) throw new ClusterUrlError(`target_session_attrs=${attrs} names a server Beanpole cannot write to: use read-write or primary`);
  if (attrs !== 'any' && attrs !== 'read-write' && attrs !== 'primary') throw new ClusterUrlError(`unknown target_session_attrs=${attrs} (any, read-write or primary)`);
  const connectTimeoutMs = connectTimeout(params.get('connect_timeout'));
  for (const key of CONSUMED) params.delete(key);
  const query = params.toString();
  const suffix = `${path}${query === '' ? '' : `?${query}`}${fragment}`;
  const origin = `${scheme[1]}://`;
  const database = decodeURIComponent(path.slice(1));
  const hasPassword = /:[^@]+@$/.test(userinfo);
  const shown = `${origin}${userinfo.replace(/:[^@]*@$/, ':***@')}${hostList}${tail}`;
  // A URL without a host (a Unix socket given by ?host=, or libpq's default) is `pg`'s to read whole.
  if (hosts.length === 0) {
    return { hosts: [{ host: '', port: DEFAULT_PORT }], sessionAttrs: attrs, connectTimeoutMs, hostUrl: () => `${origin}${userinfo}${suffix}`, database, display: shown, hasPassword };
  }
  return {
    hosts,
    sessionAttrs: attrs,
    connectTimeoutMs,
    hostUrl: (h) => `${origin}${userinfo}${formatHost(h)}${suffix}`,
    database,
    display: shown,
    hasPassword,
  };
}

/** The order in which a search for the primary tries the hosts: the last one found first (it most likely still is), then the rest as written. */
export function searchOrder(count: number, lastFound: number): number[] {
  const order = [lastFound];
  for (let i = 0; i < count; i++) if (i !== lastFound) order.push(i);
  return order;
}

/** `host`, `host:port`, `[v6]`, `[v6]:port`. */
function parseHost(item: string): DatabaseHost {
  const m = /^(\[[^\]]+\]|[^:[\]]*)(?::(\d*))?$/.exec(item);
  if (m === null || m[1] === '') throw new ClusterUrlError(`invalid host in the URL: ${JSON.stringify(item)}`);
  const port = m[2] === undefined || m[2] === '' ? DEFAULT_PORT : Number(m[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new ClusterUrlError(`invalid port in the URL: ${JSON.stringify(item)}`);
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : decodeURIComponent(m[1]!);
  return { host, port };
}

function formatHost(h: DatabaseHost): string {
  return `${h.host.includes(':') ? `[${h.host}]` : encodeURIComponent(h.host)}:${h.port}`;
}

function splitTail(tail: string): { path: string; params: URLSearchParams; fragment: string } {
  const hash = tail.indexOf('#');
  const fragment = hash < 0 ? '' : tail.slice(hash);
  const beforeHash = hash < 0 ? tail : tail.slice(0, hash);
  const q = beforeHash.indexOf('?');
  return {
    path: q < 0 ? beforeHash : beforeHash.slice(0, q),
    params: new URLSearchParams(q < 0 ? '' : beforeHash.slice(q + 1)),
    fragment,
  };
}

function connectTimeout(value: string | undefined | null): number | null {
  if (value === undefined || value === null) return null;
  const seconds = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(seconds)) throw new ClusterUrlError(`connect_timeout wants whole seconds, not ${JSON.stringify(value)}`);
  // libpq: 0 is "wait for ever"; this node's own bound on connecting (pool.ts) still applies.
  return seconds === 0 ? null : Math.max(MIN_CONNECT_TIMEOUT_S, seconds) * 1000;
}

function firstOf(text: string, chars: readonly string[]): number {
  const found = chars.map((c) => text.indexOf(c)).filter((i) => i >= 0);
  return found.length === 0 ? text.length : Math.min(...found);
}
