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
import type pg from 'pg';
import type { Logger } from 'pino';
import { run } from './pool.js';
import type { Statement } from './sql.js';

/** Heartbeats per lease: a node may miss a few (a slow database) before others give up on it. */
const HEARTBEATS_PER_LEASE = 5;
/** Rows of nodes gone longer than this are removed (the dashboard shows recent ones). */
const FORGET_AFTER_MS = 24 * 60 * 60 * 1000;

const s = (name: string, text: string): Statement => ({ name: `beanpole_${name}`, text });
const SQL = {
  register: s(
    'register',
    `INSERT INTO beanpole_nodes (address, version, started_at, heartbeat_at, lease_until)
     VALUES ($1, $2, $3, $3, $3::bigint + $4) RETURNING id`,
  ),
  heartbeat: s(
    'heartbeat',
    `UPDATE beanpole_nodes SET heartbeat_at = $2, lease_until = $2::bigint + $3, connections = $4
     WHERE id = $1 AND gone_at IS NULL RETURNING id`,
  ),
  /** Ends the leases that ran out and gives back what those nodes held. $1 now. */
  reap: s(
    'reap',
    `WITH dead AS (
       UPDATE beanpole_nodes SET gone_at = $1 WHERE gone_at IS NULL AND lease_until < $1 RETURNING id
     )
     UPDATE beanpole_jobs SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0
     WHERE state = 1 AND holder_node IN (SELECT id FROM dead UNION ALL SELECT id FROM beanpole_nodes WHERE gone_at IS NOT NULL)
     RETURNING tube`,
  ),
  forget: s('forget', 'DELETE FROM beanpole_nodes WHERE gone_at IS NOT NULL AND gone_at < $1'),
  leave: s(
    'leave',
    `WITH me AS (UPDATE beanpole_nodes SET gone_at = $2 WHERE id = $1 RETURNING id)
     UPDATE beanpole_jobs SET state = 0, holder_node = NULL, holder_conn = NULL, due_at = 0
     WHERE state = 1 AND holder_node = $1 RETURNING tube`,
  ),
  nodes: s(
    'nodes',
    'SELECT id, address, version, started_at, heartbeat_at, lease_until, connections, gone_at FROM beanpole_nodes ORDER BY id',
  ),
};

export interface NodeRow {
  id: number;
  address: string;
  version: string;
  started_at: number;
  heartbeat_at: number;
  lease_until: number;
  connections: number;
  gone_at: number | null;
}

export interface NodeLeaseOptions {
  pool: pg.Pool;
  log: Logger;
  leaseMs: number;
  address: string;
  version: string;
  now: () => number;
  /** This node's connections, for its row (the dashboard's nodes view). */
  connections: () => number;
  /** Jobs became ready in these tubes (a dead node's reservations came back). */
  onReady: (tubes: Iterable<string>) => void;
}

export class NodeLease {
  /** This node's id in beanpole_nodes (it changes if the node loses its lease and registers again). */
  id = 0;
  private timer: NodeJS.Timeout | null = null;
  private beating = false;

  constructor(private readonly o: NodeLeaseOptions) {}

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
    const { pool, log, now } = this.o;
    try {
      const mine = await run(pool, SQL.heartbeat, [this.id, now(), this.o.leaseMs, this.o.connections()]);
      if (mine.length === 0) {
        const old = this.id;
        await this.register();
        log.warn({ old, node: this.id }, 'cluster: this node lost its lease (stopped or cut off too long); its reservations were given back; registered again');
      }
      const back = await run<{ tube: string }>(pool, SQL.reap, [now()]);
      if (back.length > 0) {
        log.info({ jobs: back.length }, 'cluster: reserved jobs of nodes whose lease ran out are ready again');
        this.o.onReady(new Set(back.map((r) => r.tube)));
      }
      await run(pool, SQL.forget, [now() - FORGET_AFTER_MS]);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'cluster: heartbeat failed');
    } finally {
      this.beating = false;
    }
  }

  /** A clean stop: the row is marked gone and what this node's clients held is ready again. */
  async leave(): Promise<string[]> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    const rows = await run<{ tube: string }>(this.o.pool, SQL.leave, [this.id, this.o.now()]);
    return rows.map((r) => r.tube);
  }

  async nodes(): Promise<NodeRow[]> {
    return run<NodeRow>(this.o.pool, SQL.nodes, []);
  }
}
