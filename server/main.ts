import path from 'node:path';
import { startFilePolicies, type PolicyOrigin } from './policies/file-policies.js';
import { fileURLToPath } from 'node:url';
import { Acl } from './acl/acl.js';
import type { AdminContext } from './admin/app.js';
import { AdminShell } from './admin/shell.js';
import { startAutomation, type Automation } from './automation/automation.js';
import { StartupError, type Backend } from './backends/backend.js';
import { openClusterBackend } from './backends/cluster.js';
import { openMemoryBackend } from './backends/memory.js';
import { USAGE, USAGE_EXIT_CODE, parseCommandLine, type ServerOptions } from './cli.js';
import { GearmanView } from './gearman/view.js';
import { keepAliveTuner, type SocketTuner } from './keepalive.js';
import { createLogger, type Logger } from './logger.js';
import { BeanstalkServer } from './protocol/beanstalk/server.js';
import { GearmanServer } from './protocol/gearman/server.js';
import { PrivilegeError, becomeUser, lookUpUser } from './privileges.js';
import type { TlsCredentials } from './tls/credentials.js';
import { reloadTls, secureDoors } from './tls/secure-doors.js';
import { VERSION } from './version.js';

/** Composition root: options -> a backend (memory or cluster) -> the doors on it -> signals. */
async function main(argv: string[]): Promise<void> {
  const cli = parseCommandLine(argv, process.env);
  if (cli.kind === 'help') {
    process.stderr.write(USAGE);
    process.exit(0);
  }
  if (cli.kind === 'version') {
    process.stdout.write(`beanpole ${VERSION}\n`);
    process.exit(0);
  }
  if (cli.kind === 'usage-error') {
    process.stderr.write(`beanpole: ${cli.message}\n${USAGE}`);
    process.exit(USAGE_EXIT_CODE);
  }
  const { options, warnings } = cli;
  const log = createLogger(options.verbosity);
  for (const w of warnings) log.warn(w);

  const user = options.user === null ? null : startupStep(log, () => lookUpUser(options.user!));
  const open = options.cluster === null ? openMemoryBackend : openClusterBackend;
  const backend = await open({ options, log, user }).catch((err: unknown) => startupFailed(log, err));
  const filePolicies = await startFilePolicies(options.policies, { tubes: backend.beanstalk, functions: backend.gearman?.ops ?? null }, log).catch(
    (err: unknown) => startupFailed(log, new StartupError(`--policies: ${(err as Error).message}`, 1)),
  );
  // --acl: one set of rules for both job ports, checked above the store (the same in a cluster).
  const acl = options.acl === null ? null : new Acl(options.acl.file, options.acl.rules, backend.beanstalk);
  const beanstalk = new BeanstalkServer({ ops: backend.beanstalk, info: backend.info, log, acl });
  // Schedules and alert rules: timers of their own over the beanstalkd realm's operations.
  const automation = startAutomation({ ops: backend.beanstalk, log, stores: backend.automation, tickMs: options.automationTickMs });
  const gearman =
    backend.gearman === null || options.gearman === null
      ? null
      : new GearmanServer({
          ops: backend.gearman.ops,
          registry: backend.gearman.registry,
          log,
          version: VERSION,
          pid: process.pid,
          logLevel: log.level,
          roundRobin: options.gearman.roundRobin,
          acl,
          shutdown: (graceful) => (graceful ? drainThenShutdown() : shutdown('gearman shutdown')),
        });
  // Handlers go in before listening: Node's default SIGUSR1 action would open the inspector.
  process.on('SIGPIPE', () => undefined);
  process.on('SIGUSR1', () => {
    log.info('SIGUSR1: entering drain mode; puts now get DRAINING');
    backend.setDraining();
  });
  let admin: AdminShell | null = null;
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    automation.stop();
    backend.stop();
    void Promise.all([beanstalk.close(), gearman?.close(), admin?.close()])
      .then(() => backend.close())
      .then(() => process.exit(0));
    setTimeout(() => process.exit(0), 5000).unref();
  };
  /** Gearman's `shutdown graceful`: no new jobs, then stop once no client here holds one. */
  const drainThenShutdown = (): void => {
    log.info('shutdown graceful: draining; stopping once no job is running here');
    backend.setDraining();
    const check = setInterval(() => {
      if (backend.heldJobs() > 0) return;
      clearInterval(check);
      shutdown('gearman shutdown graceful');
    }, 100);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  const banner: BannerFacts = { beanstalkd: null, gearman: null, dashboard: null };
  const tune = await socketTuner(options, log);
  if (tune !== null) for (const door of [beanstalk, gearman]) door?.server.on('connection', tune);
  const tls = secureDoors(options.tls, [beanstalk, gearman], log);
  if (tls !== null) process.on('SIGHUP', () => reloadTls(tls, log));
  if (acl !== null) process.on('SIGHUP', () => acl.reload(log));
  if (options.admin !== null) admin = await startDashboard(dashboardContext(backend, automation, options, log, tls, acl, filePolicies), user !== null, banner, tune);
  try {
    const where = await beanstalk.listen(options.listen, options.port);
    // Root is given up before the first client is served (this runs before any I/O callback),
    // so no binlog file is ever created as root.
    if (user !== null) startupStep(log, () => becomeUser(user));
    if (gearman !== null) await listenGearman(gearman, options, banner, log);
    banner.beanstalkd = where;
    const label = backend.label;
    const node = label.node === undefined ? '' : ` (cluster node ${label.node})`;
    log.info({ address: where, version: VERSION, ...label }, `beanstalkd protocol listening on ${where}${node}`);
    // A person at a terminal gets the addresses in words; logs stay JSON on stderr for machines.
    if (process.stdout.isTTY) process.stdout.write(startupBanner(banner));
  } catch (err) {
    log.fatal({ err }, 'cannot listen');
    process.exit(111);
  }
}

/** What the dashboard reads: the backend's stores, Gearman's view of its realm, and where the jobs are. */
function dashboardContext(
  backend: Backend,
  automation: Automation,
  options: ServerOptions,
  log: Logger,
  tls: TlsCredentials | null,
  acl: Acl | null,
  policyOrigin: PolicyOrigin | null,
): AdminContext {
  const { gearman } = backend;
  return {
    ops: backend.beanstalk,
    info: backend.info,
    gearman: gearman === null ? null : { view: new GearmanView(gearman.ops, gearman.registry), ops: gearman.ops },
    log,
    options: options.admin!,
    uiDir: UI_DIR,
    automation,
    ...backend.dashboard,
    tls,
    policyOrigin,
    acl,
  };
}

/** Gearman's port; as for the dashboard, the beanstalkd side keeps serving without it. */
async function listenGearman(gearman: GearmanServer, options: ServerOptions, banner: BannerFacts, log: Logger): Promise<void> {
  const { listen, port } = options.gearman!;
  try {
    const at = await gearman.listen(listen, port);
    banner.gearman = at;
    log.info({ address: at }, `Gearman protocol listening on ${at}`);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'Gearman port not started: cannot listen on its address (use --gearman-port or --no-gearman)');
  }
}

/** --keepalive's tuner for every door's accepted sockets; null: the doors keep their defaults. */
async function socketTuner(options: ServerOptions, log: Logger): Promise<SocketTuner | null> {
  if (options.keepAlive === null) return null;
  return keepAliveTuner(options.keepAlive, (err) => log.warn({ err }, 'keepalive: a socket option could not be set'));
}

/** The built dashboard, beside the compiled server. */
const UI_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'ui');

/**
 * Starts the dashboard's HTTP server (its modules load on the first request); null when it
 * cannot listen, since the job server matters more than its dashboard and keeps serving.
 */
async function startDashboard(ctx: AdminContext, preload: boolean, banner: BannerFacts, tune: SocketTuner | null): Promise<AdminShell | null> {
  const admin = new AdminShell(ctx);
  if (tune !== null) admin.tuneSockets(tune);
  // With -u, USER may not be able to read the modules: they load while the server is root.
  if (preload) await admin.preload();
  try {
    const url = await admin.listen();
    banner.dashboard = url;
    ctx.log.info({ url }, `dashboard on ${url}`);
    return admin;
  } catch (err) {
    ctx.log.warn({ err: (err as Error).message }, 'dashboard not started: cannot listen on its address (use --admin-port or --no-admin)');
    void admin.close();
    return null;
  }
}

/** What the startup banner lists (null: not serving it). */
interface BannerFacts {
  beanstalkd: string | null;
  gearman: string | null;
  dashboard: string | null;
}

function startupBanner(facts: BannerFacts): string {
  const lines = [
    `Beanpole ${VERSION}`,
    `  beanstalkd protocol  ${facts.beanstalkd ?? 'off'}`,
    `  Gearman protocol     ${facts.gearman ?? 'off'}`,
    `  dashboard            ${facts.dashboard ?? 'off'}`,
    '  (logs: JSON on stderr; beanpole --help for every flag)',
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * Runs a step of the start (-u USER, opening the backend); one that cannot be done exits with
 * its status (beanstalkd's for -u and -b) and one line that says what to fix.
 */
function startupStep<T>(log: Logger, step: () => T): T {
  try {
    return step();
  } catch (err) {
    return startupFailed(log, err);
  }
}

function startupFailed(log: Logger, err: unknown): never {
  if (!(err instanceof PrivilegeError) && !(err instanceof StartupError)) throw err;
  log.fatal(err.message);
  process.exit(err.exitCode);
}

void main(process.argv.slice(2));
