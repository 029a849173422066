/**
 * This process as a member of the cluster: its pool of database connections, its row and lease
 * in beanpole_nodes (node-lease.ts), and the realms it serves over them (the beanstalkd jobs and
 * the Gearman jobs, each a ClusterStore of its own). The lease is the node's, not a realm's: when
 * it runs out, every realm gives back what the node's clients held.
 */
import type { Logger } from 'pino';
import type pg from 'pg';
import { NodeLease, type NodeRow } from './node-lease.js';
import { checkIn, checkOut, connectionConfig, createPool, HOT_POOL_SIZE, type Queryable } from './pool.js';
import { parseClusterUrl } from '../common/cluster-url.js';
import { PrimaryFinder } from './primary-finder.js';
import { migrate } from './schema.js';

export interface ClusterNodeOptions {
  /** --cluster: one host, or libpq's list of hosts (cluster-url.ts). */
  url: string;
  leaseMs: number;
  /** This node's beanstalkd address, for the nodes view. */
  address: string;
  version: string;
  /** Job history events kept (--history-events; 0: this node records none). */
  historyEvents: number;
  /** --gearman-job-retries: a Gearman job this node's statements give back for the N-th time is dropped (0: never). */
  gearmanJobRetries?: number;
  log: Logger;
  now?: () => number;
}

/** What the node asks of each realm it serves. */
export interface RealmMember {
  /** Clients connected to this realm's door on this node. */
  connections(): number;
  /** Gives back what gone nodes held (every gone node's, or `node`'s only when it leaves). */
  reclaim(db: Queryable, node: number | null): Promise<void>;
  /** Folds the per-node counts of nodes gone before `cutoff` into node 0's. */
  forgetNodes(db: Queryable, cutoff: number): Promise<void>;
  /** The heartbeat counted `others` nodes besides this one (wakeups.ts: nobody to tell, no news sent). */
  othersCounted(others: number): void;
  /** The node leaves: stop timers and listeners (the node then gives back what was held). */
  stop(): Promise<void>;
  /** After the give-back: tell the other nodes, and close what is the realm's own. */
  close(): Promise<void>;
}

export class ClusterNode {
  readonly pool: pg.Pool;
  /**
   * The batched puts, reserves and deletes. With history on, they run on connections of their
   * own where the history trigger does not fire, and write their events themselves, one row per
   * statement (sql.ts, `record`). Without history, the pool itself.
   */
  readonly hotPool: pg.Pool;
  readonly lease: NodeLease;
  readonly log: Logger;
  readonly now: () => number;
  /** Where its connections go: the primary among the URL's hosts. */
  readonly database: PrimaryFinder;
  private readonly realms: RealmMember[] = [];
  private closed = false;

  private constructor(readonly options: ClusterNodeOptions) {
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.database = new PrimaryFinder(parseClusterUrl(options.url), options.log, connectionConfig());
    const retries = options.gearmanJobRetries ?? 0;
    this.pool = createPool(this.database, options.log, options.historyEvents > 0, undefined, retries);
    this.hotPool = options.historyEvents > 0 ? createPool(this.database, options.log, false, HOT_POOL_SIZE, retries) : this.pool;
    this.lease = new NodeLease({
      pool: this.pool,
      database: this.database,
      history: options.historyEvents > 0,
      gearmanJobRetries: retries,
      log: options.log,
      leaseMs: options.leaseMs,
      address: options.address,
      version: options.version,
      now: this.now,
      connections: () => this.realms.reduce((n, r) => n + r.connections(), 0),
      onGone: async (db) => {
        for (const realm of this.realms) await realm.reclaim(db, null);
      },
      onForget: async (db, cutoff) => {
        for (const realm of this.realms) await realm.forgetNodes(db, cutoff);
      },
      onOthers: (others) => {
        for (const realm of this.realms) realm.othersCounted(others);
      },
    });
  }

  /** Connects, migrates the schema and registers this node (its lease starts with `start`). */
  static async open(options: ClusterNodeOptions): Promise<ClusterNode> {
    const node = new ClusterNode(options);
    try {
      const client = await checkOut(node.pool);
      try {
        const { from, to } = await migrate(client);
        if (from !== to) options.log.info({ from, to }, 'cluster: database schema migrated');
      } finally {
        checkIn(client);
      }
      await node.lease.register();
    } catch (err) {
      await node.endPools();
      throw err;
    }
    return node;
  }

  get id(): number {
    return this.lease.id;
  }

  /** A realm served by this node (before `start`). */
  join(realm: RealmMember): void {
    this.realms.push(realm);
  }

  /** Starts the heartbeats, once every realm has joined. */
  start(): void {
    this.lease.start();
    this.log.info({ node: this.id }, 'cluster: joined');
  }

  nodes(): Promise<NodeRow[]> {
    return this.lease.nodes();
  }

  /** Leaves the cluster: what this node's clients held is ready again for the other nodes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const realm of this.realms) await realm.stop();
    try {
      await this.lease.leave();
      for (const realm of this.realms) await realm.reclaim(this.pool, this.id);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: leaving cleanly failed (the lease runs out instead)');
    }
    for (const realm of this.realms) await realm.close();
    await this.endPools();
  }

  private async endPools(): Promise<void> {
    await this.pool.end().catch(() => undefined);
    if (this.hotPool !== this.pool) await this.hotPool.end().catch(() => undefined);
  }
}
