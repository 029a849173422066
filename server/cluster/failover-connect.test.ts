/**
 * A connection whose server goes down as it answers: PostgreSQL's shutdown sends each backend's
 * client a FATAL (57P01), and it can arrive in the same packet as the ReadyForQuery that ends
 * the connect (or the session check). `pg` then emits the FATAL as an 'error' event before the
 * code that awaited the connect runs on, when the pool does not listen to the connection yet;
 * an 'error' event nobody listens for ends the process. Reproduced exactly, against the run's
 * real PostgreSQL, by a proxy that puts the FATAL behind the chosen ReadyForQuery in one write.
 */
import net from 'node:net';
import pg from 'pg';
import pino from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { freshDatabase } from '../../test/support/cluster-db.js';
import { parseClusterUrl } from '../common/cluster-url.js';
import { checkIn, checkOut } from './pool.js';
import { PrimaryFinder } from './primary-finder.js';

const pgUrl = inject('pgUrl');
const log = pino({ level: 'silent' });

/** ErrorResponse: FATAL 57P01, as a backend sends it when the server shuts down. */
function adminShutdown(): Buffer {
  const fields = Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0', 'latin1');
  const head = Buffer.alloc(5);
  head[0] = 0x45; // 'E'
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/**
 * Forwards to `upstream`; on connection number `victim` (1 first), the `nth` ReadyForQuery
 * the server sends leaves with the FATAL right behind it, in one write, and the connection ends.
 */
async function fatalProxy(upstream: { host: string; port: number }, victim: number, nth: number): Promise<{ port: number; close: () => void }> {
  let accepted = 0;
  const sockets: net.Socket[] = [];
  const server = net.createServer((client) => {
    const mine = ++accepted === victim;
    const db = net.connect(upstream.port, upstream.host);
    sockets.push(client, db);
    client.on('error', () => db.destroy());
    db.on('error', () => client.destroy());
    client.pipe(db);
    if (!mine) {
      db.pipe(client);
      return;
    }
    let pending = Buffer.alloc(0);
    let seen = 0;
    db.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      let at = 0;
      while (pending.length - at >= 5) {
        const end = at + 1 + pending.readInt32BE(at + 1);
        if (end > pending.length) break;
        const isReady = pending[at] === 0x5a; // 'Z'
        at = end;
        if (isReady && ++seen === nth) {
          client.end(Buffer.concat([pending.subarray(0, at), adminShutdown()]));
          db.destroy();
          return;
        }
      }
      client.write(pending.subarray(0, at));
      pending = pending.subarray(at);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

describe.skipIf(pgUrl === null)('a connection the server ends as it answers', () => {
  it.each([
    ['the connect', '', 1, 1],
    // The finder's own search takes the first connection; the pool's is the second.
    ['the session check (target_session_attrs=read-write)', '?target_session_attrs=read-write', 2, 2],
  ])('a FATAL behind the ReadyForQuery that ends %s fails that connect, and the process goes on', async (_what, query, victim, nth) => {
    const url = new URL(await freshDatabase(pgUrl!, 'fatal_connect'));
    const proxy = await fatalProxy({ host: url.hostname, port: Number(url.port) }, victim, nth);
    cleanups.push(proxy.close);
    const finder = new PrimaryFinder(parseClusterUrl(`postgres://${url.username}@127.0.0.1:${proxy.port}${url.pathname}${query}`), log);
    const pool = new pg.Pool({ Client: finder.Client, max: 1 });
    cleanups.push(() => pool.end());
    let poolErrors = 0;
    pool.on('error', () => poolErrors++);
    await expect(pool.query('SELECT 1')).rejects.toMatchObject({ code: '57P01' });
    // The next connection is an ordinary one: the pool goes on with it.
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(poolErrors).toBe(0);
  });

  it('a FATAL behind the answer of a statement whose connection goes at once to a waiting checkOut is heard by the new holder', async () => {
    const url = new URL(await freshDatabase(pgUrl!, 'fatal_handover'));
    // The connect's ReadyForQuery is the first; the statement's is the second.
    const proxy = await fatalProxy({ host: url.hostname, port: Number(url.port) }, 1, 2);
    cleanups.push(proxy.close);
    const finder = new PrimaryFinder(parseClusterUrl(`postgres://${url.username}@127.0.0.1:${proxy.port}${url.pathname}`), log);
    const pool = new pg.Pool({ Client: finder.Client, max: 1 });
    cleanups.push(() => pool.end());
    const first = pool.query('SELECT pg_sleep(0.2)');
    const held = checkOut(pool); // waits for the only connection
    await first;
    const db = await held;
    await expect(db.query('SELECT 1')).rejects.toThrow();
    checkIn(db, true);
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
