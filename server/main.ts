import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_GEARMAN_MAX_SIZE } from '../shared/limits.js';
import type { AdminContext } from './admin/app.js';
import { AdminShell } from './admin/shell.js';
import { MAX_CLUSTER_JOB_SIZE, USAGE, USAGE_EXIT_CODE, parseCommandLine, type ServerOptions } from './cli.js';
import { systemClock } from './engine/clock.js';
import { TurnClock } from './turn-clock.js';
import { Engine } from './engine/engine.js';
import { JOB_RECORD_HEAP_BYTES } from './engine/record-costs.js';
import { immediateDurability, nullJournal } from './engine/journal.js';
import { keepAliveTuner, type SocketTuner } from './keepalive.js';
import { createLogger, type Logger } from './logger.js';
import { machineFacts, memoryBudget } from './memory-budget.js';
import { Binlog } from './persistence/binlog.js';
import { BINLOG_EXIT_CODE, BinlogDirError, openBinlog, type OpenedBinlog } from './persistence/open-binlog.js';
import { ClusterNode } from './cluster/cluster-node.js';
import { ClusterStore } from './cluster/cluster-store.js';
import { ClusterGearmanRegistry } from './cluster/gearman-registry.js';
import { GearmanClusterStore } from './cluster/gearman-store.js';
import { BeanstalkServer } from './protocol/beanstalk/server.js';
import { GEARMAN_JOB_RECORD_BYTES, MAX_UNIQUE_BYTES } from './gearman/limits.js';
import { LocalGearmanRegistry } from './gearman/registry.js';
import { GearmanServer } from './protocol/gearman/server.js';
import { GearmanView } from './gearman/view.js';
import { PrivilegeError, becomeUser, fileOwner, lookUpUser, withUserIds } from './privileges.js';
import type { ServerInfo } from './server-info.js';
import { MemoryOperations } from './operations/memory-operations.js';
import { Scheduler } from './scheduler.js';
import { startAutomation, type Automation } from './automation/automation.js';
import { VERSION } from './version.js';

/** Composition root: options -> engine -> scheduler -> listeners -> signals. */
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
  if (options.cluster !== null) return clusterMain(options, log);

  const user = options.user === null ? null : privileged(log, () => lookUpUser(options.user!));
  const binlogDir = options.binlogDir;
  const binlog = binlogDir === null ? null : createBinlog(options, binlogDir, log, fileOwner(user));
  // Gearman's background jobs are journaled by a binlog of their own in DIR/gearman: the same
  // format, group commit and crash guarantees, and ids of their own, as beanstalkd never sees them.
  const gearmanDir = binlogDir === null || options.gearman === null ? null : path.join(binlogDir, GEARMAN_BINLOG_DIR);
  const gearmanBinlog = gearmanDir === null ? null : createBinlog(options, gearmanDir, log, fileOwner(user));
  const budget = memoryBudget(options.maxJobBytes, machineFacts());
  const engine = new Engine({
    clock: systemClock,
    ...budget,
    maxJobSize: options.maxJobSize,
    deadLetterAfter: options.deadLetterAfter,
    historyEvents: options.historyEvents,
    journal: binlog ?? nullJournal,
  });
  // Gearman's jobs live in an engine of their own: ids, tubes (functions) and stats that
  // beanstalkd clients never see, under the same memory budget. Gearman has its own size limit,
  // --gearman-max-size, on a job's data; a body keeps the unique id in front (gearman/job-body.ts).
  const gearmanEngine = new Engine({
    clock: new TurnClock(),
    ...budget,
    maxJobSize: (options.gearman?.maxSize ?? DEFAULT_GEARMAN_MAX_SIZE) + MAX_UNIQUE_BYTES + 1,
    dropAfterFailures: options.gearman?.jobRetries ?? 0,
    jobRecordBytes: GEARMAN_JOB_RECORD_BYTES,
    historyEvents: options.historyEvents,
    journal: gearmanBinlog ?? nullJournal,
  });
  engine.shareBudgetWith(gearmanEngine);
  // With -u, the directory is opened as USER: a directory USER cannot write stops the start here
  // (as beanstalkd refuses to start), and every file the binlog creates belongs to USER.
  const open = (): OpenedBinlog[] => [
    openPersistence(binlogDir!, binlog!, engine, log),
    ...(gearmanDir === null ? [] : [openPersistence(makeDirectory(gearmanDir, log), gearmanBinlog!, gearmanEngine, log)]),
  ];
  const persisted = binlog === null ? [] : user === null ? open() : privileged(log, () => withUserIds(user, open));
  const scheduler = new Scheduler(engine);
  const gearmanScheduler = new Scheduler(gearmanEngine);
  // Restored delayed jobs may already be due (downtime counts): serve them before anyone asks.
  scheduler.poke();
  gearmanScheduler.poke();
  const noBinlog = { oldestIndex: 0, currentIndex: 0, recordsMigrated: 0, recordsWritten: 0, maxSize: options.binlogSize };
  const info = serverInfo(() => binlog?.stats() ?? noBinlog);
  const durability = binlog ?? immediateDurability;
  // Every front door calls these operations, never the engine.
  const ops = new MemoryOperations({ engine, durability, onActivity: scheduler.poke });
  const beanstalk = new BeanstalkServer({ ops, info, log, onActivity: scheduler.poke, durability });
  const gearmanDurability = gearmanBinlog ?? immediateDurability;
  const gearmanOps = new MemoryOperations({ engine: gearmanEngine, durability: gearmanDurability, onActivity: gearmanScheduler.poke });
  // Schedules and alert rules (server/automation); with -b their files sit in DIR.
  const automation = await startAutomation({ ops, log, onActivity: scheduler.poke, dir: binlogDir, cluster: null, tickMs: options.automationTickMs }).catch(
    (err: Error) => {
      log.fatal({ dir: binlogDir, err: err.message }, `schedules or alert rules cannot be read: ${err.message}`);
      return process.exit(BINLOG_EXIT_CODE);
    },
  );
  const registry = new LocalGearmanRegistry(gearmanOps, os.hostname());
  // Unique ids of restored jobs coalesce again.
  await registry.restore();
  const gearman =
    options.gearman === null
      ? null
      : new GearmanServer({
          ops: gearmanOps,
          registry,
          log,
          onActivity: gearmanScheduler.poke,
          durability: gearmanDurability,
          version: VERSION,
          pid: process.pid,
          logLevel: log.level,
          roundRobin: options.gearman.roundRobin,
          shutdown: (graceful) => (graceful ? drainThenShutdown() : shutdown('gearman shutdown')),
        });
  // Handlers go in before listening: Node's default SIGUSR1 action would open the inspector.
  process.on('SIGPIPE', () => undefined);
  process.on('SIGUSR1', () => {
    log.info('SIGUSR1: entering drain mode; puts now get DRAINING');
    engine.setDraining();
    gearmanEngine.setDraining();
  });
  let admin: AdminShell | null = null;
  const banner: BannerFacts = { beanstalkd: null, gearman: null, dashboard: null };
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    scheduler.stop();
    gearmanScheduler.stop();
    automation.stop();
    // Everything appended is written and fsynced first; that also releases held replies. A
    // failure here is logged, never thrown: the process still exits, and recovery copes.
    for (const [i, journal] of [binlog, gearmanBinlog].entries()) {
      if (journal === null || persisted[i] === undefined) continue;
      bestEffort(log, 'binlog: closing failed', () => journal.close());
      bestEffort(log, 'binlog: releasing the directory lock failed', () => persisted[i]!.lock.release());
    }
    void Promise.all([beanstalk.close(), gearman?.close(), admin?.close()]).then(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  /** Gearman's `shutdown graceful`: no new jobs, then stop once no worker holds one. */
  const drainThenShutdown = (): void => {
    log.info('shutdown graceful: draining; stopping once no job is running');
    engine.setDraining();
    gearmanEngine.setDraining();
    const check = setInterval(() => {
      if (engine.stats.reserved + gearmanEngine.stats.reserved > 0) return;
      clearInterval(check);
      shutdown('gearman shutdown graceful');
    }, 100);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  const tune = await socketTuner(options, log);
  if (tune !== null) for (const door of [beanstalk, gearman]) door?.server.on('connection', tune);
  if (options.admin !== null) {
    admin = await startDashboard(
      {
        ops,
        info,
        gearman: gearman === null ? null : { view: new GearmanView(gearmanOps, registry), ops: gearmanOps, onActivity: gearmanScheduler.poke },
        log,
        options: options.admin,
        uiDir: UI_DIR,
        binlog: binlog !== null,
        historyDir: binlogDir === null ? null : path.join(binlogDir, 'stats-history'),
        cluster: null,
        onActivity: scheduler.poke,
        automation,
      },
      user !== null,
      banner,
      tune,
    );
  }
  try {
    const where = await beanstalk.listen(options.listen, options.port);
    // Root is given up before the first client is served (this runs before any I/O callback),
    // so no binlog file is ever created as root.
    if (user !== null) privileged(log, () => becomeUser(user));
    banner.beanstalkd = where;
    log.info({ address: where, version: VERSION }, `beanstalkd protocol listening on ${where}`);
    if (gearman !== null) await listenGearman(gearman, options, banner, log);
    const jobs = Math.floor(budget.maxRecordHeapBytes / JOB_RECORD_HEAP_BYTES);
    log.info({ ...budget }, `memory budget: ${jobs} jobs on the heap, ${budget.maxJobBytes} bytes of bodies`);
    // A person at a terminal gets the addresses in words; logs stay JSON on stderr for machines.
    if (process.stdout.isTTY) process.stdout.write(startupBanner(banner));
  } catch (err) {
    log.fatal({ err }, 'cannot listen');
    process.exit(111);
  }
}

/**
 * Cluster mode: the jobs are in PostgreSQL (server/cluster/), shared with every node given the
 * same database; this node serves the beanstalkd and Gearman protocols and the dashboard over
 * them, each protocol over a realm of its own (its tables), as a single node keeps two engines.
 */
async function clusterMain(options: ServerOptions, log: Logger): Promise<void> {
  const cluster = options.cluster!;
  const user = options.user === null ? null : privileged(log, () => lookUpUser(options.user!));
  let node: ClusterNode;
  let store: ClusterStore;
  let gearmanStore: GearmanClusterStore | null = null;
  let automation: Automation;
  try {
    node = await ClusterNode.open({
      url: cluster.url,
      leaseMs: cluster.leaseMs,
      address: `${os.hostname()}:${options.port}`,
      version: VERSION,
      historyEvents: options.historyEvents,
      gearmanJobRetries: options.gearman?.jobRetries ?? 0,
      log,
    });
    const limits = { maxJobBytes: options.maxJobBytes, deadLetterAfter: options.deadLetterAfter, historyEvents: options.historyEvents };
    store = await ClusterStore.join(node, { ...limits, maxJobSize: options.maxJobSize });
    if (options.gearman !== null) {
      // A body keeps the unique id in front of the data (gearman/job-body.ts), under the cluster's cap.
      const maxJobSize = Math.min(options.gearman.maxSize + MAX_UNIQUE_BYTES + 1, MAX_CLUSTER_JOB_SIZE);
      gearmanStore = await GearmanClusterStore.joinGearman(node, { ...limits, maxJobSize });
    }
    node.start();
    automation = await startAutomation({ ops: store, log, onActivity: () => undefined, dir: null, cluster: { pool: node.pool, node: node.id }, tickMs: options.automationTickMs });
  } catch (err) {
    log.fatal({ err: (err as Error).message }, `cluster: cannot use the database: ${(err as Error).message}`);
    process.exit(111);
  }
  const info = serverInfo(() => ({ oldestIndex: 0, currentIndex: 0, recordsMigrated: 0, recordsWritten: 0, maxSize: options.binlogSize }));
  const noop = (): void => undefined;
  const beanstalk = new BeanstalkServer({ ops: store, info, log, onActivity: noop, durability: immediateDurability });
  const registry = gearmanStore === null ? null : new ClusterGearmanRegistry(gearmanStore, clusterName(cluster.url));
  const gearman =
    gearmanStore === null || registry === null
      ? null
      : new GearmanServer({
          ops: gearmanStore,
          registry,
          log,
          onActivity: noop,
          durability: immediateDurability,
          version: VERSION,
          pid: process.pid,
          logLevel: log.level,
          roundRobin: options.gearman?.roundRobin === true,
          shutdown: (graceful) => (graceful ? drainThenShutdown() : shutdown('gearman shutdown')),
        });
  const stores = gearmanStore === null ? [store] : [store, gearmanStore];
  process.on('SIGPIPE', noop);
  process.on('SIGUSR1', () => {
    log.info('SIGUSR1: entering drain mode; puts now get DRAINING');
    for (const s of stores) s.setDraining();
  });
  let admin: AdminShell | null = null;
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    automation.stop();
    // The node leaves the cluster: what its clients held is ready again for the other nodes.
    void Promise.all([beanstalk.close(), gearman?.close(), admin?.close()])
      .then(() => node.close())
      .then(() => process.exit(0));
    setTimeout(() => process.exit(0), 5000).unref();
  };
  /** Gearman's `shutdown graceful`: no new jobs, then stop once no client of this node holds one. */
  const drainThenShutdown = (): void => {
    log.info('shutdown graceful: draining; stopping once no job is running here');
    for (const s of stores) s.setDraining();
    const check = setInterval(() => {
      if (stores.some((s) => s.sessions().some((c) => c.reserved.length > 0))) return;
      clearInterval(check);
      shutdown('gearman shutdown graceful');
    }, 100);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  const banner: BannerFacts = { beanstalkd: null, gearman: null, dashboard: null };
  const tune = await socketTuner(options, log);
  if (tune !== null) for (const door of [beanstalk, gearman]) door?.server.on('connection', tune);
  if (options.admin !== null) {
    admin = await startDashboard(
      {
        ops: store,
        info,
        gearman: gearmanStore === null || registry === null ? null : { view: new GearmanView(gearmanStore, registry), ops: gearmanStore, onActivity: noop },
        log,
        options: options.admin,
        uiDir: UI_DIR,
        binlog: false,
        historyDir: null,
        cluster: { nodeId: () => node.id, nodes: () => node.nodes(), leaseMs: cluster.leaseMs, now: node.now },
        onActivity: noop,
        automation,
      },
      user !== null,
      banner,
      tune,
    );
  }
  try {
    const where = await beanstalk.listen(options.listen, options.port);
    if (gearman !== null) await listenGearman(gearman, options, banner, log);
    if (user !== null) privileged(log, () => becomeUser(user));
    banner.beanstalkd = where;
    log.info({ address: where, version: VERSION, node: node.id }, `beanstalkd protocol listening on ${where} (cluster node ${node.id})`);
    if (process.stdout.isTTY) process.stdout.write(startupBanner(banner));
  } catch (err) {
    log.fatal({ err }, 'cannot listen');
    process.exit(111);
  }
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

/** What every node of a cluster puts in its Gearman handles: the database's name. */
function clusterName(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.slice(1)) || 'cluster';
  } catch {
    return 'cluster';
  }
}

/** What `stats` says of this process, with a fresh random instance id. */
function serverInfo(binlog: ServerInfo['binlog']): ServerInfo {
  return {
    version: VERSION,
    instanceId: randomBytes(8).toString('hex'),
    hostname: os.hostname(),
    os: os.version(),
    platform: os.machine(),
    pid: process.pid,
    binlog,
  };
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

/** Runs a step of -u USER; failing, exits with beanstalkd's status for it. */
function privileged<T>(log: Logger, step: () => T): T {
  try {
    return step();
  } catch (err) {
    if (!(err instanceof PrivilegeError)) throw err;
    log.fatal(err.message);
    process.exit(err.exitCode);
  }
}

function bestEffort(log: Logger, what: string, step: () => void): void {
  try {
    step();
  } catch (err) {
    log.error({ err: (err as Error).message }, what);
  }
}

function createBinlog(options: ServerOptions, dir: string, log: Logger, owner: { uid: number; gid: number } | null): Binlog {
  return new Binlog({
    dir,
    owner,
    segmentBytes: options.binlogSize,
    fsyncMs: options.fsyncMs,
    log,
    onFatal: (err) => {
      // Replies for the changes not yet written are still held: exiting acknowledges nothing
      // that is not on disk, and a restart replays exactly what is.
      log.fatal({ dir, err: err.message }, 'binlog: write failed on claimed space; stopping so no unwritten change is acknowledged');
      process.exit(1);
    },
  });
}

/** Where Gearman's binlog lives inside `-b DIR`. */
const GEARMAN_BINLOG_DIR = 'gearman';

/** Creates `dir` if it is missing (as USER with -u); exits like an unusable -b directory when it cannot. */
function makeDirectory(dir: string, log: Logger): string {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    log.fatal({ dir, err: (err as Error).message }, `binlog directory is not usable: cannot create ${dir}: ${(err as Error).message}`);
    process.exit(BINLOG_EXIT_CODE);
  }
  return dir;
}

/** -b DIR: lock and replay the binlog, or exit like beanstalkd when the directory is unusable. */
function openPersistence(dir: string, binlog: Binlog, engine: Engine, log: Logger): OpenedBinlog {
  try {
    const opened = openBinlog(dir, binlog, engine, log);
    log.info(
      {
        dir,
        jobs: opened.jobs,
        records: opened.recovery.records,
        segments: opened.recovery.segments.length,
        problems: opened.recovery.problems.length,
        ms: Math.round(opened.replayMs),
      },
      `binlog: recovered ${opened.jobs} jobs in ${Math.round(opened.replayMs)} ms`,
    );
    return opened;
  } catch (err) {
    if (err instanceof BinlogDirError) {
      // One line that says what to fix; a stack trace would only bury it.
      log.fatal({ dir, err: err.message }, `binlog directory is not usable: ${err.message}`);
      process.exit(BINLOG_EXIT_CODE);
    }
    throw err;
  }
}

void main(process.argv.slice(2));
