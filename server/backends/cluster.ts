import os from 'node:os';
import { MAX_CLUSTER_JOB_SIZE } from '../cli.js';
import { parseClusterUrl } from '../common/cluster-url.js';
import { ClusterAuditLog } from '../cluster/cluster-audit.js';
import { ClusterNode } from '../cluster/cluster-node.js';
import { ClusterStore } from '../cluster/cluster-store.js';
import { ClusterGearmanRegistry } from '../cluster/gearman-registry.js';
import { GearmanHooks } from '../cluster/gearman-hooks.js';
import { GEARMAN_REALM } from '../cluster/realm.js';
import { MAX_UNIQUE_BYTES } from '../gearman/limits.js';
import { noBinlogStats, processInfo } from '../server-info.js';
import { VERSION } from '../version.js';
import { startupFailure } from '../cluster/startup-errors.js';
import { AlertTableStore } from '../cluster/alert-table-store.js';
import { createAutomationTables } from '../cluster/automation-tables.js';
import { ScheduleTableStore } from '../cluster/schedule-table-store.js';
import { StartupError, type Backend, type BackendContext } from './backend.js';

/** The exit status of a node that cannot use its database. */
const CLUSTER_EXIT_CODE = 111;

/**
 * Cluster mode: the jobs are in PostgreSQL (server/cluster/), shared with every node given the
 * same database; each protocol has a realm of its own (its tables), as a single process keeps an
 * engine per protocol. This node holds only its clients' sessions.
 */
export async function openClusterBackend(ctx: BackendContext): Promise<Backend> {
  const { options, log } = ctx;
  const cluster = options.cluster!;
  const { node, store, gearmanStore } = await joinWhenReachable(ctx);
  const stores: ClusterStore[] = gearmanStore === null ? [store] : [store, gearmanStore];
  const noBinlog = noBinlogStats(options.binlogSize);
  // Not awaited: a node serves jobs without waiting for these tables; the stores' statements
  // wait for them, and a failure is said by each evaluation until it is fixed.
  const tables = createAutomationTables(node.pool);
  tables.catch((err: Error) => log.error({ err: err.message }, 'schedules and alerts: cannot create their tables'));
  return {
    beanstalk: store,
    gearman: gearmanStore === null ? null : { ops: gearmanStore, registry: new ClusterGearmanRegistry(gearmanStore.hooks, clusterName(cluster.url)) },
    info: processInfo(() => noBinlog),
    dashboard: {
      binlog: false,
      historyDir: null,
      cluster: { nodeId: () => node.id, nodes: () => node.nodes(), leaseMs: cluster.leaseMs, now: node.now },
      // Shared by the nodes, in their database.
      audit: new ClusterAuditLog(node.pool, () => node.id, log),
    },
    automation: { schedules: new ScheduleTableStore(node.pool, tables), alerts: new AlertTableStore(node.pool, tables), node: node.id },
    get label() {
      return { node: node.id };
    },
    setDraining() {
      for (const s of stores) s.setDraining();
    },
    heldJobs: () => stores.reduce((n, s) => n + s.sessions().reduce((m, c) => m + c.reserved.length, 0), 0),
    stop() {},
    // The node leaves the cluster: what its clients held is ready again for the other nodes.
    close: () => node.close(),
  };
}

/** The first wait after a failed attempt, and the longest. */
const FIRST_RETRY_MS = 500;
const LONGEST_RETRY_MS = 30_000;

/**
 * Joins the cluster, trying again with a growing delay while the database cannot be reached (it
 * is starting, failing over, or the network is down), each attempt logged with its reason. The
 * node opens no port meanwhile: clients find it closed, as they would a node not started yet.
 * An answer that trying again will not change (a refused login, no such database, a role
 * without rights) ends the start at once with one line; so does --cluster-connect-timeout.
 */
async function joinWhenReachable(ctx: BackendContext): Promise<Joined> {
  const { log } = ctx;
  const timeoutMs = ctx.options.cluster!.connectTimeoutMs;
  const startedAt = Date.now();
  for (let attempt = 1, waitMs = FIRST_RETRY_MS; ; attempt++, waitMs = Math.min(waitMs * 2, LONGEST_RETRY_MS)) {
    try {
      return await join(ctx);
    } catch (err) {
      const failure = startupFailure(err);
      if (!failure.transient) throw new StartupError(`cluster: cannot use the database: ${failure.reason}`, CLUSTER_EXIT_CODE);
      const left = timeoutMs === null ? Number.POSITIVE_INFINITY : startedAt + timeoutMs - Date.now();
      if (left <= 0) {
        throw new StartupError(`cluster: gave up reaching the database after ${attempt} attempts (--cluster-connect-timeout): ${failure.reason}`, CLUSTER_EXIT_CODE);
      }
      const retryInMs = Math.min(waitMs, left);
      log.warn({ attempt, retryInMs, err: failure.reason }, `cluster: cannot reach the database (${failure.reason}); trying again in ${retryInMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}

interface Joined {
  node: ClusterNode;
  store: ClusterStore;
  gearmanStore: ClusterStore<GearmanHooks> | null;
}

/** One attempt: connect, migrate, register, and serve both realms. */
async function join({ options, log }: BackendContext): Promise<Joined> {
  const cluster = options.cluster!;
  let node: ClusterNode | null = null;
  let gearmanStore: ClusterStore<GearmanHooks> | null = null;
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
    const store = await ClusterStore.join(node, { ...limits, maxJobSize: options.maxJobSize });
    if (options.gearman !== null) {
      // A body keeps the unique id in front of the data (gearman/job-body.ts), under the cluster's cap.
      const maxJobSize = Math.min(options.gearman.maxSize + MAX_UNIQUE_BYTES + 1, MAX_CLUSTER_JOB_SIZE);
      gearmanStore = await ClusterStore.joinRealm(node, { ...limits, maxJobSize }, GEARMAN_REALM, (s) => new GearmanHooks(s));
    }
    node.start();
    return { node, store, gearmanStore };
  } catch (err) {
    await node?.close().catch(() => undefined);
    throw err;
  }
}

/** What every node of a cluster puts in its Gearman handles: the database's name. */
function clusterName(url: string): string {
  return parseClusterUrl(url).database || 'cluster';
}
