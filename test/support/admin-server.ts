/**
 * A real Beanpole process with both front doors: the beanstalkd protocol on a fresh port and
 * the dashboard / admin API on a port the server picks itself (--admin-port 0), whose URL is
 * read from the "dashboard on ..." log line on stderr. Plus small fetch helpers for the API.
 */
import http from 'node:http';
import { startProcessServer, type ServerProcess } from './servers.js';

export interface AdminServerProcess extends ServerProcess {
  /** The beanstalkd protocol port (127.0.0.1). */
  port: number;
  /** The dashboard's base URL, ending in '/' (e.g. http://127.0.0.1:41234/). */
  url: string;
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The `url` of the first "dashboard on" JSON log line in `stderr`, or null. */
export function dashboardUrl(stderr: string): string | null {
  for (const line of stderr.split('\n')) {
    if (!line.includes('dashboard on')) continue;
    try {
      const rec = JSON.parse(line) as { url?: unknown };
      if (typeof rec.url === 'string') return rec.url;
    } catch {
      // a partial line; the next poll sees it whole
    }
  }
  return null;
}

/**
 * Starts `bin/beanpole -l 127.0.0.1 -p <free> --admin-port 0 ...args` and waits for both the
 * protocol listener and the dashboard URL. `args` may add --admin-token, --admin-read-only, -b,
 * -z and so on; --admin-listen is always 127.0.0.1 unless given.
 */
export async function startAdminServer(args: readonly string[] = []): Promise<AdminServerProcess> {
  const server = await startProcessServer('beanpole', { tcp: true }, ['--admin-port', '0', ...args]);
  const deadline = Date.now() + 10_000;
  let url = dashboardUrl(server.stderr());
  while (url === null && Date.now() < deadline && server.process.exitCode === null) {
    await delay(10);
    url = dashboardUrl(server.stderr());
  }
  if (url === null) {
    await server.stop();
    throw new Error(`no dashboard URL on stderr:\n${server.stderr()}`);
  }
  if (!/^https?:\/\/127\.0\.0\.1:/.test(url)) {
    await server.stop();
    throw new Error(`dashboard is not on 127.0.0.1: ${url}`);
  }
  return { ...server, port: (server.address as { port: number }).port, url };
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** The raw body as text (latin1 is never needed: the API answers JSON or octet-streams). */
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  json: unknown;
}

export interface ApiRequest {
  method?: string;
  /** Sent as JSON (Content-Type: application/json). */
  json?: unknown;
  /** Sent verbatim with Content-Type: application/json (for malformed JSON). */
  raw?: string;
  token?: string;
  headers?: Record<string, string>;
}

/** One request to the admin API; `path` is relative to the server's URL ('/api/stats'). */
export async function api(base: string, path: string, req: ApiRequest = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...req.headers };
  let body: string | undefined;
  if (req.json !== undefined || req.raw !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = req.raw ?? JSON.stringify(req.json);
  }
  if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
  const res = await fetch(new URL(path, base), { method: req.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await res.text();
  let json: unknown;
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Like `api`, but with the given Host header (fetch always sends the URL's own), as a page on
 * another name that resolves to this machine would send it (DNS rebinding).
 */
export function apiWithHost(base: string, path: string, host: string, req: ApiRequest = {}): Promise<ApiResponse> {
  const url = new URL(path, base);
  const headers: Record<string, string> = { ...req.headers, host };
  let body: string | undefined;
  if (req.json !== undefined || req.raw !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = req.raw ?? JSON.stringify(req.json);
  }
  if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
  const method = req.method ?? (body === undefined ? 'GET' : 'POST');
  return new Promise((resolve, reject) => {
    const r = http.request({ hostname: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') out.set(k, v);
        let json: unknown;
        try {
          json = out.get('content-type')?.includes('json') ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: out, text, json });
      });
    });
    r.on('error', reject);
    r.end(body);
  });
}

/** Raw bytes of a GET (for /api/jobs/:id/body). */
export async function apiBytes(base: string, path: string, token?: string): Promise<{ status: number; headers: Headers; bytes: Buffer }> {
  const res = await fetch(new URL(path, base), { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** The `key: value` lines of a beanstalkd YAML reply (`OK n\r\n---\n...`), in order; quotes removed. */
export function yamlMap(reply: string): Map<string, string> {
  const out = new Map<string, string>();
  const start = reply.indexOf('---\n');
  if (!reply.startsWith('OK ') || start < 0) throw new Error(`not a YAML reply: ${JSON.stringify(reply.slice(0, 200))}`);
  for (const line of reply.slice(start + 4).split('\n')) {
    const m = /^([^:\s][^:]*): (.*)$/.exec(line.replace(/\r$/, ''));
    if (m === null) continue;
    const v = m[2]!;
    out.set(m[1]!, v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v);
  }
  return out;
}

/** The items of a beanstalkd YAML list reply (`list-tubes`, `list-tubes-watched`). */
export function yamlList(reply: string): string[] {
  const start = reply.indexOf('---\n');
  if (!reply.startsWith('OK ') || start < 0) throw new Error(`not a YAML reply: ${JSON.stringify(reply.slice(0, 200))}`);
  return reply
    .slice(start + 4)
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .filter((l) => l.startsWith('- '))
    .map((l) => l.slice(2));
}
