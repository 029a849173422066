/**
 * The audit log against real server processes: every change made through the API is recorded
 * with its user, action, target and result (refusals too), newest first and paged; reads and
 * changes made on the beanstalkd port are not. With -b it is DIR/audit.log and survives a
 * restart, a kill -9 included (a torn last line is skipped).
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { API } from '../shared/api.js';
import type { AuditEntryDto, AuditPageDto } from '../shared/dto.js';
import { adminFixture } from './support/admin-fixture.js';
import { api, type AdminServerProcess } from './support/admin-server.js';
import { userNamed, writeUsersFile } from './support/admin-users.js';
import { tcpPut } from './support/raw-client.js';

const fixture = adminFixture();
const otto = userNamed('otto');
const vera = userNamed('vera');
const ada = userNamed('ada');

async function auditPage(s: AdminServerProcess, query = ''): Promise<AuditPageDto> {
  const res = await api(s.url, `${API.audit}${query}`, { token: vera.token });
  expect(res.status, res.text).toBe(200);
  return res.json as AuditPageDto;
}

/** The whole log, newest first: the entries are written after the answer, so wait for `count`. */
async function auditEntries(s: AdminServerProcess, count: number): Promise<AuditEntryDto[]> {
  await expect.poll(async () => (await auditPage(s, '?limit=500')).entries.length, { timeout: 5000 }).toBeGreaterThanOrEqual(count);
  return (await auditPage(s, '?limit=500')).entries;
}

async function putJob(s: AdminServerProcess, tube: string, body: string): Promise<number> {
  const res = await api(s.url, API.tubeJobs(tube), { json: { body }, token: otto.token });
  expect(res.status).toBe(201);
  return (res.json as { id: number }).id;
}

describe('the audit log', () => {
  it('records who changed what, with the result; refusals too; reads and the job port are not recorded', async () => {
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const s = await fixture.start(['--admin-users', file]);
    const a = await putJob(s, 'mail', 'hello a');
    const b = await putJob(s, 'mail', 'hello b');
    await putJob(s, 'mail', 'other');
    // Not audited: reads, and the workload on the protocol port.
    await api(s.url, API.job(a), { token: otto.token });
    await tcpPut(await fixture.tcp(s), 'from the job port');
    expect((await api(s.url, API.job(b), { method: 'DELETE', token: vera.token })).status).toBe(403);
    expect((await api(s.url, API.job(b), { method: 'DELETE', token: otto.token })).status).toBe(204);
    expect((await api(s.url, API.job(b), { method: 'DELETE', token: otto.token })).status).toBe(404);
    const bulk = await api(s.url, API.bulk, { json: { action: 'move', to: 'archive', search: { q: 'hello', tube: 'mail' } }, token: otto.token });
    expect(bulk.json).toMatchObject({ count: 1 });
    expect((await api(s.url, API.bulk, { json: { action: 'kick', ids: [a, 99] }, token: otto.token })).status).toBe(200);
    expect((await api(s.url, API.tubePause('mail'), { json: { seconds: 5 }, token: otto.token })).status).toBe(200);
    expect((await api(s.url, API.tubeSettings('mail'), { method: 'PUT', json: { deadLetterAfter: 2 }, token: ada.token })).status).toBe(200);

    const entries = await auditEntries(s, 10);
    expect(entries).toHaveLength(10);
    const simple = entries.map((e) => ({ user: e.user, action: e.action, target: e.target, result: e.result }));
    expect(simple).toEqual([
      { user: 'ada', action: 'tube.settings', target: { tube: 'mail', detail: 'deadLetterAfter=2' }, result: { status: 200 } },
      { user: 'otto', action: 'tube.pause', target: { tube: 'mail', detail: 'seconds=5' }, result: { status: 200 } },
      { user: 'otto', action: 'bulk', target: { jobIds: [a, 99], jobCount: 2, detail: 'action=kick' }, result: { status: 200, count: 0 } },
      {
        user: 'otto',
        action: 'bulk',
        target: { search: { q: 'hello', tube: 'mail' }, detail: 'action=move to=archive' },
        result: { status: 200, count: 1 },
      },
      { user: 'otto', action: 'job.delete', target: { jobIds: [b], jobCount: 1 }, result: { status: 404, error: 'NOT_FOUND' } },
      { user: 'otto', action: 'job.delete', target: { jobIds: [b], jobCount: 1 }, result: { status: 204 } },
      { user: 'vera', action: 'job.delete', target: { jobIds: [b], jobCount: 1 }, result: { status: 403, error: 'FORBIDDEN' } },
      { user: 'otto', action: 'job.put', target: { tube: 'mail' }, result: { status: 201 } },
      { user: 'otto', action: 'job.put', target: { tube: 'mail' }, result: { status: 201 } },
      { user: 'otto', action: 'job.put', target: { tube: 'mail' }, result: { status: 201 } },
    ]);
    expect(entries[0]!.role).toBe('admin');
    expect(entries[6]!.role).toBe('viewer');
    // Newest first, numbered in order, with times.
    expect(entries.map((e) => e.seq)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    for (const e of entries) expect(Math.abs(e.at - Date.now())).toBeLessThan(60_000);
    // Paged: `next` is where the following page starts.
    const first = await auditPage(s, '?limit=4');
    expect(first.entries.map((e) => e.seq)).toEqual([10, 9, 8, 7]);
    const second = await auditPage(s, `?limit=4&before=${first.next}`);
    expect(second.entries.map((e) => e.seq)).toEqual([6, 5, 4, 3]);
    const third = await auditPage(s, `?limit=4&before=${second.next}`);
    expect(third).toEqual({ entries: entries.slice(8), next: null });
    // Bad paging is a 400.
    for (const q of ['?limit=0', '?limit=501', '?before=abc', '?before=-1']) {
      expect((await api(s.url, `${API.audit}${q}`, { token: vera.token })).status, q).toBe(400);
    }
    // The log itself is for signed-in users only.
    expect((await api(s.url, API.audit)).status).toBe(401);
  });

  it('with -b: survives a restart and a kill -9, skipping a torn last line', async () => {
    const dir = fixture.tmpDir();
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const args = ['-b', dir, '--admin-users', file];
    const first = await fixture.start(args);
    const id = await putJob(first, 'keep', 'x');
    expect((await api(first.url, API.jobKick(id), { method: 'POST', token: otto.token })).status).toBe(404); // ready: nothing to kick
    await auditEntries(first, 2);
    await first.stop();
    expect(existsSync(path.join(dir, 'audit.log'))).toBe(true);

    const second = await fixture.start(args);
    const before = await auditEntries(second, 2);
    expect(before.map((e) => [e.seq, e.action])).toEqual([
      [2, 'job.kick'],
      [1, 'job.put'],
    ]);
    expect((await api(second.url, API.job(id), { method: 'DELETE', token: otto.token })).status).toBe(204);
    await auditEntries(second, 3);
    // Written a moment after the answer (never holding it up): what is in the file survives kill -9.
    const logFile = path.join(dir, 'audit.log');
    await expect.poll(() => readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '').length, { timeout: 5000 }).toBe(3);
    // kill -9, with half a line written after the last whole one.
    second.signal('SIGKILL');
    await new Promise((r) => second.process.once('exit', r));
    appendFileSync(path.join(dir, 'audit.log'), '{"seq":4,"at":1');

    const third = await fixture.start(args);
    const after = await auditEntries(third, 3);
    expect(after.map((e) => [e.seq, e.action, e.user])).toEqual([
      [3, 'job.delete', 'otto'],
      [2, 'job.kick', 'otto'],
      [1, 'job.put', 'otto'],
    ]);
    await putJob(third, 'keep', 'y');
    const latest = await auditEntries(third, 4);
    expect(latest[0]).toMatchObject({ seq: 4, action: 'job.put' });
    // The torn half-line is left behind its own line end: every whole line is an entry.
    const lines = readFileSync(path.join(dir, 'audit.log'), 'utf8').split('\n').filter((l) => l !== '');
    expect(lines.filter((l) => l.startsWith('{"seq":4,"at":1') && !l.endsWith('}'))).toHaveLength(1);
  });
});
