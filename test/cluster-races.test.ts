/**
 * Races of cluster mode, driven in process against the real store on a real PostgreSQL (a fresh
 * database per test): a connection that closes while its reserve is in flight, a touch that
 * meets the holder's own expiry, one failing group of a batched reserve, a pause of a tube that
 * does not exist, a reserve over two tubes beside a reserve of one, a node reaped while it still
 * serves, and heartbeats that must not be starved by clients' slow statements or end in a live
 * node being reaped after an outage.
 */
import pg from 'pg';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { ClusterNode } from '../server/cluster/cluster-node.js';
import { ClusterStore } from '../server/cluster/cluster-store.js';
import type { ClientOperations, JobBytes, ReserveOutcome } from '../server/operations/operations.js';
import { QUIET_DELEGATE as quiet } from '../server/testing.js';
import { freshDatabase } from './support/cluster-db.js';

const pgUrl = inject('pgUrl');
const stores: ClusterStore[] = [];
const log = pino({ level: 'silent' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

afterEach(async () => {
  for (const s of stores.splice(0)) await s.node.close();
});

/** A node serving the beanstalkd realm, its lease started; `now`: its clock (the system's by default). */
async function open(url: string, leaseMs = 5000, now?: () => number): Promise<ClusterStore> {
  const node = await ClusterNode.open({ url, leaseMs, address: 'test', version: 'test', historyEvents: 1000, log, now });
  const s = await ClusterStore.join(node, { maxJobSize: 65536, maxJobBytes: null, deadLetterAfter: 0, historyEvents: 1000 });
  node.start();
  stores.push(s);
  return s;
}

async function put(s: ClusterStore, tube: string, priority = 0, ttrMs = 3_600_000): Promise<number> {
  const r = await s.put(tube, { priority, delayMs: 0, ttrMs, body: Buffer.from('x') });
  if (!r.ok) throw new Error(r.code);
  return r.value.id;
}

/** A client watching exactly `tubes`. */
async function worker(s: ClusterStore, ...tubes: string[]): Promise<ClientOperations> {
  const c = s.connect(quiet, 'test');
  for (const t of tubes) await c.watch(t);
  if (!tubes.includes('default')) await c.ignore('default');
  return c;
}

async function stateOf(url: string, id: number): Promise<number | undefined> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows } = await db.query<{ state: number }>('SELECT state FROM beanpole_jobs WHERE id = $1', [id]);
    return rows[0]?.state;
  } finally {
    await db.end();
  }
}

/** Makes the store's statements fail while `failing` says so (a statement the database refuses). */
function failStatements(s: ClusterStore, failing: (name: string | undefined, values: unknown[]) => boolean): () => void {
  // The batched puts, reserves and deletes run on the hot pool (the pool itself without history).
  const pools = [...new Set([s.pool, s.hot.pool])] as unknown as { query: (...args: unknown[]) => Promise<unknown> }[];
  const originals = pools.map((pool) => {
    const original = pool.query.bind(pool);
    pool.query = (...args: unknown[]) => {
      const q = args[0] as { name?: string; values?: unknown[] } | undefined;
      if (failing(q?.name, q?.values ?? [])) return Promise.reject(new Error('statement failed (test)'));
      return original(...args);
    };
    return original;
  });
  return () => {
    pools.forEach((pool, i) => (pool.query = originals[i]!));
  };
}

describe.skipIf(pgUrl === null)('cluster races', () => {
  it('a connection that closes while its reserve is in flight gives the job back', async () => {
    const url = await freshDatabase(pgUrl!, 'close_in_flight');
    const s = await open(url);
    const id = await put(s, 'default');
    const c = s.connect(quiet, 'test');
    const pending = c.reserve(null) as Promise<ReserveOutcome<JobBytes>>;
    await c.close();
    await pending;
    await expect.poll(() => stateOf(url, id), { timeout: 3000 }).toBe(0);
  });

  it('a touch that commits before the holder\'s own expiry keeps the job: TOUCHED stays true', async () => {
    const url = await freshDatabase(pgUrl!, 'touch_expiry');
    // The node's clock stands still unless the test moves it, so the order below holds however
    // slow the machine is: the touch is queued before the clock passes the deadline, and the
    // expiry can only be queued after that.
    let clock = Date.now();
    const s = await open(url, 5000, () => clock);
    const start = clock;
    const id = await put(s, 'default', 0, 1000);
    const c = s.connect(quiet, 'test');
    expect((await c.reserve(0)).kind).toBe('reserved');
    // Other clients' statements keep the pool busy past the deadline: the touch and the expiry queue up.
    const busy = Array.from({ length: 8 }, () => s.pool.query('SELECT pg_sleep(1.5)'));
    clock = start + 900;
    const touching = c.touch(id);
    // Past the old deadline, before the new one: the client's timer (1 s after the reserve, or
    // later) sends the expiry, behind the touch.
    clock = start + 1100;
    await sleep(1200);
    const touched = await touching;
    await Promise.all(busy);
    await expect.poll(() => s.pool.totalCount - s.pool.idleCount + s.pool.waitingCount).toBe(0);
    expect(touched.ok).toBe(true);
    expect(await stateOf(url, id)).toBe(1);
    expect((await c.release(id, 0, 0)).ok).toBe(true);
  });

  it('a reserve statement that fails leaves no job stranded: its client gets the error, and closing gives back what it may hold', async () => {
    const url = await freshDatabase(pgUrl!, 'batch_failure');
    const s = await open(url);
    const a = await put(s, 'a');
    await put(s, 'b');
    const ca = await worker(s, 'a');
    const cb = await worker(s, 'b');
    const restore = failStatements(s, (name, values) => name?.startsWith('beanpole_reserve_many') === true && (values[0] as string[])[0] === 'b');
    const [ra, rb] = await Promise.allSettled([ca.reserve(0), cb.reserve(0)]);
    restore();
    // One group's failure is its own: client a got its job.
    expect(ra.status).toBe('fulfilled');
    expect(rb.status).toBe('rejected');
    await ca.close();
    await cb.close();
    await expect.poll(() => stateOf(url, a), { timeout: 3000 }).toBe(0);
  });

  it('pause-tube of a tube that does not exist changes nothing', async () => {
    const url = await freshDatabase(pgUrl!, 'pause_ghost');
    const s = await open(url);
    expect(await s.pauseTube('ghost', 3_600_000)).toEqual({ ok: false, code: 'NOT_FOUND' });
    await put(s, 'ghost');
    const c = await worker(s, 'ghost');
    expect((await c.reserve(0)).kind).toBe('reserved');
  });

  it('a reserve over two tubes locks only the job it takes: a reserve of the other tube on another node gets its job', async () => {
    const url = await freshDatabase(pgUrl!, 'two_tubes');
    const s1 = await open(url);
    const s2 = await open(url);
    for (let i = 0; i < 50; i++) {
      await put(s1, 'a', 0);
      const b = await put(s1, 'b', 10);
      const x = await worker(s1, 'a', 'b');
      const y = await worker(s2, 'b');
      const [rx, ry] = await Promise.all([x.reserve(0), y.reserve(0)]);
      expect(rx.kind).toBe('reserved');
      expect(ry.kind === 'reserved' && ry.job.id === b, `round ${i}: ${ry.kind}`).toBe(true);
      await Promise.all([x.close(), y.close()]);
      await s1.clear('a', 'ready');
      await s1.clear('b', 'ready');
    }
  });

  it('a node whose lease was ended takes no job under its old id', async () => {
    const url = await freshDatabase(pgUrl!, 'reaped');
    const a = await open(url, 100_000);
    await open(url, 100_000);
    await put(a, 'default');
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      // Another node found a's lease run out (a was stopped); a serves again before its next heartbeat.
      await db.query('UPDATE beanpole_nodes SET gone_at = 1 WHERE id = $1', [a.nodeId]);
    } finally {
      await db.end();
    }
    const c = await worker(a, 'default');
    expect((await c.reserve(0)).kind).toBe('timed-out');
    await a.node.lease.beat(); // it notices, and registers again
    expect((await c.reserve(0)).kind).toBe('reserved');
  });

  it('after a database outage longer than a lease, the first node back does not reap the others', async () => {
    const url = await freshDatabase(pgUrl!, 'outage');
    const a = await open(url, 1000);
    const b = await open(url, 1000);
    const id = await put(a, 'default');
    const c = await worker(b, 'default');
    expect((await c.reserve(0)).kind).toBe('reserved');
    // Every statement and heartbeat of both nodes fails for 1.5 leases (a restart, a failover).
    const cutOff = (s: ClusterStore): (() => void) => {
      const restoreStatements = failStatements(s, () => true);
      const lease = s.node.lease as unknown as { connection: () => Promise<never> };
      const connection = lease.connection;
      lease.connection = () => Promise.reject(new Error('database unreachable (test)'));
      return () => {
        restoreStatements();
        lease.connection = connection;
      };
    };
    const backA = cutOff(a);
    const backB = cutOff(b);
    await sleep(1500);
    backA(); // a is back first; its heartbeat succeeds while b's lease looks run out
    await a.node.lease.beat();
    backB();
    await b.node.lease.beat();
    expect((await c.release(id, 0, 0)).ok).toBe(true);
  });

  it('clients\' slow statements do not starve the heartbeat: a busy node keeps its lease', async () => {
    const url = await freshDatabase(pgUrl!, 'busy_pool');
    const a = await open(url, 1000);
    await open(url, 1000);
    const before = a.nodeId;
    await Promise.all(Array.from({ length: 8 }, () => a.pool.query('SELECT pg_sleep(1.6)')));
    await sleep(300);
    expect(a.nodeId).toBe(before);
  });
});
