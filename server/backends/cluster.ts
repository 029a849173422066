import os from 'node:os';
import { MAX_CLUSTER_JOB_SIZE } from '../cli.js';
import { ClusterAuditLog } from '../cluster/cluster-audit.js';
import { ClusterNode } from '../cluster/cluster-node.js';
import { ClusterStore } from '../cluster/cluster-store.js';
import { ClusterGearmanRegistry } from '../cluster/gearman-registry.js';
import { GearmanClusterStore } from '../cluster/gearman-store.js';
import { MAX_UNIQUE_BYTES } from '../gearman/limits.js';
import { noBinlogStats, processInfo } from '../server-info.js';
import { VERSION } from '../version.js';
import { StartupError, type Backend, type BackendContext } from './backend.js';

/** The exit status of a node that cannot use its database. */
const CLUSTER_EXIT_CODE = 111;

/**
 * Cluster mode: the jobs are in PostgreSQL (server/cluster/), shared with every node given the
 * same database; each protocol has a realm of its own (its tables), as a single process keeps an
 * engine per protocol. This node holds only its clients' sessions.
 */
export async function openClusterBackend({ options, log }: BackendContext): Promise<Backend> {
  const cluster = options.cluster!;
  let node: ClusterNode;
  let store: ClusterStore;
  let gearmanStore: GearmanClusterStore | null = null;
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
  } catch (err) {
    throw new StartupError(`cluster: cannot use the database: ${(err as Error).message}`, CLUSTER_EXIT_CODE);
  }
  const stores = gearmanStore === null ? [store] : [store, gearmanStore];
  const noBinlog = noBinlogStats(options.binlogSize);
  return {
    beanstalk: store,
    gearman: gearmanStore === null ? null : { ops: gearmanStore, registry: new ClusterGearmanRegistry(gearmanStore, clusterName(cluster.url)) },
    info: processInfo(() => noBinlog),
    dashboard: {
      binlog: false,
      historyDir: null,
      cluster: { nodeId: () => node.id, nodes: () => node.nodes(), leaseMs: cluster.leaseMs, now: node.now },
      // Shared by the nodes, in their database.
      audit: new ClusterAuditLog(node.pool, () => node.id, log),
    },
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

/** What every node of a cluster puts in its Gearman handles: the database's name. */
function clusterName(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.slice(1)) || 'cluster';
  } catch {
    return 'cluster';
  }
}
