/**
 * Cluster mode: several real Beanpole processes on one real PostgreSQL (the run's throwaway
 * server, a fresh database per test). What one node does, the others see: ids increase across
 * nodes, a reserve blocked on one node takes a job put on another at once, a dead node's
 * reservations come back when its lease runs out, and a node stopped past its lease cannot
 * delete a job another worker holds since (fencing).
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { SCHEMA_VERSION } from '../server/cluster/schema.js';
import { API } from '../shared/api.js';
import type { AdminConfigDto, ClusterNodeDto, JobDto, TubeDto, TubeHealthDto } from '../shared/dto.js';
import type { JobHistoryDto } from '../shared/history.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { freshDatabase } from './support/cluster-db.js';
import { expectOk } from './support/expectations.js';
import { RawClient, tcpPut } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';

const pgUrl = inject('pgUrl');
const servers: RunningServer[] = [];
const admins: AdminServerProcess[] = [];
const clients: RawClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers) s.signal('SIGCONT');
  await Promise.all([...servers.splice(0), ...admins.splice(0)].map((s) => s.stop()));
});

async function node(url: string, args: string[] = []): Promise<RunningServer> {
  const s = await startServer('beanpole', ['--cluster', url, ...args]);
  servers.push(s);
  return s;
}

async function connect(s: RunningServer): Promise<RawClient> {
  const c = await RawClient.connect(s.port);
  clients.push(c);
  return c;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

it('has PostgreSQL to run against (CI installs it; apt-get install postgresql)', () => {
  expect(pgUrl).not.toBeNull();
});

describe.skipIf(pgUrl === null)('cluster mode', () => {
  it('nodes started together migrate once and serve the same jobs, with ids increasing across nodes', async () => {
    const url = await freshDatabase(pgUrl!, 'ids');
    const [a, b, c] = await Promise.all([node(url), node(url), node(url)]);
    const [ca, cb, cc] = await Promise.all([connect(a!), connect(b!), connect(c!)]);
    const ids: number[] = [];
    for (let i = 0; i < 9; i++) ids.push(await tcpPut([ca, cb, cc][i % 3]!, `job ${i}`));
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(await cb.call('stats-job 1\r\n')).toMatch(/state: ready/);
    expect(await cc.call('peek 4\r\n')).toBe('FOUND 4 5\r\njob 3\r\n');
    const stats = await ca.call('stats-tube default\r\n');
    expect(stats).toMatch(/current-jobs-ready: 9\n/);
    expect(stats).toMatch(/total-jobs: 9\n/);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ version: number }>('SELECT version FROM beanpole_schema');
      expect(rows).toEqual([{ version: SCHEMA_VERSION }]);
      const nodes = await db.query('SELECT id FROM beanpole_nodes WHERE gone_at IS NULL');
      expect(nodes.rowCount).toBe(3);
    } finally {
      await db.end();
    }
  });

  it('a reserve blocked on one node takes a job put on another', async () => {
    const url = await freshDatabase(pgUrl!, 'wake');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const worker = await connect(a);
    const producer = await connect(b);
    const reserved = worker.call('reserve-with-timeout 10\r\n', 12_000);
    await sleep(200); // the reserve is waiting on node A
    const started = Date.now();
    const id = await tcpPut(producer, 'from node B');
    expect(await reserved).toBe(`RESERVED ${id} 11\r\nfrom node B\r\n`);
    // Woken by a notification, not the one-second poll.
    expect(Date.now() - started).toBeLessThan(900);
    expect(await producer.call(`stats-job ${id}\r\n`)).toMatch(/state: reserved/);
    expect(await worker.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
    expect(await producer.call(`peek ${id}\r\n`)).toBe('NOT_FOUND\r\n');
  });

  it('a node killed with SIGKILL: what it held is ready again once its lease runs out, not after the TTR', async () => {
    const url = await freshDatabase(pgUrl!, 'lease');
    const [a, b] = await Promise.all([node(url, ['--cluster-lease-ms', '600']), node(url, ['--cluster-lease-ms', '600'])]);
    const doomed = await connect(a);
    const id = await tcpPut(doomed, 'held by a node that dies', 0, 0, 3600);
    expect(await doomed.call('reserve\r\n')).toMatch(/^RESERVED /);
    const other = await connect(b);
    expect(await other.call(`stats-job ${id}\r\n`)).toMatch(/state: reserved/);
    a.signal('SIGKILL');
    const reserved = await other.call('reserve-with-timeout 5\r\n', 6000);
    expect(reserved).toBe(`RESERVED ${id} 24\r\nheld by a node that dies\r\n`);
  });

  it('a node stopped past its lease comes back and cannot delete the job another worker holds now', async () => {
    const url = await freshDatabase(pgUrl!, 'fence');
    const [a, b] = await Promise.all([node(url, ['--cluster-lease-ms', '500']), node(url, ['--cluster-lease-ms', '500'])]);
    const paused = await connect(a);
    const id = await tcpPut(paused, 'fenced', 0, 0, 3600);
    expect(await paused.call('reserve\r\n')).toMatch(/^RESERVED /);
    a.signal('SIGSTOP');
    const other = await connect(b);
    expect(await other.call('reserve-with-timeout 5\r\n', 6000)).toBe(`RESERVED ${id} 6\r\nfenced\r\n`);
    a.signal('SIGCONT');
    // Its token (node, connection, reserve count) no longer holds the job.
    expect(await paused.call(`delete ${id}\r\n`)).toBe('NOT_FOUND\r\n');
    expect(await paused.call(`release ${id} 0 0\r\n`)).toBe('NOT_FOUND\r\n');
    expect(await paused.call(`touch ${id}\r\n`)).toBe('NOT_FOUND\r\n');
    expect(await other.call(`stats-job ${id}\r\n`)).toMatch(/state: reserved/);
    expect(await other.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
  });

  it('delayed jobs put on one node become ready on time for a reserve waiting on another', async () => {
    const url = await freshDatabase(pgUrl!, 'delay');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const worker = await connect(b);
    const producer = await connect(a);
    const id = await tcpPut(producer, 'later', 0, 1);
    expect(await worker.call('peek-ready\r\n')).toBe('NOT_FOUND\r\n');
    const started = Date.now();
    expect(await worker.call('reserve-with-timeout 5\r\n', 6000)).toBe(`RESERVED ${id} 5\r\nlater\r\n`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
  });

  it('--max-job-bytes bounds the bodies of the whole cluster: OUT_OF_MEMORY on any node, room again after deletes', async () => {
    const url = await freshDatabase(pgUrl!, 'budget');
    const a = await node(url, ['--max-job-bytes', '100']);
    const ca = await connect(a);
    const body = 'x'.repeat(60);
    const id = await tcpPut(ca, body);
    expect(await ca.call(`put 0 0 60 60\r\n${body}\r\n`)).toBe('OUT_OF_MEMORY\r\n');
    // A node writes its count every second; one that joins reads the cluster's total first.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await expect
        .poll(async () => (await db.query<{ n: string }>('SELECT COALESCE(sum(bytes), 0)::text AS n FROM beanpole_node_bytes')).rows[0]!.n, { timeout: 5000 })
        .toBe('60');
    } finally {
      await db.end();
    }
    const b = await node(url, ['--max-job-bytes', '100']);
    const cb = await connect(b);
    expect(await cb.call(`put 0 0 60 60\r\n${body}\r\n`)).toBe('OUT_OF_MEMORY\r\n');
    expect(await cb.call(`put 0 0 60 30\r\n${'y'.repeat(30)}\r\n`)).toMatch(/^INSERTED \d+\r\n$/);
    expect(await cb.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
    // Node A reads the total again within a second: room for 60 bytes again (a refused put changes nothing).
    await expect.poll(() => ca.call(`put 0 0 60 60\r\n${body}\r\n`), { timeout: 5000, interval: 200 }).toMatch(/^INSERTED \d+\r\n$/);
    expect(await cb.call('stats\r\n')).toMatch(/current-jobs-ready: 2\n/);
  });

  it('the admin API of a node reads the cluster: numbers as numbers, jobs of every node, the nodes view', async () => {
    const url = await freshDatabase(pgUrl!, 'admin');
    const admin = await startAdminServer(['--cluster', url]);
    admins.push(admin);
    const other = await node(url);
    const c = await connect(other);
    await c.call('use mail\r\n');
    const id = await tcpPut(c, '{"to":"a@b"}');
    const tube = expectOk<TubeDto>(await api(admin.url, API.tube('mail')));
    expect(tube).toMatchObject({ name: 'mail', ready: 1, totalJobs: 1, urgent: 1 });
    const stats = expectOk<Record<string, unknown>>(await api(admin.url, API.stats));
    expect(stats['total-jobs']).toBe(1);
    const health = expectOk<TubeHealthDto[]>(await api(admin.url, API.tubeHealth));
    expect(health).toEqual([{ tube: 'mail', oldestReadyAgeSeconds: expect.any(Number), reservedNearTtr: 0, backlogRise: 0 }]);
    expect((await api(admin.url, API.tubes)).json).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'mail', ready: 1, nextReadyAgeSeconds: expect.any(Number) })]),
    );
    const job = expectOk<JobDto>(await api(admin.url, API.job(id)));
    expect(job).toMatchObject({ id, tube: 'mail', state: 'ready', reservedByNode: null });
    const nodes = expectOk<ClusterNodeDto[]>(await api(admin.url, API.clusterNodes));
    expect(nodes.map((n) => n.health)).toEqual(['up', 'up']);
    expect(nodes.filter((n) => n.self)).toHaveLength(1);
    expect(typeof nodes[0]!.heartbeatAt).toBe('number');
    const config = expectOk<AdminConfigDto>(await api(admin.url, API.config));
    expect(config.clusterNode).toBe(nodes.find((n) => n.self)!.id);
    // The dashboard's delete goes through the database too.
    expect((await api(admin.url, API.job(id), { method: 'DELETE' })).status).toBe(204);
    expect(await c.call(`peek ${id}\r\n`)).toBe('NOT_FOUND\r\n');
  });

  it('job history is kept in the database: every node\'s changes to a job, in order, whichever node is asked', async () => {
    const url = await freshDatabase(pgUrl!, 'history');
    const admin = await startAdminServer(['--cluster', url]);
    admins.push(admin);
    const other = await node(url, ['--dead-letter-after', '2']);
    const c = await connect(other);
    const id = await tcpPut(c, 'story');
    expect(await c.call('reserve\r\n')).toMatch(/^RESERVED /);
    expect(await c.call(`release ${id} 5 0\r\n`)).toBe('RELEASED\r\n');
    expect(await c.call('reserve\r\n')).toMatch(/^RESERVED /);
    expect(await c.call(`release ${id} 5 0\r\n`)).toBe('BURIED\r\n'); // the dead-letter rule
    expect(await c.call('kick 1\r\n')).toBe('KICKED 1\r\n');
    expectOk(await api(admin.url, API.job(id), { method: 'PATCH', json: { priority: 7 } }));
    expect(await c.call('reserve\r\n')).toMatch(/^RESERVED /);
    c.destroy(); // given back by the disconnect
    const d = await connect(other);
    expect(await d.call(`reserve-with-timeout 5\r\n`, 6000)).toMatch(/^RESERVED /);
    expect(await d.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
    const history = expectOk<JobHistoryDto>(await api(admin.url, API.jobHistory(id)));
    expect(history.events.map((e) => (e.note === '' ? e.kind : `${e.kind} ${e.note}`))).toEqual([
      'put',
      'reserve',
      'release',
      'reserve',
      'release',
      'dead-letter release',
      'kick',
      'edit priority',
      'reserve',
      'disconnect',
      'reserve',
      'delete',
    ]);
    // Who did it: a connection of the other node, named by its node.
    expect(history.events[1]!.peer).toMatch(/^node \d+$/);
    expect(history.events[1]!.connection).toBeGreaterThan(0);
    expect(history.capacity).toBeGreaterThan(0);
    expect(history.recorded).toBeGreaterThanOrEqual(12);
  });

  it('the history table is a ring: each node keeps it to its --history-events newest events', async () => {
    const url = await freshDatabase(pgUrl!, 'history_ring');
    const admin = await startAdminServer(['--cluster', url, '--history-events', '3']);
    admins.push(admin);
    const c = await connect(await node(url, ['--history-events', '3']));
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await tcpPut(c, `job ${i}`));
    await sleep(1500); // trimmed by each node's poll
    const first = expectOk<JobHistoryDto>(await api(admin.url, API.jobHistory(ids[0]!)));
    expect(first).toMatchObject({ events: [], capacity: 3, recorded: 5 });
    const last = expectOk<JobHistoryDto>(await api(admin.url, API.jobHistory(ids[4]!)));
    expect(last.events.map((e) => e.kind)).toEqual(['put']);
  });

  it('a pipelined conversation gets the same replies, in order, as from a single server', async () => {
    const url = await freshDatabase(pgUrl!, 'pipelined');
    const put = (body: string): string => `put 0 0 60 ${body.length}\r\n${body}\r\n`;
    // Puts and deletes overlap, non-blocking reserves overlap; anything else waits for them.
    const conversation = [
      ...Array.from({ length: 20 }, (_, i) => put(`a${i}`)),
      'use other\r\n',
      put('b0'),
      put('toolong'.repeat(20_000)),
      put('b1'),
      'reserve-with-timeout 0\r\n',
      'reserve-with-timeout 0\r\n',
      'delete 1\r\n',
      'delete 1\r\n',
      'delete 2\r\n',
      'delete 999\r\n',
      put('b2'),
      'list-tube-used\r\n',
      'stats-job 23\r\n',
      'peek-ready\r\n',
    ].join('');
    const replies = async (port: number): Promise<string[]> => {
      const c = await RawClient.connect(port);
      clients.push(c);
      c.send(conversation);
      const out: string[] = [];
      for (let i = 0; i < 34; i++) out.push((await c.reply()).replace(/\nage: \d+\n/, '\nage: -\n'));
      return out;
    };
    const single = await startServer('beanpole', ['-z', '65535']);
    servers.push(single);
    const clustered = await node(url, ['-z', '65535']);
    const expected = await replies(single.port);
    const got = await replies(clustered.port);
    expect(got).toEqual(expected);
    expect(got.slice(0, 20)).toEqual(Array.from({ length: 20 }, (_, i) => `INSERTED ${i + 1}\r\n`));
  });

  it('a TTR that runs out returns the job to ready for a worker on another node, and counts a timeout', async () => {
    const url = await freshDatabase(pgUrl!, 'ttr');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const slow = await connect(a);
    const id = await tcpPut(slow, 'slow', 0, 0, 1);
    expect(await slow.call('reserve\r\n')).toMatch(/^RESERVED /);
    const other = await connect(b);
    expect(await other.call('reserve-with-timeout 5\r\n', 6000)).toBe(`RESERVED ${id} 4\r\nslow\r\n`);
    expect(await other.call(`stats-job ${id}\r\n`)).toMatch(/reserves: 2\ntimeouts: 1\n/);
    expect(await slow.call(`delete ${id}\r\n`)).toBe('NOT_FOUND\r\n');
  });
});
