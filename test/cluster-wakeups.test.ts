/**
 * News between cluster nodes (server/cluster/wakeups.ts) when there is nobody to tell: a node
 * whose heartbeats count no other node sends no NOTIFY, and a node that joins says hello, after
 * which the first node's news goes out again at once. In process against a real PostgreSQL, with
 * a plain LISTEN connection hearing what goes over the channel.
 */
import pg from 'pg';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { ClusterNode } from '../server/cluster/cluster-node.js';
import { ClusterStore } from '../server/cluster/cluster-store.js';
import { freshDatabase } from './support/cluster-db.js';

const pgUrl = inject('pgUrl');
const log = pino({ level: 'silent' });
const nodes: ClusterNode[] = [];
const listeners: pg.Client[] = [];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
  for (const l of listeners.splice(0)) await l.end();
});

/** A node serving the beanstalkd realm; its heartbeats run only with `beat` (leaseMs / 5 apart). */
async function open(url: string, beat: boolean, leaseMs = 5000): Promise<{ node: ClusterNode; store: ClusterStore }> {
  const node = await ClusterNode.open({ url, leaseMs, address: 'test', version: 'test', historyEvents: 0, log });
  nodes.push(node);
  const store = await ClusterStore.join(node, { maxJobSize: 65536, maxJobBytes: null, deadLetterAfter: 0, historyEvents: 0 });
  if (beat) node.start();
  return { node, store };
}

/** The payloads sent on the beanstalkd realm's channel, from now on. */
async function hear(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  listeners.push(client);
  await client.connect();
  const heard: string[] = [];
  client.on('notification', (m) => heard.push(m.payload ?? ''));
  await client.query('LISTEN beanpole');
  return heard;
}

async function put(store: ClusterStore, tube: string): Promise<void> {
  const r = await store.put(tube, { priority: 0, delayMs: 0, ttrMs: 60_000, body: Buffer.from('x') });
  if (!r.ok) throw new Error(r.code);
}

/** The "jobs ready" news node `id` sent. */
const readyNews = (heard: string[], id: number): string[] => heard.filter((p) => p.startsWith(`${id}\tr`));

describe.skipIf(pgUrl === null)('cluster wakeups', () => {
  it('a node alone goes quiet after two heartbeats that count no other node, and speaks again when one says hello', async () => {
    const url = await freshDatabase(pgUrl!, 'wakeups_hello');
    const heard = await hear(url);
    const a = await open(url, false);
    // Until its heartbeats say otherwise, a node assumes it has listeners.
    await put(a.store, 'first');
    await expect.poll(() => readyNews(heard, a.node.id)).toEqual([`${a.node.id}\tr\tfirst`]);
    a.store.othersCounted(0);
    await put(a.store, 'second');
    await expect.poll(() => readyNews(heard, a.node.id)).toHaveLength(2);
    a.store.othersCounted(0);
    await put(a.store, 'quiet');
    await sleep(300);
    expect(readyNews(heard, a.node.id)).toHaveLength(2);
    // A second node joins: its hello reaches the first, whose news goes out again.
    const b = await open(url, false);
    await expect.poll(() => heard).toContain(`${b.node.id}\th`);
    await expect
      .poll(async () => {
        await put(a.store, 'heard-again');
        return readyNews(heard, a.node.id).length;
      })
      .toBeGreaterThan(2);
  });

  it('the heartbeat counts the other nodes: a lone node sends nothing, and a node among others does', async () => {
    const url = await freshDatabase(pgUrl!, 'wakeups_count');
    const heard = await hear(url);
    // Heartbeats every 100 ms.
    const a = await open(url, true, 500);
    await sleep(400);
    await put(a.store, 'alone');
    await sleep(300);
    expect(readyNews(heard, a.node.id)).toEqual([]);
    const b = await open(url, true, 500);
    await sleep(400);
    await put(a.store, 'among-others');
    await put(b.store, 'from-b');
    await expect.poll(() => readyNews(heard, a.node.id)).toEqual([`${a.node.id}\tr\tamong-others`]);
    await expect.poll(() => readyNews(heard, b.node.id)).toEqual([`${b.node.id}\tr\tfrom-b`]);
  });
});
