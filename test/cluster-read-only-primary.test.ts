/**
 * A primary that turns read-only under live connections (fenced with default_transaction_read_only,
 * as a demoted primary that keeps its sessions would be): the node's writes there fail with
 * SQLSTATE 25006, and the node must notice and move to the other host of its libpq URL without
 * a restart, its clients' connections kept. Two throwaway PostgreSQL servers stand for the two
 * hosts (no replication: the job put after the move is on the second host only).
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../bench/throwaway-postgres.js';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';

const dbs: ThrowawayPostgres[] = [];
const servers: RunningServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await Promise.all(dbs.map((d) => d.stop()));
});

async function sql(url: string, text: string): Promise<pg.QueryResultRow[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Makes the host read-only for the sessions it has. pg_reload_conf() only asks the postmaster,
 * which then signals every backend; a session that was open before sees the setting once its
 * backend got that signal, so the fence holds from then on for the node's sessions too (the
 * postmaster signals them all at once), and the next put cannot commit there any more.
 */
async function fence(url: string): Promise<void> {
  const session = new pg.Client({ connectionString: url });
  await session.connect();
  try {
    await sql(url, 'ALTER SYSTEM SET default_transaction_read_only = on');
    await sql(url, 'SELECT pg_reload_conf()');
    const deadline = Date.now() + 10_000;
    while ((await session.query<{ v: string }>("SELECT current_setting('default_transaction_read_only') AS v")).rows[0]!.v !== 'on') {
      if (Date.now() > deadline) throw new Error('the host did not turn read-only');
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await session.end();
  }
}

describe.skipIf(postgresBinDir() === null)('cluster mode when its primary turns read-only', () => {
  it('notices SQLSTATE 25006, moves to the host that takes writes, and keeps its clients', async () => {
    dbs.push(await startThrowawayPostgres({ settings: { fsync: 'off' } }), await startThrowawayPostgres({ settings: { fsync: 'off' } }));
    const [first, second] = await Promise.all(dbs.map((d) => d.createDatabase('fenced')));
    // The second host gets the schema a node makes (it would have it by replication).
    const prepare = await startServer('beanpole', ['--cluster', second!]);
    await prepare.stop();
    const hosts = `postgres://beanpole@127.0.0.1:${dbs[0]!.port},127.0.0.1:${dbs[1]!.port}/fenced?target_session_attrs=read-write`;
    const node = await startServer('beanpole', ['--cluster', hosts, '--cluster-lease-ms', '1000']);
    servers.push(node);
    const c = await RawClient.connect(node.port);
    try {
      expect(await c.call('put 0 0 60 5\r\nfirst\r\n')).toBe('INSERTED 1\r\n');
      expect(await sql(first!, 'SELECT count(*)::int AS n FROM beanpole_jobs')).toStrictEqual([{ n: 1 }]);

      await fence(first!);
      const fencedAt = Date.now();
      let reply = '';
      const answers: string[] = [];
      while (Date.now() - fencedAt < 20_000) {
        const sent = Date.now();
        reply = await c.call('put 0 0 60 6\r\nsecond\r\n', 12_000);
        expect(Date.now() - sent, 'answered within 10 s').toBeLessThanOrEqual(10_000);
        answers.push(reply.trim());
        if (reply.startsWith('INSERTED')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(reply, answers.join(', ')).toMatch(/^INSERTED \d+\r\n$/);
      // The job is on the host that takes writes; the fenced one kept only the first.
      expect(await sql(second!, "SELECT count(*)::int AS n FROM beanpole_jobs WHERE body = 'second'::bytea")).toStrictEqual([{ n: 1 }]);
      expect(await sql(first!, 'SELECT count(*)::int AS n FROM beanpole_jobs')).toStrictEqual([{ n: 1 }]);
      expect(node.stderr()).toMatch(/25006/);
      // The node serves on the new host: a reserve there gets the job.
      expect(await c.call('reserve-with-timeout 5\r\n', 12_000)).toMatch(/^RESERVED \d+ 6\r\nsecond\r\n$/);
      expect(c.closed).toBe(false);
    } finally {
      c.destroy();
    }
  });
});
