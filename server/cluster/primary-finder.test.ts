/**
 * The search for the primary against a real PostgreSQL (the run's throwaway server): a host
 * that refuses connections is passed over, a read-only one is refused with 08001 when no other
 * host would do, and a host reported lost is searched for again.
 */
import pg from 'pg';
import pino from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { freePort } from '../../test/support/servers.js';
import { freshDatabase } from '../../test/support/cluster-db.js';
import { parseClusterUrl } from '../common/cluster-url.js';
import { PrimaryFinder } from './primary-finder.js';

const pgUrl = inject('pgUrl');
const log = pino({ level: 'silent' });

async function sql(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

describe.skipIf(pgUrl === null)('PrimaryFinder', () => {
  it('passes over a host that refuses connections and finds the one that takes writes; its connections go there', async () => {
    const url = new URL(await freshDatabase(pgUrl!, 'finder'));
    const dead = await freePort();
    const finder = new PrimaryFinder(parseClusterUrl(`postgres://${url.username}@127.0.0.1:${dead},${url.host}${url.pathname}?target_session_attrs=read-write`), log);
    expect(await finder.target()).toStrictEqual({ host: '127.0.0.1', port: Number(url.port) });
    const client = new finder.Client({});
    await client.connect();
    try {
      expect((await client.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port).toBe(Number(url.port));
    } finally {
      await client.end();
    }
  });

  it('refuses a read-only server with SQLSTATE 08001 and names why, and searches again once told a host was lost', async () => {
    const url = await freshDatabase(pgUrl!, 'finder_ro');
    const name = new URL(url).pathname.slice(1);
    await sql(pgUrl!, `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    const finder = new PrimaryFinder(parseClusterUrl(`${url}?target_session_attrs=read-write`), log);
    await expect(finder.target()).rejects.toMatchObject({ code: '08001', message: /read-only/ });
    // A connection fails the same way (a command answers INTERNAL_ERROR).
    const client = new finder.Client({});
    await expect(client.connect()).rejects.toMatchObject({ code: '08001' });

    await sql(pgUrl!, `ALTER DATABASE ${name} SET default_transaction_read_only = off`);
    await new Promise((r) => setTimeout(r, 300));
    const host = await finder.target();
    expect(host.port).toBe(Number(new URL(url).port));
    // Trusted now: no search until a connection says the host was lost.
    expect(await finder.target()).toBe(host);
    await sql(pgUrl!, `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    expect(await finder.target()).toBe(host);
    finder.lost(host, 'a write was refused as read-only');
    await expect(finder.target()).rejects.toMatchObject({ code: '08001' });
  });

  it('with one host and no target_session_attrs, connects as before: no search, no check', async () => {
    const url = await freshDatabase(pgUrl!, 'finder_one');
    const name = new URL(url).pathname.slice(1);
    await sql(pgUrl!, `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    const finder = new PrimaryFinder(parseClusterUrl(url), log);
    const client = new finder.Client({});
    await client.connect();
    await client.end();
  });
});
