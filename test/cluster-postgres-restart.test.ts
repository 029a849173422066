/**
 * PostgreSQL restarted in the middle of load: the nodes answer INTERNAL_ERROR (or drop the
 * connection) while it is down, reconnect by themselves, and nothing acknowledged is lost or
 * comes back: every INSERTED job is still there or was DELETED, and no DELETED job is reserved
 * again. Afterwards a reserve waiting on one node is woken by a put on the other at once, so the
 * notification connection came back too. Runs on a PostgreSQL of its own (it is restarted).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../bench/throwaway-postgres.js';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let pg: ThrowawayPostgres | null = null;
const nodes: RunningServer[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await pg?.stop();
});

/** Sends `line` until it gets an answer matching `want` (reconnecting as needed), or gives up at `deadline`. */
async function until(port: number, line: string, want: RegExp, deadline: number): Promise<string> {
  let last = '';
  while (Date.now() < deadline) {
    const c = await RawClient.connect(port).catch(() => null);
    if (c !== null) {
      try {
        last = await c.call(line, 2000);
        if (want.test(last)) return last;
      } catch (err) {
        last = (err as Error).message;
      } finally {
        c.destroy();
      }
    }
    await sleep(100);
  }
  throw new Error(`no ${want} for ${JSON.stringify(line)} in time; last answer ${JSON.stringify(last)}`);
}

describe.skipIf(postgresBinDir() === null)('cluster mode across a PostgreSQL restart', () => {
  it('loses nothing acknowledged, answers INTERNAL_ERROR meanwhile, and recovers by itself', async () => {
    pg = await startThrowawayPostgres({ settings: { fsync: 'off' } });
    const url = await pg.createDatabase('restart');
    nodes.push(...(await Promise.all([startServer('beanpole', ['--cluster', url]), startServer('beanpole', ['--cluster', url])])));
    const [a, b] = nodes as [RunningServer, RunningServer];
    const inserted = new Set<number>();
    const deleted = new Set<number>();
    const resurrected: number[] = [];
    /** Deletes sent: one answered INTERNAL_ERROR (or not at all) may still have committed. */
    const deleteTried = new Set<number>();
    const answers = new Map<string, number>();
    const note = (reply: string): void => {
      const word = reply.split(/[\r ]/)[0] ?? reply;
      answers.set(word, (answers.get(word) ?? 0) + 1);
    };
    let stop = false;

    /** Runs `step` on a connection to `port` until told to stop, reconnecting after each failure. */
    const loop = async (port: number, step: (c: RawClient) => Promise<void>): Promise<void> => {
      let c: RawClient | null = null;
      while (!stop) {
        try {
          c ??= await RawClient.connect(port);
          await step(c);
        } catch {
          note('<closed>');
          c?.destroy();
          c = null;
          await sleep(50);
        }
      }
      c?.destroy();
    };
    let n = 0;
    const produce = (): Promise<void> =>
      loop(a.port, async (c) => {
        const body = `job-${n++}`;
        const reply = await c.call(`put 0 0 60 ${body.length}\r\n${body}\r\n`, 15_000);
        note(reply);
        const m = /^INSERTED (\d+)\r\n$/.exec(reply);
        if (m !== null) inserted.add(Number(m[1]));
      });
    const work = (): Promise<void> =>
      loop(b.port, async (c) => {
        const reply = await c.call('reserve-with-timeout 1\r\n', 15_000);
        const m = /^RESERVED (\d+) /.exec(reply);
        if (m === null) return note(reply);
        const id = Number(m[1]);
        if (deleted.has(id)) resurrected.push(id);
        deleteTried.add(id);
        const done = await c.call(`delete ${id}\r\n`, 15_000);
        note(done);
        if (done === 'DELETED\r\n') deleted.add(id);
      });

    const load = [produce(), work()];
    await sleep(1500);
    const before = inserted.size;
    await pg.restart();
    const restartedAt = Date.now();
    // Both nodes take puts again by themselves.
    await until(a.port, 'put 0 0 60 1\r\nx\r\n', /^INSERTED \d+\r\n$/, restartedAt + 20_000).then((r) => inserted.add(Number(r.split(' ')[1])));
    await until(b.port, 'put 0 0 60 1\r\ny\r\n', /^INSERTED \d+\r\n$/, restartedAt + 20_000).then((r) => inserted.add(Number(r.split(' ')[1])));
    await sleep(1500);
    stop = true;
    await Promise.all(load);
    expect(inserted.size).toBeGreaterThan(before);

    // Notifications work again: a reserve blocked on B is woken by a put on A at once.
    const worker = await RawClient.connect(b.port);
    const producer = await RawClient.connect(a.port);
    try {
      // Drain first, so the waiting reserve gets the new job.
      for (;;) {
        const reply = await worker.call('reserve-with-timeout 1\r\n', 3000);
        const m = /^RESERVED (\d+) /.exec(reply);
        if (m === null) break;
        const id = Number(m[1]);
        if (deleted.has(id)) resurrected.push(id);
        expect(await worker.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
        deleted.add(id);
      }
      const waiting = worker.call('reserve-with-timeout 10\r\n', 12_000);
      await sleep(200);
      const started = Date.now();
      expect(await producer.call('put 0 0 60 4\r\nlast\r\n')).toMatch(/^INSERTED \d+\r\n$/);
      expect(await waiting).toMatch(/^RESERVED \d+ 4\r\nlast\r\n$/);
      expect(Date.now() - started).toBeLessThan(900);
    } finally {
      worker.destroy();
      producer.destroy();
    }

    expect(resurrected).toEqual([]);
    // A job whose delete was tried and got no DELETED is gone or was drained above.
    const lost = [...inserted].filter((id) => !deleted.has(id) && !deleteTried.has(id));
    expect(lost).toEqual([]);
    // The outage was seen: some commands failed rather than being acknowledged.
    expect((answers.get('INTERNAL_ERROR') ?? 0) + (answers.get('<closed>') ?? 0)).toBeGreaterThan(0);
  });
});
