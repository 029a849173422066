/**
 * Live updates over socket.io against a real server process: snapshots on (re)connect, the 1 Hz
 * stats tick with rates, tube and job changes pushed to other dashboards within a batch, room
 * scoping (tube:view / job:view), coalescing under a flood of protocol puts, and reconnects.
 */
import { io, type Socket } from 'socket.io-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { JobDto, SnapshotDto, StatsTickDto, TubeDto } from '../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/events.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { PipelineClient } from './support/pipeline-client.js';
import { RawClient } from './support/raw-client.js';

type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
type EventName = keyof ServerToClientEvents;
type EventArg<E extends EventName> = Parameters<ServerToClientEvents[E]>[0];

interface Received {
  event: string;
  at: number;
  args: unknown[];
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A dashboard stand-in: a typed socket that records every event it receives, in order. */
class Dashboard {
  readonly socket: ClientSocket;
  readonly log: Received[] = [];
  private waiters = new Set<() => void>();

  constructor(url: string, opts: { token?: string; reconnection?: boolean; headers?: Record<string, string> } = {}) {
    this.socket = io(url, {
      auth: opts.token === undefined ? {} : { token: opts.token },
      transports: ['websocket'],
      reconnection: opts.reconnection ?? false,
      reconnectionDelay: 50,
      reconnectionDelayMax: 200,
      timeout: 5000,
      extraHeaders: opts.headers,
    });
    this.socket.onAny((event: string, ...args: unknown[]) => {
      this.log.push({ event, at: Date.now(), args });
      this.wake();
    });
    this.socket.on('connect_error', () => this.wake());
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Where the log is now; pass to `since` / `waitFor` to look only at what comes later. */
  mark(): number {
    return this.log.length;
  }

  since<E extends EventName>(from: number, event: E): { arg: EventArg<E>; at: number }[] {
    return this.log
      .slice(from)
      .filter((r) => r.event === event)
      .map((r) => ({ arg: r.args[0] as EventArg<E>, at: r.at }));
  }

  /** The first `event` at or after `from` whose argument satisfies `pred`. */
  async waitFor<E extends EventName>(
    event: E,
    pred: (arg: EventArg<E>) => boolean,
    from: number,
    timeoutMs = 3000,
  ): Promise<{ arg: EventArg<E>; at: number }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.since(from, event).find((r) => pred(r.arg));
      if (hit !== undefined) return hit;
      const left = deadline - Date.now();
      if (left <= 0) {
        const seen = this.log
          .slice(from)
          .map((r) => `${r.event} ${JSON.stringify(r.args).slice(0, 200)}`)
          .slice(-10);
        throw new Error(`no matching ${event} within ${timeoutMs} ms; last events:\n${seen.join('\n')}`);
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          this.waiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, left);
        this.waiters.add(done);
      });
    }
  }

  /** Resolves with the next snapshot after `from`, or rejects on a connect error. */
  async snapshot(from: number, timeoutMs = 5000): Promise<SnapshotDto> {
    const err = new Promise<never>((_, reject) => {
      this.socket.once('connect_error', (e) => reject(e));
    });
    return Promise.race([this.waitFor('snapshot', () => true, from, timeoutMs).then((r) => r.arg), err]);
  }

  async view(tube: string): Promise<void> {
    const res = await this.socket.timeout(3000).emitWithAck('tube:view', tube);
    expect(res).toEqual({ ok: true });
  }

  async viewJob(id: number): Promise<void> {
    const res = await this.socket.timeout(3000).emitWithAck('job:view', id);
    expect(res).toEqual({ ok: true });
  }

  close(): void {
    this.socket.disconnect();
  }
}

let srv: AdminServerProcess;
let base: string;
const dashboards: Dashboard[] = [];
const clients: RawClient[] = [];

beforeAll(async () => {
  srv = await startAdminServer();
  base = srv.url;
});
afterAll(async () => {
  await srv?.stop();
});
afterEach(async () => {
  for (const d of dashboards.splice(0)) d.close();
  for (const c of clients.splice(0)) c.destroy();
  // Let the server see the disconnects before the next case counts messages.
  await delay(50);
});

/** A connected dashboard and its first snapshot. */
async function dashboard(opts: { token?: string; reconnection?: boolean } = {}): Promise<{ d: Dashboard; snapshot: SnapshotDto }> {
  const d = new Dashboard(base, opts);
  dashboards.push(d);
  return { d, snapshot: await d.snapshot(0) };
}

async function tcp(): Promise<RawClient> {
  const c = await RawClient.connect(srv.port);
  clients.push(c);
  return c;
}

async function expectLine(c: RawClient, cmd: string, want: string): Promise<void> {
  expect(await c.call(`${cmd}\r\n`), cmd).toBe(`${want}\r\n`);
}

async function restPut(tube: string, body: string, extra: Record<string, number> = {}): Promise<JobDto> {
  const res = await api(base, API.tubeJobs(tube), { json: { body, ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.json as JobDto;
}

function tubeIn(name: string, pred: (t: TubeDto) => boolean = () => true): (tubes: TubeDto[]) => boolean {
  return (tubes) => tubes.some((t) => t.name === name && pred(t));
}

describe('socket.io live updates', () => {
  it('every client gets a snapshot on connect: config, stats, tubes and history', async () => {
    const [a, b] = await Promise.all([dashboard(), dashboard()]);
    for (const { snapshot } of [a, b]) {
      expect(Object.keys(snapshot).sort()).toEqual(['config', 'history', 'stats', 'tubes']);
      expect(snapshot.config).toEqual({ version: expect.any(String), readOnly: false, tokenRequired: false, maxJobSize: 65535, binlog: false, clusterNode: null });
      expect(typeof snapshot.stats['cmd-put']).toBe('number');
      expect(typeof snapshot.stats['current-jobs-ready']).toBe('number');
      const def = snapshot.tubes.find((t) => t.name === 'default');
      expect(def).toBeDefined();
      expect(def!.ready).toBe(0);
      expect(Array.isArray(snapshot.history)).toBe(true);
    }
    // The snapshot agrees with the REST answers.
    const tubes = (await api(base, API.tubes)).json as TubeDto[];
    expect(a.snapshot.tubes.map((t) => t.name)).toEqual(tubes.map((t) => t.name));
    expect(a.d.socket.connected && b.d.socket.connected).toBe(true);
  });

  it('stats:ticked arrives about once a second, with rates; put rate > 0 after TCP puts', async () => {
    const { d } = await dashboard();
    const from = d.mark();
    const c = await tcp();
    await expectLine(c, 'use sock-rate', 'USING sock-rate');
    // Three ticks: spacing about a second apart.
    const t1 = await d.waitFor('stats:ticked', () => true, from, 2500);
    const t2 = await d.waitFor('stats:ticked', (t) => t.at > t1.arg.at, from, 2500);
    for (let i = 0; i < 30; i++) expect(await c.call('put 0 0 60 1\r\nx\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    const t3 = await d.waitFor('stats:ticked', (t) => t.at > t2.arg.at, from, 2500);
    for (const [x, y] of [
      [t1, t2],
      [t2, t3],
    ] as const) {
      expect(y.arg.at - x.arg.at).toBeGreaterThanOrEqual(700);
      expect(y.arg.at - x.arg.at).toBeLessThanOrEqual(1600);
    }
    const tick: StatsTickDto = t3.arg;
    expect(Object.keys(tick).sort()).toEqual(['at', 'rates', 'stats']);
    expect(Object.keys(tick.rates).sort()).toEqual(['bury', 'delete', 'kick', 'release', 'reserve', 'timeouts', 'put'].sort());
    for (const v of Object.values(tick.rates)) expect(Number.isInteger(v) && v >= 0).toBe(true);
    // The puts land in the tick that follows them (t3, or the next one if they straddled it).
    const withPuts = await d.waitFor('stats:ticked', (t) => t.rates.put > 0, from, 2500);
    expect(withPuts.arg.rates.put).toBeGreaterThan(0);
    expect(withPuts.arg.rates.put).toBeLessThanOrEqual(60);
    expect(withPuts.arg.stats['cmd-put']).toBeGreaterThanOrEqual(30);
    // A client that connects now sees those ticks in its history, oldest first.
    const late = await dashboard();
    const ats = late.snapshot.history.map((h) => h.at);
    expect(ats.length).toBeGreaterThanOrEqual(3);
    expect([...ats].sort((x, y) => x - y)).toEqual(ats);
    expect(ats).toContain(t2.arg.at);
    expect(late.snapshot.history.some((h) => h.rates.put > 0)).toBe(true);
  });

  it('a REST put by A and a TCP bury reach B as tubes:updated within a second', async () => {
    const [{ d: a }, { d: b }] = await Promise.all([dashboard(), dashboard()]);
    let from = b.mark();
    const fromA = a.mark();
    const t0 = Date.now();
    const job = await restPut('sock-upd', 'hello');
    const upd = await b.waitFor('tubes:updated', tubeIn('sock-upd', (t) => t.ready === 1), from, 3000);
    expect(upd.at - t0).toBeLessThan(1000);
    const dto = upd.arg.find((t) => t.name === 'sock-upd')!;
    expect(dto).toEqual((await api(base, API.tube('sock-upd'))).json);
    // The client that made the change hears about it too.
    await a.waitFor('tubes:updated', tubeIn('sock-upd'), fromA, 3000);

    const w = await tcp();
    await expectLine(w, 'watch sock-upd', 'WATCHING 2');
    await expectLine(w, 'ignore default', 'WATCHING 1');
    expect(await w.call('reserve-with-timeout 0\r\n')).toBe(`RESERVED ${job.id} 5\r\nhello\r\n`);
    from = b.mark();
    const t1 = Date.now();
    await expectLine(w, `bury ${job.id} 0`, 'BURIED');
    const buried = await b.waitFor('tubes:updated', tubeIn('sock-upd', (t) => t.buried === 1), from, 3000);
    expect(buried.at - t1).toBeLessThan(1000);
    expect(buried.arg.find((t) => t.name === 'sock-upd')).toMatchObject({ ready: 0, reserved: 0, buried: 1, watching: 1 });
  });

  it('tubes:removed when a tube disappears', async () => {
    const { d: b } = await dashboard();
    let from = b.mark();
    const job = await restPut('sock-gone', 'x');
    await b.waitFor('tubes:updated', tubeIn('sock-gone'), from);
    from = b.mark();
    expect((await api(base, API.job(job.id), { method: 'DELETE' })).status).toBe(204);
    const removed = await b.waitFor('tubes:removed', (names) => names.includes('sock-gone'), from);
    expect(removed.arg).toEqual(['sock-gone']);
    // A tube a TCP client only used: created on use, removed when the client leaves.
    const c = await tcp();
    from = b.mark();
    await expectLine(c, 'use sock-used', 'USING sock-used');
    await b.waitFor('tubes:updated', tubeIn('sock-used', (t) => t.using === 1), from);
    from = b.mark();
    c.destroy();
    await b.waitFor('tubes:removed', (names) => names.includes('sock-used'), from);
    expect((await api(base, API.tube('sock-used'))).status).toBe(404);
    // Not reported as updated after it went.
    await delay(400);
    expect(b.since(from, 'tubes:updated').some((u) => tubeIn('sock-used')(u.arg))).toBe(false);
  });

  it('tube:jobs-changed goes to viewers of that tube only', async () => {
    const [{ d: a }, { d: b }] = await Promise.all([dashboard(), dashboard()]);
    await b.view('sock-v');
    const bad = await b.socket.timeout(3000).emitWithAck('tube:view', 'v'.repeat(201));
    expect(bad.ok).toBe(false);
    let from = b.mark();
    const fromA = a.mark();
    const job = await restPut('sock-v', 'viewed');
    await restPut('sock-nv', 'not viewed');
    const ch = await b.waitFor('tube:jobs-changed', (c) => c.tube === 'sock-v', from);
    expect(ch.arg.states).toEqual(['ready']);
    await b.waitFor('tubes:updated', tubeIn('sock-nv'), from);
    await delay(600);
    expect(b.since(from, 'tube:jobs-changed').map((c) => c.arg.tube)).not.toContain('sock-nv');
    expect(a.since(fromA, 'tube:jobs-changed')).toEqual([]);

    // A TCP reserve and bury: the states that gained or lost jobs.
    const w = await tcp();
    await expectLine(w, 'watch sock-v', 'WATCHING 2');
    await expectLine(w, 'ignore default', 'WATCHING 1');
    from = b.mark();
    expect(await w.call('reserve-with-timeout 0\r\n')).toMatch(new RegExp(`^RESERVED ${job.id} `));
    const r = await b.waitFor('tube:jobs-changed', (c) => c.tube === 'sock-v' && c.states.includes('reserved'), from);
    expect(r.arg.states).toContain('ready');
    from = b.mark();
    await expectLine(w, `bury ${job.id} 0`, 'BURIED');
    const bu = await b.waitFor('tube:jobs-changed', (c) => c.tube === 'sock-v' && c.states.includes('buried'), from);
    expect([...bu.arg.states].sort()).toEqual(['buried', 'reserved']);

    // After tube:leave, nothing more for that tube.
    b.socket.emit('tube:leave', 'sock-v');
    await delay(100);
    from = b.mark();
    await restPut('sock-v', 'after leave');
    await b.waitFor('tubes:updated', tubeIn('sock-v', (t) => t.ready === 1), from);
    await delay(400);
    expect(b.since(from, 'tube:jobs-changed')).toEqual([]);
  });

  it('a job moved to another tube updates both tubes, and viewers of the tube it left', async () => {
    const { d } = await dashboard();
    await d.view('sock-move-from');
    const stay = await restPut('sock-move-from', 'stays');
    const job = await restPut('sock-move-from', 'moves');
    await d.waitFor('tubes:updated', tubeIn('sock-move-from', (t) => t.ready === 2), 0);
    const from = d.mark();
    const res = await api(base, API.job(job.id), { method: 'PATCH', json: { tube: 'sock-move-to' } });
    expect(res.status, res.text).toBe(200);
    await d.waitFor('tubes:updated', tubeIn('sock-move-from', (t) => t.ready === 1), from);
    await d.waitFor('tubes:updated', tubeIn('sock-move-to', (t) => t.ready === 1), from);
    await d.waitFor('tube:jobs-changed', (c) => c.tube === 'sock-move-from' && c.states.includes('ready'), from);
    // Moving the last job out removes the tube, and viewers hear of it.
    const from2 = d.mark();
    const moved = await api(base, API.tubeMove('sock-move-from'), { method: 'POST', json: { to: 'sock-move-to', state: 'ready', limit: 10 } });
    expect(moved.json).toEqual({ count: 1 });
    await d.waitFor('tubes:removed', (names) => names.includes('sock-move-from'), from2);
    await d.waitFor('tubes:updated', tubeIn('sock-move-to', (t) => t.ready === 2), from2);
    expect(stay.id).toBeLessThan(job.id);
  });

  it('job:updated and job:deleted go to viewers of that job', async () => {
    const [{ d: a }, { d: b }] = await Promise.all([dashboard(), dashboard()]);
    const job = await restPut('sock-job', 'first', { priority: 10 });
    const other = await restPut('sock-job', 'other', { priority: 20 });
    await b.viewJob(job.id);
    const badJob = await b.socket.timeout(3000).emitWithAck('job:view', -1);
    expect(badJob.ok).toBe(false);
    let from = b.mark();
    const fromA = a.mark();
    const patched = await api(base, API.job(job.id), { method: 'PATCH', json: { body: 'edited by A', priority: 3 } });
    expect(patched.status).toBe(200);
    await api(base, API.job(other.id), { method: 'PATCH', json: { priority: 21 } });
    const u = await b.waitFor('job:updated', (j) => j.id === job.id, from);
    expect(u.arg).toMatchObject({ id: job.id, priority: 3, state: 'ready', tube: 'sock-job', bodyBytes: 11 });
    expect(u.arg.body).toEqual({ encoding: 'utf8', text: 'edited by A', bytes: 11, truncated: false });
    await delay(400);
    expect(b.since(from, 'job:updated').map((x) => x.arg.id)).toEqual([job.id]);
    expect(a.since(fromA, 'job:updated')).toEqual([]);

    // A TCP worker reserving it is a change too.
    const w = await tcp();
    await expectLine(w, 'watch sock-job', 'WATCHING 2');
    await expectLine(w, 'ignore default', 'WATCHING 1');
    from = b.mark();
    expect(await w.call('reserve-with-timeout 0\r\n')).toMatch(new RegExp(`^RESERVED ${job.id} `));
    const r = await b.waitFor('job:updated', (j) => j.id === job.id && j.state === 'reserved', from);
    expect(r.arg.reserves).toBe(1);
    await expectLine(w, `release ${job.id} 3 0`, 'RELEASED');

    from = b.mark();
    expect((await api(base, API.job(job.id), { method: 'DELETE' })).status).toBe(204);
    const del = await b.waitFor('job:deleted', (id) => id === job.id, from);
    expect(del.arg).toBe(job.id);
    expect((await api(base, API.job(other.id), { method: 'DELETE' })).status).toBe(204);
    await delay(400);
    expect(b.since(from, 'job:deleted').map((x) => x.arg)).toEqual([job.id]);
    expect(a.since(fromA, 'job:deleted')).toEqual([]);
  });

  it('coalescing: 20,000 pipelined TCP puts make only a handful of messages, with the right final counts', async () => {
    const { d: b } = await dashboard();
    await b.view('sock-bulk');
    const from = b.mark();
    const p = await PipelineClient.connect(srv.port);
    try {
      const N = 20_000;
      const started = Date.now();
      await p.write('use sock-bulk\r\n');
      // Pipelined (no waiting for replies), in 20 writes spread over about a second so the
      // flood spans several 250 ms batches.
      const chunk = 'put 0 0 60 5\r\nhello\r\n'.repeat(1000);
      for (let i = 0; i < N / 1000; i++) {
        await p.write(chunk);
        await delay(50);
      }
      await p.waitReplies(N + 1, 30_000);
      const putMs = Date.now() - started;
      const last = await b.waitFor('tubes:updated', tubeIn('sock-bulk', (t) => t.ready === N), from, 3000);
      await delay(600);
      const updates = b.since(from, 'tubes:updated');
      const bulkUpdates = updates.filter((u) => tubeIn('sock-bulk')(u.arg));
      const changes = b.since(from, 'tube:jobs-changed');
      // 250 ms batches: about putMs / 250 + 1 of each, far from one per put.
      const limit = Math.max(40, Math.ceil(putMs / 250) + 4);
      expect(updates.length, `${updates.length} tubes:updated for ${N} puts in ${putMs} ms`).toBeLessThan(limit);
      expect(bulkUpdates.length).toBeGreaterThanOrEqual(2);
      expect(changes.length).toBeLessThan(limit);
      expect(changes.every((c) => c.arg.tube === 'sock-bulk' && c.arg.states.join() === 'ready')).toBe(true);
      // No message arrives after the final one with an older count, and the final one is right.
      expect(bulkUpdates.at(-1)!.arg.find((t) => t.name === 'sock-bulk')!.ready).toBe(N);
      const counts = bulkUpdates.map((u) => u.arg.find((t) => t.name === 'sock-bulk')!.ready);
      expect([...counts].sort((x, y) => x - y)).toEqual(counts);
      const rest = (await api(base, API.tube('sock-bulk'))).json as TubeDto;
      // The age of the next ready job grows by itself between the push and this request (the
      // first put is about a second old): it may have crossed a second since.
      const { nextReadyAgeSeconds: pushedAge, ...pushed } = last.arg.find((t) => t.name === 'sock-bulk')!;
      const { nextReadyAgeSeconds: restAge, ...now } = rest;
      expect(pushed).toEqual(now);
      expect(restAge - pushedAge).toBeGreaterThanOrEqual(0);
      expect(restAge - pushedAge).toBeLessThanOrEqual(1);
      expect(rest).toMatchObject({ ready: N, totalJobs: N, using: 1 });
    } finally {
      p.destroy();
    }
    // Clearing them is one more coalesced change.
    const cleared = await api(base, `${API.tubeJobs('sock-bulk')}?state=ready`, { method: 'DELETE' });
    expect(cleared.json).toEqual({ count: 20_000 });
  });

  it('after a disconnect and a reconnect the client gets a new snapshot and live updates again', async () => {
    const { d, snapshot: first } = await dashboard();
    expect(first.tubes.some((t) => t.name === 'sock-away')).toBe(false);
    d.socket.disconnect();
    // With no dashboard connected at all, the server stops listening to the engine.
    await delay(200);
    await restPut('sock-away', 'while away');
    let from = d.mark();
    d.socket.connect();
    const second = await d.snapshot(from);
    expect(second.tubes.find((t) => t.name === 'sock-away')).toMatchObject({ ready: 1 });
    expect(second.stats['cmd-put'] as number).toBeGreaterThan(first.stats['cmd-put'] as number);
    from = d.mark();
    await restPut('sock-back', 'after');
    await d.waitFor('tubes:updated', tubeIn('sock-back', (t) => t.ready === 1), from);

    // A dropped transport: the client reconnects by itself and gets a snapshot again.
    const r = await dashboard({ reconnection: true });
    await r.d.view('sock-back');
    from = r.d.mark();
    r.d.socket.io.engine.close();
    const third = await r.d.snapshot(from, 5000);
    expect(third.tubes.find((t) => t.name === 'sock-back')).toMatchObject({ ready: 1 });
    expect(r.d.socket.connected).toBe(true);
    // Rooms do not survive a reconnect: the client views again, then hears about the tube.
    await r.d.view('sock-back');
    from = r.d.mark();
    await restPut('sock-back', 'again');
    await r.d.waitFor('tube:jobs-changed', (c) => c.tube === 'sock-back', from);
  });

  it('a page from another origin cannot open a socket; the same origin can', async () => {
    const evil = new Dashboard(base, { headers: { origin: 'http://evil.example' } });
    dashboards.push(evil);
    await expect(evil.snapshot(0, 3000)).rejects.toThrow();
    const same = new Dashboard(base, { headers: { origin: new URL(base).origin } });
    dashboards.push(same);
    expect((await same.snapshot(0)).config.readOnly).toBe(false);
  });

  it('server:draining reaches connected clients on SIGUSR1', async () => {
    const { d } = await dashboard();
    const from = d.mark();
    srv.signal('SIGUSR1');
    await d.waitFor('server:draining', () => true, from);
    expect((await api(base, '/healthz')).json).toEqual({ ok: true, draining: true });
    const put = await api(base, API.tubeJobs('sock-drain'), { json: { body: 'x' } });
    expect(put.status).toBe(503);
    expect(put.json).toMatchObject({ error: 'DRAINING' });
    // The put that was refused leaves no tube behind.
    expect((await api(base, API.tube('sock-drain'))).status).toBe(404);
  });
});

describe('socket.io limits: views per socket, events per second', () => {
  type AckResult = { ok: true } | { ok: false; error: string };
  let own: AdminServerProcess;

  beforeAll(async () => {
    own = await startAdminServer();
  });
  afterAll(async () => {
    await own?.stop();
  });

  function ownDashboard(): Dashboard {
    const d = new Dashboard(own.url);
    dashboards.push(d);
    return d;
  }

  /** View number `i`: even ones are tubes, odd ones jobs, so both kinds share the limit. */
  function viewNumber(d: Dashboard, i: number): Promise<AckResult> {
    return i % 2 === 0 ? d.socket.timeout(5000).emitWithAck('tube:view', `lim-${i}`) : d.socket.timeout(5000).emitWithAck('job:view', i);
  }

  it('a socket holds at most 1,000 tube and job views: the 1,001st gets an error acknowledgement', async () => {
    const d = ownDashboard();
    await d.snapshot(0);
    // Under the rate limit: 190 at once (the burst is 200), then 45 every 470 ms (100 a second).
    const results: AckResult[] = await Promise.all(Array.from({ length: 190 }, (_, i) => viewNumber(d, i)));
    for (let next = 190; next < 1000; next += 45) {
      await delay(470);
      results.push(...(await Promise.all(Array.from({ length: Math.min(45, 1000 - next) }, (_, k) => viewNumber(d, next + k)))));
    }
    expect(results.length).toBe(1000);
    expect(results.filter((r) => !r.ok)).toEqual([]);
    await delay(470);
    const refused = await viewNumber(d, 1000);
    expect(refused).toEqual({ ok: false, error: expect.stringMatching(/too many views on this connection \(at most 1000 tubes and jobs together\)/) });
    expect(await viewNumber(d, 1001)).toEqual({ ok: false, error: expect.stringMatching(/at most 1000/) });
    // What it already views can be viewed again; leaving one makes room for another.
    expect(await viewNumber(d, 0)).toEqual({ ok: true });
    expect(await viewNumber(d, 999)).toEqual({ ok: true });
    d.socket.emit('job:leave', 999);
    expect(await viewNumber(d, 1001)).toEqual({ ok: true });
    expect(d.socket.connected).toBe(true);
    // Another socket has its own allowance.
    const other = ownDashboard();
    await other.snapshot(0);
    expect(await viewNumber(other, 5000)).toEqual({ ok: true });
  });

  it('an acknowledgement that is not a function (a hand-made client) is skipped; the server keeps running', async () => {
    const d = ownDashboard();
    await d.snapshot(0);
    const untyped = d.socket as unknown as Socket;
    untyped.emit('tube:view', 'odd-ack', 5);
    untyped.emit('job:view', 'not an id', 'not a function');
    untyped.emit('tube:leave', { name: 'odd-ack' });
    expect(await d.socket.timeout(3000).emitWithAck('tube:view', 'odd-ack')).toEqual({ ok: true });
    expect(d.socket.connected).toBe(true);
    const c = await RawClient.connect(own.port);
    clients.push(c);
    await expectLine(c, 'use odd-ack', 'USING odd-ack');
    expect(own.process.exitCode).toBeNull();
  });

  it('a client flooding views is refused, then disconnected; the job port keeps answering throughout', async () => {
    const c = await RawClient.connect(own.port);
    clients.push(c);
    await expectLine(c, 'use flood-probe', 'USING flood-probe');
    await expectLine(c, 'watch flood-probe', 'WATCHING 2');
    const flooder = ownDashboard();
    await flooder.snapshot(0);
    const acks: AckResult[] = [];
    const closed = new Promise<string>((resolve) => flooder.socket.once('disconnect', resolve));
    let stopped = false;
    void closed.then(() => (stopped = true));

    // Meanwhile on the job port: put, reserve, delete, each answered exactly.
    let triples = 0;
    const probe = (async (): Promise<void> => {
      while (!stopped || triples < 20) {
        const put = await c.call('put 0 0 60 5\r\nhello\r\n');
        const id = /^INSERTED (\d+)\r\n$/.exec(put)?.[1];
        expect(id, put).toBeDefined();
        expect(await c.call('reserve-with-timeout 0\r\n')).toBe(`RESERVED ${id} 5\r\nhello\r\n`);
        await expectLine(c, `delete ${id}`, 'DELETED');
        triples++;
      }
    })().then(
      () => null,
      (err: unknown) => err,
    );

    const FLOOD = 20_000;
    for (let i = 0; i < FLOOD && flooder.socket.connected; i++) {
      if (i % 2 === 0) flooder.socket.emit('tube:view', `flood-${i}`, (r) => acks.push(r));
      else flooder.socket.emit('job:view', i, (r) => acks.push(r));
      if (i % 500 === 499) await new Promise((r) => setImmediate(r));
    }
    const reason = await Promise.race([closed, delay(15_000).then(() => 'still connected after 15 s')]);
    stopped = true;
    expect(reason).toBe('io server disconnect');
    const probeError = await probe;
    if (probeError !== null) throw probeError;

    const served = acks.filter((r) => r.ok).length;
    const limited = acks.filter((r) => !r.ok && /too many requests/.test(r.error)).length;
    // The burst (200 events, plus 100 a second while it lasts) is served and the rest refused
    // until the socket is cut off 200 refusals later. Served events still queued when the cut-off
    // lands in the same read are dropped with the socket, so fewer of their acknowledgements may
    // arrive; refusals are answered at once.
    expect(served).toBeLessThanOrEqual(250);
    expect(limited).toBeGreaterThan(100);
    expect(limited).toBeLessThanOrEqual(250);
    expect(acks.length).toBe(served + limited);

    // The server is fine: stats on the job port, and a new dashboard views and gets updates.
    expect(await c.call('stats-tube flood-probe\r\n')).toMatch(/^OK \d+\r\n/);
    const d = ownDashboard();
    await d.snapshot(0);
    expect(await d.socket.timeout(3000).emitWithAck('tube:view', 'flood-probe')).toEqual({ ok: true });
    const from = d.mark();
    expect(await c.call('put 0 0 60 1\r\nx\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    await d.waitFor('tube:jobs-changed', (ch) => ch.tube === 'flood-probe', from);
  });
});
