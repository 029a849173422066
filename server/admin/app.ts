import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import type { Logger } from 'pino';
import { Server as IoServer } from 'socket.io';
import type { AdminConfigDto } from '../../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import type { AdminOptions } from '../cli.js';
import type { Operations } from '../operations/operations.js';
import type { GearmanView } from '../gearman/view.js';
import { gearmanRoutes } from './gearman-routes.js';
import type { ServerInfo } from '../server-info.js';
import type { TlsCredentials } from '../tls/credentials.js';
import { withBasePath } from './base-path.js';
import { errorHandler } from './errors.js';
import { LiveUpdates } from './live.js';
import type { Automation } from '../automation/automation.js';
import { automationRoutes } from './automation-routes.js';
import { aclText, automationText, prometheusText } from './metrics.js';
import compression from 'compression';
import { ExternalServers } from './external.js';
import type { MinuteHistory } from './minute-history.js';
import { externalRoutes } from './external-routes.js';
import { clusterRoutes } from './cluster-routes.js';
import type { ClusterNodes } from '../operations/cluster-nodes.js';
import { apiRoutes } from './routes.js';
import { policyRoutes } from './policy-routes.js';
import type { PolicyOrigin } from '../policies/file-policies.js';
import { allowedHostsOnly, hostCheck, limitSocketEvents, sameOriginForChanges, securityHeaders, socketHandshakeAllowed } from './security.js';
import type { StatsHistory } from './stats-history.js';
import type { AuditLog } from '../common/audit-log.js';
import { Access } from './access.js';
import { auditRoutes } from './audit-routes.js';
import { guardedRouter } from './guarded-router.js';
import { guardSocket } from './socket-access.js';
import type { AdminUsers } from './users.js';
import type { Acl } from '../acl/acl.js';

/** The Gearman side, when the server has a Gearman port. */
export interface AdminGearman {
  view: GearmanView;
  /** Its store's operations (for the counters in /metrics). */
  ops: Operations;
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
  cluster: ClusterNodes | null;
  /** Where changes made through the API are recorded (GET /api/audit reads it). */
  audit: AuditLog;
  /** Schedules and alert rules (server/automation); null: not offered (a test's dashboard). */
  automation: Automation | null;
  /** The dashboard serves HTTPS with these (--tls-cert, --tls-key); null or absent: HTTP. */
  tls?: TlsCredentials | null;
  /** Which policies the --policies file set (null or absent: no file). */
  policyOrigin?: PolicyOrigin | null;
  /** --acl: its denial counters go into /metrics; null or absent: no rules. */
  acl?: Pick<Acl, 'denialCounts'> | null;
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
export function attachAdmin(
  server: http.Server,
  ctx: AdminContext,
  history: StatsHistory,
  minutes: MinuteHistory,
  users: AdminUsers,
): AttachedAdmin {
  const { ops, info, options } = ctx;
  const access = new Access(users, options.readOnly, ctx.audit);
  const config: AdminConfigDto = {
    version: info.version,
    readOnly: options.readOnly,
    tokenRequired: users.required,
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
  const isAllowedHost = hostCheck({ ...options, tokenRequired: users.required });
  app.use(allowedHostsOnly(isAllowedHost));
  const top = guardedRouter(access);
  app.use(top.router);
  top.get('/healthz', 'public', (_req, res) => {
    res.json({ ok: true, draining: ops.draining });
  });
  top.get('/metrics', 'viewer', async (_req, res) => {
    const [counts, tubes] = await Promise.all([ops.serverCounts(), ops.tubes()]);
    const gearman =
      ctx.gearman === null ? null : { counts: await ctx.gearman.ops.serverCounts(), snapshot: await ctx.gearman.view.snapshot() };
    const automation = ctx.automation === null ? '' : automationText(ctx.automation.schedules.fires(), await ctx.automation.alerts.states());
    const acl = ctx.acl == null ? '' : aclText(ctx.acl.denialCounts());
    res.type('text/plain; version=0.0.4').send(prometheusText(counts, tubes, info, gearman) + automation + acl);
  });
  // The config says whether a token is needed, so it is readable without one.
  top.get('/api/config', 'public', (_req, res) => {
    res.json(config);
  });
  // Each route's guard (access.ts) signs the request in and checks its role.
  app.use('/api', sameOriginForChanges());
  if (ctx.gearman !== null) app.use(gearmanRoutes(ctx.gearman.view, ctx.gearman.ops, access));
  // Before apiRoutes, whose last handler answers 404 for any other /api path.
  const external = new ExternalServers();
  for (const address of options.attach) external.add(address, 'flag');
  app.use(externalRoutes(external, access));
  if (ctx.cluster !== null) app.use(clusterRoutes(ctx.cluster, access));
  app.use(auditRoutes(ctx.audit, access));
  if (ctx.automation !== null) app.use(automationRoutes(ops, ctx.automation, access));
  app.use(policyRoutes(ops, ctx.gearman?.ops ?? null, ctx.policyOrigin ?? null, access));
  app.use(apiRoutes({ ops, info, config, minutes, access }));
  const indexFile = path.join(ctx.uiDir, 'index.html');
  if (existsSync(indexFile)) {
    const page = withBasePath(readFileSync(indexFile, 'utf8'), options.basePath);
    app.use(express.static(ctx.uiDir, { index: false, maxAge: '1h' }));
    // Deep links (/tubes/a%2Fb, /jobs/7) load the app, which routes on the client.
    const files = guardedRouter(access);
    files.get(/^(?!\/api\/|\/socket\.io\/).*/, 'public', (_req, res) => {
      res.set('Cache-Control', 'no-cache').type('html').send(page);
    });
    app.use(files.router);
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
  // The rate limit first: a socket flooding events it may not send is cut off like any other.
  io.on('connection', (socket) => limitSocketEvents(socket));
  guardSocket(io, access);
  const live = new LiveUpdates(io, ops, info, config, history, undefined, ctx.gearman?.view ?? null);

  return {
    close: async () => {
      live.close();
      external.closeAll();
      await new Promise<void>((resolve) => {
        void io.close(() => resolve());
      });
      await ctx.audit.close();
    },
  };
}
