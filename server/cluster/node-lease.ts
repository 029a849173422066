/**
 * This node's row in beanpole_nodes and its lease: a heartbeat renews it every LEASE_SHARE of
 * --cluster-lease-ms. Every node also looks for nodes whose lease ran out (killed, cut off,
 * stopped with SIGSTOP) and gives their reserved jobs back to ready, as a disconnect would: so a
 * dead node's jobs come back within about 1.2 leases of its last heartbeat, not after their TTR.
 *
 * A node that finds its own lease gone (it was stopped longer than the lease) registers again
 * under a new id: the reservations it had are void (their tokens name the old id), so a late
 * delete or release from it gets NOT_FOUND instead of touching a job someone else holds now.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { connectionConfig, run } from './pool.js';
import type { PrimaryFinder } from './primary-finder.js';
import type { Statement } from './sql.js';
import type { NodeRecord } from '../operations/cluster-nodes.js';

/** Heartbeats per lease: a node may miss a few (a slow database) before others give up on it. */
const HEARTBEATS_PER_LEASE = 5;
/** Rows of nodes gone longer than this are removed (the dashboard shows recent ones). */
const FORGET_AFTER_MS = 24 * 60 * 60 * 1000;
/** How often a node looks for such rows: not every beat, which must stay short. */
const FORGET_EVERY_MS = 60 * 1000;

const s = (name: string, text: string): Statement => ({ name: `beanpole_${name}`, text });
const SQL = {
  register: s(
    'register',
    `INSERT INTO beanpole_nodes (address, version, started_at, heartbeat_at, lease_until)
     VALUES ($1, $2, $3, $3, $3::bigint + $4) RETURNING id`,
  ),
  /** Renews the lease, and counts the other nodes not gone (those whose lease ran out but are not reaped yet too). */
  heartbeat: s(
    'heartbeat',
    `UPDATE beanpole_nodes SET heartbeat_at = $2, lease_until = $2::bigint + $3, connections = $4
     WHERE id = $1 AND gone_at IS NULL
     RETURNING id, (SELECT count(*) FROM beanpole_nodes o WHERE o.gone_at IS NULL AND o.id <> $1)::integer AS others`,
  ),
  /** Ends the leases that ran out ($1 now); each realm then gives back what gone nodes held. */
  reap: s('reap', 'UPDATE beanpole_nodes SET gone_at = $1 WHERE gone_at IS NULL AND lease_until < $1 RETURNING id'),
  /**
   * Removes nodes gone before $1 (a day ago), their body bytes folded into node 0's row (which
   * no node uses), so restarts do not pile up rows. Each realm folds its own per-node counts first.
   */
  forget: s(
    'forget',
    `WITH old AS (DELETE FROM beanpole_nodes WHERE gone_at IS NOT NULL AND gone_at < $1 RETURNING id),
     bytes AS (DELETE FROM beanpole_node_bytes WHERE node IN (SELECT id FROM old) RETURNING bytes)
     INSERT INTO beanpole_node_bytes (node, bytes) SELECT 0, COALESCE(sum(bytes), 0) FROM bytes
     ON CONFLICT (node) DO UPDATE SET bytes = beanpole_node_bytes.bytes + EXCLUDED.bytes`,
  ),
  leave: s('leave', 'UPDATE beanpole_nodes SET gone_at = $2 WHERE id = $1'),
  nodes: s(
    'nodes',
    'SELECT id, address, version, started_at, heartbeat_at, lease_until, connections, gone_at FROM beanpole_nodes ORDER BY id',
  ),
};

/** A node's row in beanpole_nodes. */
export type NodeRow = NodeRecord;

export interface NodeLeaseOptions {
  pool: pg.Pool;
  /** The database's hosts, for the heartbeat's own connection. */
  database: PrimaryFinder;
  /** Its statements record job history (a dead node's reservations given back). */
  history: boolean;
  /** --gearman-job-retries (pool.ts connectionConfig). */
  gearmanJobRetries: number;
  log: Logger;
  leaseMs: number;
  address: string;
  version: string;
  now: () => number;
  /** This node's connections, for its row (the dashboard's nodes view). */
  connections: () => number;
  /**
   * Nodes are gone (their lease ran out, or they left): each realm gives back what they held.
   * Runs on the heartbeat's own connection.
   */
  onGone: (db: pg.ClientBase) => Promise<void>;
  /** Before rows of nodes gone since before `cutoff` are removed: each realm folds their counts. */
  onForget: (db: pg.ClientBase, cutoff: number) => Promise<void>;
  /** Each heartbeat's count of the other nodes not gone (a realm with nobody to tell sends no news). */
  onOthers: (others: number) => void;
}

export class NodeLease {
  /** This node's id in beanpole_nodes (it changes if the node loses its lease and registers again). */
  id = 0;
  private timer: NodeJS.Timeout | null = null;
  private beating = false;
  /**
   * A connection of its own: heartbeats never wait behind clients' statements in the pool (a
   * busy pool would otherwise let a live node's lease run out).
   */
  private client: pg.Client | null = null;
  /** When gone nodes' rows were last looked for. */
  private forgotAt = 0;
  /** Since when heartbeats have succeeded without a break (0: the last one failed). */
  private healthySince = 0;

  constructor(private readonly o: NodeLeaseOptions) {}

  private async connection(): Promise<pg.Client> {
    if (this.client !== null) return this.client;
    const client = new this.o.database.Client({
      ...connectionConfig(this.o.history, this.o.gearmanJobRetries),
      // A heartbeat slower than half a lease is as good as missed.
      query_timeout: Math.max(100, Math.floor(this.o.leaseMs / 2)),
      connectionTimeoutMillis: Math.max(100, Math.floor(this.o.leaseMs / 2)),
      keepAlive: true,
    });
    client.on('error', () => {
      if (this.client === client) this.client = null;
    });
    await client.connect();
    this.client = client;
    return client;
  }

  async register(): Promise<number> {
    const [row] = await run<{ id: number }>(this.o.pool, SQL.register, [this.o.address, this.o.version, this.o.now(), this.o.leaseMs]);
    this.id = row!.id;
    return this.id;
  }

  start(): void {
    const every = Math.max(20, Math.floor(this.o.leaseMs / HEARTBEATS_PER_LEASE));
    this.timer = setInterval(() => void this.beat(), every);
    this.timer.unref();
  }

  /** One heartbeat and one look for dead nodes; errors are logged (the next beat tries again). */
  async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    const { log, now } = this.o;
    try {
      const db = await this.connection();
      const [mine] = await run<{ id: number; others: number }>(db, SQL.heartbeat, [this.id, now(), this.o.leaseMs, this.o.connections()]);
      if (mine === undefined) {
        const old = this.id;
        await this.register();
        log.warn({ old, node: this.id }, 'cluster: this node lost its lease (stopped or cut off too long); its reservations were given back; registered again');
      } else {
        this.o.onOthers(mine.others);
      }
      if (this.healthySince === 0) this.healthySince = now();
      // Only a node that has itself beaten on time for a whole lease judges the others: after
      // an outage every node's last heartbeat is old, and the first one back must not reap
      // nodes that are alive and just as cut off as it was.
      if (now() - this.healthySince >= this.o.leaseMs) {
        const dead = await run<{ id: number }>(db, SQL.reap, [now()]);
        if (dead.length > 0) log.info({ nodes: dead.map((d) => d.id) }, 'cluster: nodes whose lease ran out are gone; what they held is ready again');
        // Every beat, not only when a lease ends now: a give-back that failed is tried again.
        await this.o.onGone(db);
        if (now() - this.forgotAt >= FORGET_EVERY_MS) {
          this.forgotAt = now();
          const cutoff = now() - FORGET_AFTER_MS;
          await this.o.onForget(db, cutoff);
          await run(db, SQL.forget, [cutoff]);
        }
      }
    } catch (err) {
      this.healthySince = 0;
      log.warn({ err: (err as Error).message }, 'cluster: heartbeat failed');
      void this.client?.end().catch(() => undefined);
      this.client = null;
    } finally {
      this.beating = false;
    }
  }

  /** A clean stop: the row is marked gone (the realms then give back what this node's clients held). */
  async leave(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    void this.client?.end().catch(() => undefined);
    this.client = null;
    await run(this.o.pool, SQL.leave, [this.id, this.o.now()]);
  }

  async nodes(): Promise<NodeRow[]> {
    return run<NodeRow>(this.o.pool, SQL.nodes, []);
  }
}
