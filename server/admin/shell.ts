import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AdminContext, AttachedAdmin } from './app.js';
import { stripBasePath } from './base-path.js';
import { MinuteHistory } from './minute-history.js';
import { StatsHistory } from './stats-history.js';
import { AdminUsers } from './users.js';
import type { TlsCredentials, TlsMaterial } from '../tls/credentials.js';

/** Requests held while the dashboard's modules load; more are answered 503 (they load in ~200 ms). */
const MAX_HELD_REQUESTS = 256;

/** Loads the dashboard's modules (Express, socket.io, the API): `import('./app.js')`. */
export type AdminLoader = () => Promise<{ attachAdmin: typeof import('./app.js').attachAdmin }>;

/**
 * The dashboard's HTTP server, listening from the start, with the dashboard itself (Express,
 * socket.io, zod, helmet and the API routes) loaded when the first request arrives.
 *
 * Loading those modules holds the event loop for about 200 ms. Done at start, right after the
 * beanstalkd port opens, it delays the first commands of clients that connect at once, and so
 * their first delays and timeouts: a test suite that starts a fresh server for every test saw
 * `put` with delay 1 and `reserve-with-timeout 1` take 1.25 s. A server nobody opens the
 * dashboard of never pays for it; the first visit waits for it once.
 *
 * The stats history is sampled from the start, so the first dashboard still shows the last 15
 * minutes.
 */
export class AdminShell {
  private readonly server: http.Server;
  private readonly history: StatsHistory;
  private readonly minutes: MinuteHistory;
  /** Who each token is; read again from --admin-users on SIGHUP, loaded or not. */
  private readonly users: AdminUsers;
  private attached: AttachedAdmin | null = null;
  private modules: ReturnType<AdminLoader> | null = null;
  private loading = false;
  private closing = false;
  /** Requests and upgrades that arrived before the modules, in order: replay, or refuse. */
  private held: { replay: () => void; refuse: () => void }[] = [];

  constructor(
    private readonly ctx: AdminContext,
    private readonly load: AdminLoader = () => import('./app.js'),
  ) {
    this.server = ctx.tls == null ? http.createServer() : httpsServer(ctx.tls);
    this.history = new StatsHistory(ctx.ops, ctx.info);
    this.history.start();
    this.minutes = new MinuteHistory(ctx.ops, ctx.historyDir, ctx.log);
    this.minutes.start();
    this.users = new AdminUsers(ctx.options, ctx.log);
    // Only with a users file: without one, SIGHUP keeps whatever else the server makes of it.
    if (ctx.options.usersFile !== null) process.on('SIGHUP', this.reloadUsers);
    this.listenForRequests();
  }

  private readonly reloadUsers = (): void => this.users.reload();

  /**
   * Loads the modules now, without serving anything yet: a server that gives up root (-u) must
   * read them while it still may.
   */
  async preload(): Promise<void> {
    await this.loadOnce();
  }

  /** Runs `tune` on every socket the dashboard accepts (--keepalive). */
  tuneSockets(tune: (socket: Socket) => void): void {
    this.server.on('connection', tune);
  }

  /** Resolves with the URL the dashboard is served on. */
  listen(): Promise<string> {
    const { port, listen } = this.ctx.options;
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, listen, () => {
        this.server.off('error', reject);
        const addr = this.server.address();
        const actual = typeof addr === 'object' && addr !== null ? addr.port : port;
        const host = listen.includes(':') ? `[${listen}]` : listen;
        resolve(`${this.ctx.tls == null ? 'http' : 'https'}://${host}:${actual}${this.ctx.options.basePath}/`);
      });
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    this.history.stop();
    this.minutes.stop();
    process.off('SIGHUP', this.reloadUsers);
    for (const { refuse } of this.held.splice(0)) refuse();
    if (this.attached !== null) return this.attached.close();
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private listenForRequests(): void {
    this.server.on('request', this.holdRequest);
    this.server.on('upgrade', this.holdUpgrade);
    this.stripBasePathFirst();
  }

  /**
   * Behind a proxy that passes the base path on, requests arrive as /beanpole/api/...: the
   * prefix goes before any other listener (socket.io's included) sees the URL, so the dashboard
   * itself only ever deals with paths from the root.
   */
  private stripBasePathFirst(): void {
    const { basePath } = this.ctx.options;
    if (basePath === '') return;
    this.server.prependListener('request', (req: http.IncomingMessage) => stripBasePath(req, basePath));
    this.server.prependListener('upgrade', (req: http.IncomingMessage) => stripBasePath(req, basePath));
  }

  private readonly holdRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    this.hold(
      () => this.server.emit('request', req, res),
      () => res.writeHead(503, { 'Content-Type': 'text/plain', 'Retry-After': '1' }).end('the dashboard is starting or stopping\n'),
    );
  };

  private readonly holdUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Node leaves an upgraded socket without an error listener: a reset while it waits here
    // would be an uncaught error that ends the process.
    socket.on('error', () => socket.destroy());
    this.hold(
      () => this.server.emit('upgrade', req, socket, head),
      () => socket.destroy(),
    );
  };

  private hold(replay: () => void, refuse: () => void): void {
    if (this.closing || this.held.length >= MAX_HELD_REQUESTS) return refuse();
    this.held.push({ replay, refuse });
    if (this.loading) return;
    this.loading = true;
    void this.attach();
  }

  /** Loads the dashboard, hands it the server, then replays what waited. */
  private async attach(): Promise<void> {
    const started = performance.now();
    const { log } = this.ctx;
    try {
      const { attachAdmin } = await this.loadOnce();
      if (this.closing) return;
      // The dashboard's listeners replace the holding ones (socket.io keeps the request
      // listeners it finds when it attaches, so these must be gone first).
      this.server.removeAllListeners('request');
      this.server.removeAllListeners('upgrade');
      this.attached = attachAdmin(this.server, this.ctx, this.history, this.minutes, this.users);
      this.stripBasePathFirst();
      log.info({ ms: Math.round(performance.now() - started) }, 'dashboard loaded (first request)');
    } catch (err) {
      // Not expected of an installed server; the job server matters more, so it keeps going,
      // and the next request tries again.
      log.error({ err: (err as Error).message }, 'dashboard: loading it failed');
      this.modules = null;
      this.server.removeAllListeners('request');
      this.server.removeAllListeners('upgrade');
      this.listenForRequests();
      for (const { refuse } of this.held.splice(0)) refuse();
      this.loading = false;
      return;
    }
    for (const { replay } of this.held.splice(0)) replay();
  }

  private loadOnce(): ReturnType<AdminLoader> {
    this.modules ??= this.load();
    return this.modules;
  }
}

/**
 * The dashboard over HTTPS with the job ports' certificate and key (no client certificate is
 * asked for: browsers sign in with the token). A reload (SIGHUP) applies to later handshakes.
 */
function httpsServer(credentials: TlsCredentials): https.Server {
  const serverSide = ({ cert, key }: TlsMaterial): { cert: Buffer; key: Buffer } => ({ cert, key });
  const server = https.createServer(serverSide(credentials.material));
  credentials.onReload((material) => server.setSecureContext(serverSide(material)));
  return server;
}
