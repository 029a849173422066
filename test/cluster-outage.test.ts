/**
 * PostgreSQL down for 10 s under load: every command a node gets meanwhile is answered with the
 * protocol's error (beanstalkd's INTERNAL_ERROR, Gearman's ERROR) within 10 s, no client
 * connection is dropped, and the node serves again by itself once the database is back. Runs on
 * a PostgreSQL of its own (it is stopped).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../bench/throwaway-postgres.js';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { startGearmanServer } from './support/gearman-server.js';
import { RawClient } from './support/raw-client.js';
import type { ServerProcess } from './support/servers.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let pg: ThrowawayPostgres | null = null;
const nodes: ServerProcess[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await pg?.stop();
});

describe.skipIf(postgresBinDir() === null)('cluster mode while PostgreSQL is down', () => {
  it('answers INTERNAL_ERROR within 10 s, drops no connection, and serves again by itself', async () => {
    pg = await startThrowawayPostgres({ settings: { fsync: 'off' } });
    const url = await pg.createDatabase('outage');
    const started = await startGearmanServer(['--cluster', url]);
    const node = { ...started.server, port: (started.server.address as { port: number }).port };
    const gearmanPort = started.port;
    nodes.push(started.server);
    const answers = new Map<string, number>();
    const slow: string[] = [];
    let closed = 0;
    let stop = false;
    const note = (reply: string): void => {
      const word = reply.split(/[\r ]/)[0] ?? reply;
      answers.set(word, (answers.get(word) ?? 0) + 1);
    };
    /** One client sending `next()` in turn on one connection; a closed connection is counted, not retried. */
    const client = async (next: (n: number) => string): Promise<void> => {
      const c = await RawClient.connect(node.port);
      try {
        for (let n = 0; !stop; n++) {
          const line = next(n);
          const sent = Date.now();
          try {
            const reply = await c.call(line, 12_000);
            if (Date.now() - sent > 10_000) slow.push(`${line.split('\r')[0]}: ${Date.now() - sent} ms`);
            note(reply);
            const m = /^RESERVED (\d+) /.exec(reply);
            if (m !== null) note(await c.call(`delete ${m[1]}\r\n`, 12_000));
            if (reply.startsWith('INTERNAL_ERROR')) await sleep(20);
          } catch (err) {
            closed++;
            note(`<${(err as Error).message.split(';')[0]}>`);
            return;
          }
        }
      } finally {
        c.destroy();
      }
    };
    /** A Gearman client or worker on one connection: `step` sends and reads; ERROR packets are counted. */
    const gearman = async (step: (g: GearmanTestClient) => Promise<string>): Promise<void> => {
      const g = await GearmanTestClient.connect(gearmanPort);
      try {
        while (!stop) {
          const sent = Date.now();
          try {
            const word = await step(g);
            if (Date.now() - sent > 10_000) slow.push(`gearman ${word}: ${Date.now() - sent} ms`);
            note(word);
            if (word === 'ERROR' || word.startsWith('ERR')) await sleep(20);
          } catch (err) {
            closed++;
            note(`<gearman ${(err as Error).message.split(';')[0]}>`);
            return;
          }
        }
      } finally {
        g.destroy();
      }
    };
    const packetWord = (type: number): string => (type === PACKET.ERROR ? 'ERROR' : `gearman-${type}`);
    const load = [
      client((n) => `put 0 0 60 ${String(n).length}\r\n${n}\r\n`),
      client((n) => `put 0 0 60 ${String(n).length}\r\n${n}\r\n`),
      client(() => 'reserve-with-timeout 1\r\n'),
      client(() => 'reserve-with-timeout 1\r\n'),
      client((n) => (n % 2 === 0 ? 'stats\r\n' : 'list-tubes\r\n')),
      gearman(async (g) => {
        g.request(PACKET.SUBMIT_JOB_BG, 'outage', '', 'data');
        return packetWord((await g.packet(12_000)).type);
      }),
      gearman(async (g) => {
        g.request(PACKET.CAN_DO, 'outage');
        g.request(PACKET.GRAB_JOB);
        const p = await g.packet(12_000);
        if (p.type === PACKET.JOB_ASSIGN) g.request(PACKET.WORK_COMPLETE, p.data.subarray(0, p.data.indexOf(0)).toString('latin1'), 'done');
        return packetWord(p.type);
      }),
      gearman(async (g) => {
        g.socket.write('status\n');
        // Lines up to '.', or one ERR line.
        for (;;) {
          const line = await g.adminReply(true, 12_000);
          if (line.startsWith('ERR')) return 'ERR';
          if (line === '.\n') return 'status';
        }
      }),
    ];
    await sleep(1000);
    await pg.restart(10_000);
    await sleep(3000);
    stop = true;
    await Promise.all(load);
    // On failure: what the clients heard, and the node's last words (why it closed them).
    expect(closed, `${JSON.stringify([...answers])}\n${node.stderr().split('\n').slice(-8).join('\n')}`).toBe(0);
    expect(slow).toEqual([]);
    expect(answers.get('INTERNAL_ERROR') ?? 0).toBeGreaterThan(0);
    expect(answers.get('ERROR') ?? 0, JSON.stringify([...answers])).toBeGreaterThan(0);
    expect(node.stderr()).not.toMatch(/closing that connection/);
    // Serving again: a put and a reserve on a fresh connection.
    const c = await RawClient.connect(node.port);
    try {
      expect(await c.call('put 0 0 60 5\r\nafter\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    } finally {
      c.destroy();
    }
  });
});
