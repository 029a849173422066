import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import type { Logger } from 'pino';
import { Server as IoServer } from 'socket.io';
import type { AdminConfigDto } from '../../shared/dto.js';
import type { Automation } from '../automation/automation.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import type { AdminOptions } from '../cli.js';
import type { Operations } from '../operations/operations.js';
import type { GearmanView } from '../gearman/view.js';
import { gearmanRoutes } from './gearman-routes.js';
import type { ServerInfo } from '../server-info.js';
import { withBasePath } from './base-path.js';
import { errorHandler } from './errors.js';
import { LiveUpdates } from './live.js';
import { automationText, prometheusText } from './metrics.js';
import compression from 'compression';
import { ExternalServers } from './external.js';
import type { MinuteHistory } from './minute-history.js';
import { externalRoutes } from './external-routes.js';
import { clusterRoutes, type AdminCluster } from './cluster-routes.js';
import { apiRoutes } from './routes.js';
import { automationRoutes } from './automation-routes.js';
import {
  allowedHostsOnly,
  bearer,
  hostCheck,
  limitSocketEvents,
  readOnlyGuard,
  requireToken,
  sameOriginForChanges,
  securityHeaders,
  socketHandshakeAllowed,
  tokenMatches,
} from './security.js';
import type { StatsHistory } from './stats-history.js';

/** The Gearman side, when the server has a Gearman port. */
export interface AdminGearman {
  view: GearmanView;
  /** Its store's operations (for the counters in /metrics). */
  ops: Operations;
  onActivity: () => void;
}

export interface AdminContext {
  ops: Operations;
  info: ServerInfo;
  gearman: AdminGearman | null;
  log: Logger;
  options: AdminOptions;
  /** The built dashboard (dist/ui); served when it exists. */
  uiDir: string;
  binlog: boolean;
  /** Where the minute history is kept across restarts (with -b: DIR/stats-history), or null. */
  historyDir: string | null;
  /** Cluster mode: the nodes view; null for a server with jobs of its own. */
  cluster: AdminCluster | null;
  onActivity: () => void;
  /** Schedules and alert rules (server/automation); null: not offered (a test's dashboard). */
  automation: Automation | null;
}

/** The dashboard, attached to its HTTP server. */
export interface AttachedAdmin {
  /** Stops live updates and closes socket.io and the HTTP server. */
  close(): Promise<void>;
}

/**
 * The dashboard's HTTP side on `server` (already listening; see shell.ts): the REST API,
 * socket.io, /metrics, /healthz and the built UI. `history` has sampled the stats since start.
 */
export function attachAdmin(server: http.Server, ctx: AdminContext, history: StatsHistory, minutes: MinuteHistory): AttachedAdmin {
  const { ops, info, options } = ctx;
  const config: AdminConfigDto = {
    version: info.version,
    readOnly: options.readOnly,
    tokenRequired: options.token !== null,
    maxJobSize: ops.maxJobSize,
    binlog: ctx.binlog,
    clusterNode: ctx.cluster?.nodeId() ?? null,
  };
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(securityHeaders());
  // The dashboard's script and JSON answers shrink about 4x; socket.io compresses its own.
  app.use(compression());
  const isAllowedHost = hostCheck(options);
  app.use(allowedHostsOnly(isAllowedHost));
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, draining: ops.draining });
  });
  app.get('/metrics', requireToken(options.token), async (_req, res) => {
    const [counts, tubes] = await Promise.all([ops.serverCounts(), ops.tubes()]);
    const gearman =
      ctx.gearman === null ? null : { counts: await ctx.gearman.ops.serverCounts(), snapshot: await ctx.gearman.view.snapshot() };
    const automation = ctx.automation === null ? '' : automationText(ctx.automation.schedules.fires(), await ctx.automation.alerts.states());
    res.type('text/plain; version=0.0.4').send(prometheusText(counts, tubes, info, gearman) + automation);
  });
  // The config says whether a token is needed, so it is readable without one.
  app.get('/api/config', (_req, res) => {
    res.json(config);
  });
  app.use('/api', requireToken(options.token), sameOriginForChanges(), readOnlyGuard(options.readOnly));
  if (ctx.gearman !== null) app.use(gearmanRoutes(ctx.gearman.view, ctx.gearman.ops, ctx.gearman.onActivity));
  // Before apiRoutes, whose last handler answers 404 for any other /api path.
  const external = new ExternalServers();
  for (const address of options.attach) external.add(address, 'flag');
  app.use(externalRoutes(external));
  if (ctx.cluster !== null) app.use(clusterRoutes(ctx.cluster));
  if (ctx.automation !== null) app.use(automationRoutes(ops, ctx.automation));
  app.use(apiRoutes({ ops, info, config, minutes, onActivity: ctx.onActivity }));
  const indexFile = path.join(ctx.uiDir, 'index.html');
  if (existsSync(indexFile)) {
    const page = withBasePath(readFileSync(indexFile, 'utf8'), options.basePath);
    app.use(express.static(ctx.uiDir, { index: false, maxAge: '1h' }));
    // Deep links (/tubes/a%2Fb, /jobs/7) load the app, which routes on the client.
    app.get(/^(?!\/api\/|\/socket\.io\/).*/, (_req, res) => {
      res.set('Cache-Control', 'no-cache').type('html').send(page);
    });
  }
  app.use(errorHandler(ctx.log));
  const handshakeAllowed = socketHandshakeAllowed(isAllowedHost);

  // Express first: socket.io passes on the requests that are not its own to the listeners
  // the server had when it was attached.
  server.on('request', app);
  const io = new IoServer<ClientToServerEvents, ServerToClientEvents>(server, {
    serveClient: false,
    allowRequest: (req, callback) => callback(null, handshakeAllowed(req)),
  });
  io.use((socket, next) => {
    const given = typeof socket.handshake.auth.token === 'string' ? socket.handshake.auth.token : bearer(socket.handshake.headers.authorization);
    if (options.token === null || tokenMatches(options.token, given)) return next();
    next(new Error('unauthorized'));
  });
  io.on('connection', (socket) => limitSocketEvents(socket));
  const live = new LiveUpdates(io, ops, info, config, history, undefined, ctx.gearman?.view ?? null);

  return {
    close: async () => {
      live.close();
      external.closeAll();
      await new Promise<void>((resolve) => {
        void io.close(() => resolve());
      });
    },
  };
}
