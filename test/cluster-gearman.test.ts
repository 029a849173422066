/**
 * Gearman in cluster mode: several real Beanpole processes on one real PostgreSQL, clients and
 * workers on different nodes. A foreground job's WORK_* packets reach its client whichever node
 * its worker is on, unique ids coalesce across nodes, a job whose clients all left is not run,
 * `maxqueue` holds on every node, and a dead node's work runs again elsewhere.
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { freshDatabase } from './support/cluster-db.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { API } from '../shared/api.js';
import type { JobHistoryDto } from '../shared/history.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { expectOk } from './support/expectations.js';
import { gearmanPortFromLog, startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

const pgUrl = inject('pgUrl');
const servers: ServerProcess[] = [];
const clients: GearmanTestClient[] = [];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** A node with its Gearman port; returns that port. */
async function node(url: string, args: string[] = []): Promise<{ server: ServerProcess; port: number }> {
  const started = await startGearmanServer(['--cluster', url, ...args]);
  servers.push(started.server);
  return started;
}

async function connect(port: number): Promise<GearmanTestClient> {
  const c = await GearmanTestClient.connect(port);
  clients.push(c);
  return c;
}

async function submit(c: GearmanTestClient, type: number, f: string, unique: string, data: string): Promise<string> {
  c.request(type, f, unique, data);
  const [t, handle] = await c.args(1);
  expect(t).toBe(PACKET.JOB_CREATED);
  return handle!;
}

async function worker(port: number, f: string): Promise<GearmanTestClient> {
  const w = await connect(port);
  w.request(PACKET.CAN_DO, f);
  return w;
}

async function admin(port: number, command: string, single = false): Promise<string> {
  const c = await connect(port);
  c.send(`${command}\n`);
  return c.adminReply(single);
}

/** GET_STATUS's known, running, numerator and denominator. */
async function status(port: number, handle: string): Promise<string[]> {
  const c = await connect(port);
  c.request(PACKET.GET_STATUS, handle);
  const [, , ...rest] = await c.args(5);
  return rest;
}

/** Grabs until a job comes (a job made ready on another node reaches this one within milliseconds). */
async function grab(w: GearmanTestClient, timeoutMs = 5000): Promise<[number, ...string[]]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    w.request(PACKET.GRAB_JOB);
    const reply = await w.args(3);
    if (reply[0] !== PACKET.NO_JOB || Date.now() > deadline) return reply;
    await sleep(50);
  }
}

describe.skipIf(pgUrl === null)('Gearman in cluster mode', () => {
  it('--gearman-job-retries: a job a worker on one node failed twice (a CAN_DO_TIMEOUT, a disconnect) is dropped; its client on another node gets WORK_FAIL, its history says why', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_retries');
    const retries = ['--gearman-job-retries', '2'];
    const withAdmin: AdminServerProcess = await startAdminServer(['--cluster', url, '--gearman-listen', '127.0.0.1', '--gearman-port', '0', ...retries]);
    servers.push(withAdmin);
    const a = await gearmanPortFromLog(() => withAdmin.stderr());
    const b = await node(url, retries);
    const c = await connect(a);
    const handle = await submit(c, PACKET.SUBMIT_JOB, 'flaky', '', 'x');
    const slow = await connect(b.port);
    slow.request(PACKET.CAN_DO_TIMEOUT, 'flaky', '100');
    expect((await grab(slow))[1]).toBe(handle);
    // Its hold runs out (failure 1): the job is ready again, for the next worker.
    const leaving = await worker(b.port, 'flaky');
    expect((await grab(leaving))[1]).toBe(handle);
    leaving.destroy(); // failure 2: dropped
    expect(await c.args(1, 10_000)).toEqual([PACKET.WORK_FAIL, handle]);
    expect((await status(b.port, handle!))[0]).toBe('0');
    const history = expectOk<JobHistoryDto>(await api(withAdmin.url, API.gearmanJobHistory(handle!)));
    expect(history.events.map((e) => (e.note === '' ? e.kind : `${e.kind} ${e.note}`))).toEqual([
      'put',
      'reserve',
      'timeout',
      'reserve',
      'disconnect',
      'retries-exhausted 2 disconnect',
    ]);
  });

  it('a foreground job submitted on one node and run on another: its WORK_* packets reach the client in order, GET_STATUS agrees on every node', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_relay');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const w = await worker(b.port, 'resize');
    w.request(PACKET.PRE_SLEEP);
    await sleep(100);
    const c = await connect(a.port);
    const handle = await submit(c, PACKET.SUBMIT_JOB, 'resize', '', 'photo');
    // The sleeping worker on the other node is woken.
    expect((await w.packet()).type).toBe(PACKET.NOOP);
    expect(await grab(w)).toEqual([PACKET.JOB_ASSIGN, handle, 'resize', 'photo']);
    w.request(PACKET.WORK_DATA, handle, 'part 1');
    w.request(PACKET.WORK_STATUS, handle, '1', '2');
    w.request(PACKET.WORK_WARNING, handle, 'slow');
    expect(await c.args(2)).toEqual([PACKET.WORK_DATA, handle, 'part 1']);
    expect(await c.args(3)).toEqual([PACKET.WORK_STATUS, handle, '1', '2']);
    expect(await c.args(2)).toEqual([PACKET.WORK_WARNING, handle, 'slow']);
    expect(await status(a.port, handle)).toEqual(['1', '1', '1', '2']);
    expect(await status(b.port, handle)).toEqual(['1', '1', '1', '2']);
    w.request(PACKET.WORK_COMPLETE, handle, 'thumbnail');
    expect(await c.args(2)).toEqual([PACKET.WORK_COMPLETE, handle, 'thumbnail']);
    // The client hears the result once the job is gone, on every node.
    expect(await status(a.port, handle)).toEqual(['0', '0', '0', '0']);
    expect(await status(b.port, handle)).toEqual(['0', '0', '0', '0']);
    expect(await c.silentFor(200)).toBe(true);
  });

  it('unique ids coalesce across nodes: one job, and every waiting client on every node gets its result', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_unique');
    const [a, b, c] = await Promise.all([node(url), node(url), node(url)]);
    const ca = await connect(a.port);
    const cb = await connect(b.port);
    const h1 = await submit(ca, PACKET.SUBMIT_JOB, 'report', 'monthly', 'first');
    const h2 = await submit(cb, PACKET.SUBMIT_JOB_HIGH, 'report', 'monthly', 'second');
    const h3 = await submit(await connect(c.port), PACKET.SUBMIT_JOB_BG, 'report', 'monthly', 'third');
    expect(h2).toBe(h1);
    expect(h3).toBe(h1);
    expect(await admin(c.port, 'status')).toBe('report\t1\t0\t0\n.\n');
    const w = await worker(c.port, 'report');
    expect(await grab(w)).toEqual([PACKET.JOB_ASSIGN, h1, 'report', 'first']);
    w.request(PACKET.WORK_COMPLETE, h1, 'done');
    expect(await ca.args(2)).toEqual([PACKET.WORK_COMPLETE, h1, 'done']);
    expect(await cb.args(2)).toEqual([PACKET.WORK_COMPLETE, h1, 'done']);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
    // The unique id is free again once the job is done.
    const again = await submit(ca, PACKET.SUBMIT_JOB_BG, 'report', 'monthly', 'next month');
    expect(again).not.toBe(h1);
  });

  it('unique ids coalesce when many clients on several nodes submit at the same instant', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_unique_race');
    const nodes = await Promise.all([node(url), node(url)]);
    const submitters = await Promise.all(Array.from({ length: 8 }, (_, i) => connect(nodes[i % 2]!.port)));
    const handles = await Promise.all(submitters.map((s, i) => submit(s, PACKET.SUBMIT_JOB_BG, 'once', 'the-key', `from ${i}`)));
    expect(new Set(handles).size).toBe(1);
    expect(await admin(nodes[0]!.port, 'status')).toBe('once\t1\t0\t0\n.\n');
  });

  it('a foreground job whose client left before any worker took it is not run, whichever node the worker is on', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_abandoned');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const c = await connect(a.port);
    await submit(c, PACKET.SUBMIT_JOB, 'left', '', 'nobody waits');
    const kept = await connect(a.port);
    const handle = await submit(kept, PACKET.SUBMIT_JOB_BG, 'left', '', 'background stays');
    c.destroy();
    await sleep(300);
    const w = await worker(b.port, 'left');
    expect(await grab(w)).toEqual([PACKET.JOB_ASSIGN, handle, 'left', 'background stays']);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
  });

  it('a foreground job whose one connection was its client and its worker is not run again once that connection closes, however soon another worker asks', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_self_abandoned');
    const { port } = await node(url);
    for (let round = 0; round < 10; round++) {
      const both = await connect(port);
      both.request(PACKET.CAN_DO, 'self');
      const handle = await submit(both, PACKET.SUBMIT_JOB, 'self', '', `round ${round}`);
      both.request(PACKET.GRAB_JOB);
      expect(await both.args(3)).toEqual([PACKET.JOB_ASSIGN, handle, 'self', `round ${round}`]);
      both.destroy(); // client and worker leave together, the job half done
      const next = await worker(port, 'self');
      next.request(PACKET.GRAB_JOB);
      expect((await next.packet()).type).toBe(PACKET.NO_JOB);
      next.destroy();
    }
  });

  it('a foreground job is kept while any client on any node still waits on it, and dropped when the last ones leave together', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_waiters');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const first = await connect(a.port);
    const second = await connect(a.port);
    const h = await submit(first, PACKET.SUBMIT_JOB, 'shared', 'same', 'x');
    expect(await submit(second, PACKET.SUBMIT_JOB, 'shared', 'same', 'x')).toBe(h);
    first.destroy(); // the other client on the same node still waits
    await sleep(300);
    const w = await worker(b.port, 'shared');
    expect(await grab(w)).toEqual([PACKET.JOB_ASSIGN, h, 'shared', 'x']);
    w.request(PACKET.WORK_COMPLETE, h, 'for the one left');
    expect(await second.args(2)).toEqual([PACKET.WORK_COMPLETE, h, 'for the one left']);

    // Two clients on two nodes leave the same job at the same moment: it is dropped.
    const ca = await connect(a.port);
    const cb = await connect(b.port);
    const h2 = await submit(ca, PACKET.SUBMIT_JOB, 'shared', 'twice', 'y');
    expect(await submit(cb, PACKET.SUBMIT_JOB, 'shared', 'twice', 'y')).toBe(h2);
    ca.destroy();
    cb.destroy();
    await sleep(300);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
    expect(await admin(b.port, 'status')).toBe('shared\t0\t0\t1\n.\n'); // the worker is on node b
  });

  it('a job cancelled on another node: its waiting client is told it failed', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_cancel');
    const [a, b] = await Promise.all([node(url), node(url)]);
    const c = await connect(a.port);
    const handle = await submit(c, PACKET.SUBMIT_JOB, 'cancel-me', '', 'x');
    expect(await admin(b.port, `cancel job ${handle}`, true)).toBe('OK\r\n');
    expect(await c.args(1, 5000)).toEqual([PACKET.WORK_FAIL, handle]);
  });

  it('maxqueue set on one node limits submits on every node', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_maxqueue');
    const [a, b] = await Promise.all([node(url), node(url)]);
    expect(await admin(a.port, 'maxqueue capped 1', true)).toBe('OK\r\n');
    await sleep(1500); // every node reads the limits each second
    const c = await connect(b.port);
    await submit(c, PACKET.SUBMIT_JOB_BG, 'capped', '', '1');
    c.request(PACKET.SUBMIT_JOB_BG, 'capped', '', '2');
    expect(await c.args(2)).toEqual([PACKET.ERROR, 'QUEUE_ERROR', 'Job queue is full']);
  });

  it('maxqueue holds when many clients on two nodes submit at the same instant: exactly the limit is queued', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_maxqueue_race');
    const [a, b] = await Promise.all([node(url), node(url)]);
    expect(await admin(a.port, 'maxqueue raced 5', true)).toBe('OK\r\n');
    await sleep(1500); // every node reads the limits each second
    const submitters = await Promise.all(Array.from({ length: 12 }, (_, i) => connect(i % 2 === 0 ? a.port : b.port)));
    const answers = await Promise.all(
      submitters.map(async (c, i) => {
        c.request(PACKET.SUBMIT_JOB_BG, 'raced', '', `job ${i}`);
        return (await c.args(1))[0];
      }),
    );
    expect(answers.filter((t) => t === PACKET.JOB_CREATED)).toHaveLength(5);
    expect(answers.filter((t) => t === PACKET.ERROR)).toHaveLength(7);
    expect(await admin(b.port, 'status')).toBe('raced\t5\t0\t0\n.\n');
  });

  it('a background job outlives the node it was submitted on, and a job held on a killed node runs again elsewhere once its lease runs out', async () => {
    const url = await freshDatabase(pgUrl!, 'gearman_failover');
    const lease = ['--cluster-lease-ms', '1000'];
    const [a, b, c] = await Promise.all([node(url, lease), node(url, lease), node(url, lease)]);
    const handle = await submit(await connect(a.port), PACKET.SUBMIT_JOB_BG, 'durable', 'u-1', 'payload');
    a.server.signal('SIGKILL');
    const held = await worker(b.port, 'durable');
    expect(await grab(held)).toEqual([PACKET.JOB_ASSIGN, handle, 'durable', 'payload']);
    b.server.signal('SIGKILL');
    const w = await worker(c.port, 'durable');
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
    // Back within about 1.2 leases of the last heartbeat; the unique id still coalesces meanwhile.
    expect(await submit(await connect(c.port), PACKET.SUBMIT_JOB_BG, 'durable', 'u-1', 'again')).toBe(handle);
    expect(await grab(w, 6000)).toEqual([PACKET.JOB_ASSIGN, handle, 'durable', 'payload']);
  });
});
