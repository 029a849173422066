/**
 * The Gearman side of the admin API, /metrics and socket.io against the real server: functions
 * and workers, a function's jobs by state, one job by handle, cancelling (queued only; never in
 * read-only mode), Gearman counters in /metrics, and live `gearman:updated` pushes.
 */
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API, type BulkResponse } from '../shared/api.js';
import type { GearmanJobDto, GearmanJobPageDto, GearmanSearchPageDto, GearmanSnapshotDto } from '../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/events.js';
import { PACKET } from '../server/protocol/gearman/packets.js';
import type { JobHistoryDto } from '../shared/history.js';
import { api, startAdminServer, type AdminServerProcess } from './support/admin-server.js';
import { expectOk } from './support/expectations.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { gearmanPortFromLog } from './support/gearman-server.js';

let server: AdminServerProcess;
let readOnly: AdminServerProcess;
let port: number;
let readOnlyPort: number;
const clients: GearmanTestClient[] = [];

const gearmanPortOf = (s: AdminServerProcess): Promise<number> => gearmanPortFromLog(() => s.stderr());

beforeAll(async () => {
  const args = ['--gearman-listen', '127.0.0.1', '--gearman-port', '0'];
  server = await startAdminServer(args);
  readOnly = await startAdminServer([...args, '--admin-read-only']);
  port = await gearmanPortOf(server);
  readOnlyPort = await gearmanPortOf(readOnly);
});

afterAll(async () => {
  for (const c of clients) c.destroy();
  await server.stop();
  await readOnly.stop();
});

async function connect(p = port): Promise<GearmanTestClient> {
  const c = await GearmanTestClient.connect(p);
  clients.push(c);
  return c;
}

async function submit(c: GearmanTestClient, fn: string, unique: string, data: string): Promise<string> {
  c.request(PACKET.SUBMIT_JOB_BG, fn, unique, data);
  const [type, handle] = await c.args(1);
  expect(type).toBe(PACKET.JOB_CREATED);
  return handle!;
}

function ok<T>(res: { status: number; json: unknown; text: string }, status = 200): T {
  expect(res.status, res.text).toBe(status);
  return res.json as T;
}

describe('Gearman in the admin API', () => {
  it('lists functions and workers, pages a function’s jobs by state, and shows a job by handle', async () => {
    const c = await connect();
    const h1 = await submit(c, 'api-fn', 'first', '{"a":1}');
    const h2 = await submit(c, 'api-fn', '', Buffer.from([0xff, 0x00]).toString('latin1'));
    const w = await connect();
    w.request(PACKET.SET_CLIENT_ID, 'api-worker');
    w.request(PACKET.CAN_DO, 'api-fn');
    w.request(PACKET.GRAB_JOB);
    await w.packet();
    w.request(PACKET.WORK_STATUS, h1, '1', '4');
    w.request(PACKET.ECHO_REQ, 'sync');
    await w.packet();

    const snapshot = ok<GearmanSnapshotDto>(await api(server.url, API.gearman));
    expect(snapshot.functions).toContainEqual({ name: 'api-fn', queued: 1, running: 1, workers: 1 });
    expect(snapshot.workers.some((x) => x.clientId === 'api-worker' && x.functions.includes('api-fn'))).toBe(true);

    const queued = ok<GearmanJobPageDto>(await api(server.url, `${API.gearmanJobs}?function=api-fn&state=queued`));
    expect(queued.jobs.map((j) => j.handle)).toEqual([h2]);
    expect(queued.jobs[0]!.body).toMatchObject({ encoding: 'base64', base64: '/wA=' });
    const running = ok<GearmanJobPageDto>(await api(server.url, `${API.gearmanJobs}?function=api-fn&state=running`));
    expect(running.jobs).toMatchObject([{ handle: h1, unique: 'first', state: 'running', grabs: 1, status: { numerator: '1', denominator: '4' } }]);
    expect(running.jobs[0]!.body).toMatchObject({ encoding: 'utf8', text: '{"a":1}' });

    const one = ok<GearmanJobDto>(await api(server.url, API.gearmanJob(h1)));
    expect(one).toMatchObject({ handle: h1, function: 'api-fn', priority: 'normal' });
    expect((await api(server.url, API.gearmanJob('H:nowhere:1'))).status).toBe(404);
    expect((await api(server.url, `${API.gearmanJobs}?function=api-fn&state=bogus`)).status).toBe(400);
    expect((await api(server.url, `${API.gearmanJobs}?function=no-such-fn`)).status).toBe(404);
  });

  it('gives every queued, running and searched job an age within the time it has existed', async () => {
    const submittedAfter = Date.now();
    const c = await connect();
    const queuedHandle = await submit(c, 'age-fn', 'age-1', 'age payload');
    const runningHandle = await submit(c, 'age-fn', 'age-2', 'age payload');
    const w = await connect();
    w.request(PACKET.CAN_DO, 'age-fn');
    w.request(PACKET.GRAB_JOB);
    await w.packet();
    const listed = [
      ...ok<GearmanJobPageDto>(await api(server.url, `${API.gearmanJobs}?function=age-fn&state=queued`)).jobs,
      ...ok<GearmanJobPageDto>(await api(server.url, `${API.gearmanJobs}?function=age-fn&state=running`)).jobs,
      ok<GearmanJobDto>(await api(server.url, `/api/gearman/jobs/${encodeURIComponent(queuedHandle)}`)),
      ...ok<GearmanSearchPageDto>(await api(server.url, `${API.gearmanSearch}?q=age%20payload&function=age-fn`)).jobs,
    ];
    const existedSeconds = Math.ceil((Date.now() - submittedAfter) / 1000);
    expect(listed.map((j) => j.handle).sort()).toEqual([queuedHandle, queuedHandle, queuedHandle, runningHandle, runningHandle].sort());
    for (const job of listed) {
      expect(job.ageSeconds).toBeGreaterThanOrEqual(0);
      expect(job.ageSeconds).toBeLessThanOrEqual(existedSeconds);
    }
    w.destroy();
  });

  it('cancels a queued job, refuses a running one with 409, and refuses any change in read-only mode', async () => {
    const c = await connect();
    const queued = await submit(c, 'cancel-fn', '', 'q');
    const held = await submit(c, 'cancel-fn', '', 'r');
    const w = await connect();
    w.request(PACKET.CAN_DO, 'cancel-fn');
    w.request(PACKET.GRAB_JOB);
    const [, grabbed] = await w.args(3);
    const running = grabbed === held ? held : queued;
    const waiting = grabbed === held ? queued : held;
    expect((await api(server.url, API.gearmanJob(running), { method: 'DELETE' })).status).toBe(409);
    expect((await api(server.url, API.gearmanJob(waiting), { method: 'DELETE' })).status).toBe(204);
    expect((await api(server.url, API.gearmanJob(waiting))).status).toBe(404);

    const rc = await connect(readOnlyPort);
    const h = await submit(rc, 'ro-fn', '', 'x');
    expect((await api(readOnly.url, API.gearmanJob(h), { method: 'DELETE' })).status).toBe(403);
    expect((await api(readOnly.url, API.gearmanJob(h))).status).toBe(200);
  });

  it('shows a Gearman job’s history: submitted, grabbed, requeued when its worker left, completed', async () => {
    const c = await connect();
    const handle = await submit(c, 'history-fn', 'h1', 'data');
    const first = await connect();
    first.request(PACKET.CAN_DO, 'history-fn');
    first.request(PACKET.GRAB_JOB);
    expect((await first.args(3))[1]).toBe(handle);
    first.destroy();
    const second = await connect();
    second.request(PACKET.CAN_DO, 'history-fn');
    // The first worker's leave reaches the server in its own time: until then, NO_JOB.
    let grabbed: string | undefined;
    for (let i = 0; i < 100 && grabbed === undefined; i++) {
      second.request(PACKET.GRAB_JOB);
      const p = await second.packet();
      if (p.type === PACKET.JOB_ASSIGN) grabbed = p.data.toString('latin1', 0, p.data.indexOf(0));
      else await new Promise((r) => setTimeout(r, 10));
    }
    expect(grabbed).toBe(handle);
    second.request(PACKET.WORK_COMPLETE, handle, 'done');
    second.request(PACKET.ECHO_REQ, 'sync');
    expect((await second.args(1))[0]).toBe(PACKET.ECHO_RES);
    const history = expectOk<JobHistoryDto>(await api(server.url, API.gearmanJobHistory(handle)));
    expect(history.events.map((e) => e.kind)).toEqual(['put', 'reserve', 'disconnect', 'reserve', 'delete']);
    expect(history.events[0]!.peer).toBe(`127.0.0.1:${c.socket.localPort}`);
    expect(history.events[3]!.peer).toBe(`127.0.0.1:${second.socket.localPort}`);
    expect((await api(server.url, API.gearmanJobHistory('H:other-host:1'))).status).toBe(404);
  });

  it('says in a Gearman job’s history that --gearman-job-retries dropped it, and why', async () => {
    const retrying = await startAdminServer(['--gearman-listen', '127.0.0.1', '--gearman-port', '0', '--gearman-job-retries', '1']);
    try {
      const p = await gearmanPortOf(retrying);
      const c = await connect(p);
      c.request(PACKET.SUBMIT_JOB, 'retried-fn', '', 'data');
      const [, handle] = await c.args(1);
      const w = await connect(p);
      w.request(PACKET.CAN_DO, 'retried-fn');
      w.request(PACKET.GRAB_JOB);
      expect((await w.args(3))[1]).toBe(handle);
      w.destroy();
      // The waiting client is told the job failed once the worker's leave is handled.
      expect(await c.args(1)).toEqual([PACKET.WORK_FAIL, handle]);
      const history = expectOk<JobHistoryDto>(await api(retrying.url, API.gearmanJobHistory(handle!)));
      expect(history.events.map((e) => e.kind)).toEqual(['put', 'reserve', 'disconnect', 'retries-exhausted']);
      expect(history.events[3]!.note).toBe('1 disconnect');
    } finally {
      await retrying.stop();
    }
  });

  it('searches queued jobs’ data (not their unique ids) and cancels the matches in bulk', async () => {
    const c = await connect();
    const bad = [await submit(c, 'search-fn', 'refund-1', '{"error":"invalid currency"}'), await submit(c, 'search-fn', '', '{"error":"Invalid Currency"}')];
    const good = await submit(c, 'search-fn', 'invalid currency', '{"ok":true}');
    await submit(c, 'other-fn', '', '{"error":"invalid currency"}');
    const q = new URLSearchParams({ q: 'invalid currency', function: 'search-fn', state: 'queued' });
    const page = expectOk<GearmanSearchPageDto>(await api(server.url, `${API.gearmanSearch}?${q.toString()}`));
    expect(page.jobs.map((j) => j.handle).sort()).toEqual([...bad].sort());
    expect(page).toMatchObject({ next: null, matched: 2, complete: true });
    expect((await api(server.url, `${API.gearmanSearch}?q=(&regex=true`)).status).toBe(400);

    const r = expectOk<BulkResponse>(
      await api(server.url, API.gearmanBulk, { json: { action: 'delete', search: { q: 'invalid currency', function: 'search-fn' } } }),
    );
    expect(r).toEqual({ count: 2, skipped: 0, complete: true });
    for (const h of bad) expect((await api(server.url, API.gearmanJob(h))).status).toBe(404);
    expect((await api(server.url, API.gearmanJob(good))).status).toBe(200);
    expect(expectOk<BulkResponse>(await api(server.url, API.gearmanBulk, { json: { action: 'delete', handles: [good, 'H:nope:1'] } }))).toEqual({
      count: 1,
      skipped: 1,
      complete: true,
    });
    expect((await api(readOnly.url, API.gearmanBulk, { json: { action: 'delete', handles: [good] } })).status).toBe(403);
  });

  it('counts Gearman jobs and workers in /metrics', async () => {
    const c = await connect();
    await submit(c, 'metric-fn', '', 'm');
    const res = await api(server.url, '/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toContain('beanpole_gearman_jobs{function="metric-fn",state="queued"} 1\n');
    expect(res.text).toContain('# TYPE beanpole_gearman_jobs_created_total counter');
    expect(res.text).toMatch(/beanpole_gearman_connections \d+\n/);
  });

  it('pushes gearman:updated to dashboards when functions or workers change', async () => {
    const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(server.url, { transports: ['websocket'], reconnection: false });
    try {
      const first = await new Promise<GearmanSnapshotDto>((resolve) => socket.once('gearman:updated', resolve));
      expect(Array.isArray(first.functions)).toBe(true);
      const next = new Promise<GearmanSnapshotDto>((resolve) => {
        const check = (s: GearmanSnapshotDto): void => {
          if (s.functions.some((f) => f.name === 'live-fn' && f.queued === 1)) resolve(s);
          else socket.once('gearman:updated', check);
        };
        socket.once('gearman:updated', check);
      });
      await submit(await connect(), 'live-fn', '', 'l');
      expect((await next).functions).toContainEqual({ name: 'live-fn', queued: 1, running: 0, workers: 0 });
    } finally {
      socket.disconnect();
    }
  });
});
