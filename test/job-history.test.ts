/**
 * Job history on the real server: every transition a job goes through over TCP and in the
 * dashboard is listed by GET /api/jobs/:id/history, oldest first, with the connection that made
 * it; a deleted job keeps its history; --history-events 0 keeps none. And the connections list:
 * who holds what, for how long, and closing a connection.
 */
import { describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { ConnectionDto, JobDto } from '../shared/dto.js';
import type { JobHistoryDto } from '../shared/history.js';
import { api } from './support/admin-server.js';
import { expectLine, expectOk } from './support/expectations.js';
import { adminFixture } from './support/admin-fixture.js';
import { type RawClient, tcpPut, tcpReserve } from './support/raw-client.js';

const { start, tcp } = adminFixture();

describe('GET /api/jobs/:id/history', () => {
  it('lists what happened to a job, by whom, oldest first, and keeps it after the delete', async () => {
    const s = await start(['--dead-letter-after', '2']);
    const producer = await tcp(s);
    const worker = await tcp(s);
    const before = Date.now();
    const id = await tcpPut(producer, 'history');
    expect((await tcpReserve(worker)).id).toBe(id);
    await expectLine(worker, `release ${id} 0 0`, 'RELEASED');
    expect((await tcpReserve(worker)).id).toBe(id);
    await expectLine(worker, `release ${id} 0 0`, 'BURIED');
    expectOk<JobDto>(await api(s.url, API.job(id), { method: 'PATCH', json: { priority: 3, tube: 'fixed' } }));
    await expectLine(producer, `kick-job ${id}`, 'KICKED');
    await expectLine(worker, 'watch fixed', 'WATCHING 2');
    expect((await tcpReserve(worker)).id).toBe(id);
    await expectLine(worker, `bury ${id} 0`, 'BURIED');
    expect((await api(s.url, API.job(id), { method: 'DELETE' })).status).toBe(204);

    const history = expectOk<JobHistoryDto>(await api(s.url, API.jobHistory(id)));
    const p = `127.0.0.1:${producer.socket.localPort}`;
    const w = `127.0.0.1:${worker.socket.localPort}`;
    expect(history.events.map((e) => [e.kind, e.peer, e.note])).toEqual([
      ['put', p, ''],
      ['reserve', w, ''],
      ['release', w, ''],
      ['reserve', w, ''],
      ['release', w, ''],
      ['dead-letter', '', 'release'],
      ['edit', '', 'priority'],
      ['move', '', 'default'],
      ['kick', '', ''],
      ['reserve', w, ''],
      ['bury', w, ''],
      ['delete', '', ''],
    ]);
    const producerId = history.events[0]!.connection;
    const workerId = history.events[1]!.connection;
    expect(producerId).toBeGreaterThan(0);
    expect(workerId).toBeGreaterThan(0);
    expect(workerId).not.toBe(producerId);
    for (const e of history.events) expect(e.at).toBeGreaterThanOrEqual(before - 5);
    expect(history.events.map((e) => e.at)).toEqual([...history.events.map((e) => e.at)].sort((a, b) => a - b));
    expect(history).toMatchObject({ id, capacity: 100_000 });
    expect(history.recorded).toBeGreaterThanOrEqual(12);
    // The dashboard's edit, move and delete say so; the client's kick-job and everything else do not.
    const dashboard = { via: 'dashboard', user: null };
    expect(history.events.map((e) => [e.kind, e.actor])).toEqual(
      history.events.map((e) => [e.kind, e.kind === 'edit' || e.kind === 'move' || e.kind === 'delete' ? dashboard : null]),
    );

    // A job that never existed has no history; a bad id is a 400.
    expect(expectOk<JobHistoryDto>(await api(s.url, API.jobHistory(999_999))).events).toEqual([]);
    expect((await api(s.url, '/api/jobs/abc/history')).status).toBe(400);
  });

  it('says the dashboard kicked, moved or deleted a job, one job at a time, by tube and in a move; a client’s kick does not', async () => {
    const s = await start([]);
    const worker = await tcp(s);
    await expectLine(worker, 'use actors', 'USING actors');
    await expectLine(worker, 'watch actors', 'WATCHING 2');
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push(await tcpPut(worker, `actor ${i}`));
    for (let i = 0; i < 4; i++) await expectLine(worker, `bury ${(await tcpReserve(worker)).id} 0`, 'BURIED');
    const [byJob, moved, byClient, byTube] = ids as [number, number, number, number];
    await expectLine(worker, `kick-job ${byClient}`, 'KICKED');
    expect((await api(s.url, API.jobKick(byJob), { method: 'POST' })).status).toBe(200);
    expect((await api(s.url, API.tubeMove('actors'), { json: { state: 'buried', to: 'elsewhere', limit: 1 } })).status).toBe(200);
    expectOk(await api(s.url, API.tubeKick('actors'), { json: { bound: 10 } }));
    const lastOf = async (id: number) => expectOk<JobHistoryDto>(await api(s.url, API.jobHistory(id))).events.at(-1)!;
    const dashboard = { via: 'dashboard', user: null };
    expect(await lastOf(byJob)).toMatchObject({ kind: 'kick', connection: 0, actor: dashboard });
    expect(await lastOf(byTube)).toMatchObject({ kind: 'kick', actor: dashboard });
    expect(await lastOf(moved)).toMatchObject({ kind: 'move', actor: dashboard });
    expect(await lastOf(byClient)).toMatchObject({ kind: 'kick', actor: null });
  });

  it('keeps none with --history-events 0', async () => {
    const s = await start(['--history-events', '0']);
    const c = await tcp(s);
    const id = await tcpPut(c, 'no history');
    expect(expectOk<JobHistoryDto>(await api(s.url, API.jobHistory(id)))).toEqual({ id, events: [], capacity: 0, recorded: 0 });
  });
});

describe('connections', () => {
  it('shows each connection’s age, idle time, last command and held jobs with time left, and who holds a job; closes one', async () => {
    const s = await start();
    const worker = await tcp(s);
    const id = await tcpPut(worker, 'held', 0, 0, 120);
    expect((await tcpReserve(worker)).id).toBe(id);
    await worker.call('list-tubes\r\n');
    const list = expectOk<ConnectionDto[]>(await api(s.url, API.connections));
    const me = list.find((c) => c.address === `127.0.0.1:${worker.socket.localPort}`)!;
    expect(me).toMatchObject({ lastCommand: 'list-tubes', holding: [{ id, tube: 'default' }] });
    expect(me.holding[0]!.timeLeftSeconds).toBeGreaterThan(100);
    expect(me.idleSeconds).toBeLessThan(5);
    expect(me.ageSeconds).toBeLessThan(60);
    const job = expectOk<JobDto>(await api(s.url, API.job(id)));
    expect(job.reservedBy).toBe(me.id);

    expect((await api(s.url, `${API.connections}/${me.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await worker.waitClosed()).toBe('');
    // Its job is ready again, as on any disconnect.
    const after = expectOk<JobDto>(await api(s.url, API.job(id)));
    expect(after).toMatchObject({ state: 'ready', reservedBy: null });
    expect((await api(s.url, `${API.connections}/${me.id}`, { method: 'DELETE' })).status).toBe(404);
    const ro = await start(['--admin-read-only']);
    expect((await api(ro.url, `${API.connections}/1`, { method: 'DELETE' })).status).toBe(403);
  });
});

describe('GET /api/history and /api/tubes/:name/history', () => {
  it('answers the minute samples (none yet on a fresh server) and refuses a bad range', async () => {
    const s = await start();
    expect(expectOk<unknown[]>(await api(s.url, API.history))).toEqual([]);
    expect(expectOk<unknown[]>(await api(s.url, `${API.history}?minutes=60`))).toEqual([]);
    expect(expectOk<unknown[]>(await api(s.url, API.tubeHistory('default')))).toEqual([]);
    expect((await api(s.url, `${API.history}?minutes=0`)).status).toBe(400);
    expect((await api(s.url, `${API.history}?minutes=99999`)).status).toBe(400);
    expect((await api(s.url, API.tubeHistory('-bad'))).status).toBe(400);
  });
});
