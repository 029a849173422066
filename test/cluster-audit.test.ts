/**
 * The audit log in cluster mode: one table in PostgreSQL shared by the nodes, so a change made
 * through one node's dashboard is in every node's GET /api/audit, with the node that served it;
 * the table is bounded (each insert trims it to the newest rows).
 */
import path from 'node:path';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { CLUSTER_AUDIT_ROWS } from '../server/cluster/cluster-audit.js';
import { API } from '../shared/api.js';
import type { AdminConfigDto, AuditPageDto } from '../shared/dto.js';
import { adminFixture } from './support/admin-fixture.js';
import { api, type AdminServerProcess } from './support/admin-server.js';
import { userNamed, writeUsersFile } from './support/admin-users.js';
import { freshDatabase } from './support/cluster-db.js';

const pgUrl = inject('pgUrl');
const fixture = adminFixture();
const otto = userNamed('otto');
const vera = userNamed('vera');

const page = async (s: AdminServerProcess, query = ''): Promise<AuditPageDto> => (await api(s.url, `${API.audit}${query}`, { token: vera.token })).json as AuditPageDto;
const nodeOf = async (s: AdminServerProcess): Promise<number> => ((await api(s.url, API.config)).json as AdminConfigDto).clusterNode!;

describe.skipIf(pgUrl === null)('the audit log in a cluster', () => {
  it('is shared by the nodes: a change through one node is in the other node\'s log, with the node that served it', async () => {
    const url = await freshDatabase(pgUrl!, 'audit');
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const [a, b] = await Promise.all([fixture.start(['--cluster', url, '--admin-users', file]), fixture.start(['--cluster', url, '--admin-users', file])]);
    const put = await api(a.url, API.tubeJobs('shared'), { json: { body: 'x' }, token: otto.token });
    expect(put.status).toBe(201);
    const id = (put.json as { id: number }).id;
    expect((await api(b.url, API.job(id), { method: 'DELETE', token: otto.token })).status).toBe(204);
    expect((await api(b.url, API.job(id), { method: 'DELETE', token: vera.token })).status).toBe(403);

    await expect.poll(async () => (await page(a)).entries.length, { timeout: 5000 }).toBe(3);
    const [nodeA, nodeB] = [await nodeOf(a), await nodeOf(b)];
    expect(nodeA).not.toBe(nodeB);
    for (const s of [a, b]) {
      const { entries, next } = await page(s);
      expect(next).toBeNull();
      expect(entries.map((e) => [e.user, e.action, e.node, e.result.status, e.target])).toEqual([
        ['vera', 'job.delete', nodeB, 403, { jobIds: [id], jobCount: 1 }],
        ['otto', 'job.delete', nodeB, 204, { jobIds: [id], jobCount: 1 }],
        ['otto', 'job.put', nodeA, 201, { tube: 'shared' }],
      ]);
    }
    const first = await page(b, '?limit=2');
    expect(first.entries).toHaveLength(2);
    const rest = await page(b, `?limit=2&before=${first.next}`);
    expect(rest.entries.map((e) => e.action)).toEqual(['job.put']);
    expect(rest.next).toBeNull();
  });

  it('keeps the newest rows only', async () => {
    const url = await freshDatabase(pgUrl!, 'audit_bound');
    const file = writeUsersFile(path.join(fixture.tmpDir(), 'users.json'));
    const s = await fixture.start(['--cluster', url, '--admin-users', file]);
    // Fill the table to its bound straight in the database, then one change through the API.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO beanpole_audit (at, node, username, role, action, target, result)
         SELECT 1, 0, 'old', 'viewer', 'old.change', '{}', '{"status":200}' FROM generate_series(1, $1::int)`,
        [CLUSTER_AUDIT_ROWS],
      );
      expect((await api(s.url, API.tubeJobs('t'), { json: { body: 'x' }, token: otto.token })).status).toBe(201);
      await expect.poll(async () => (await page(s, '?limit=1')).entries[0]?.action, { timeout: 5000 }).toBe('job.put');
      const { rows } = await db.query<{ n: string; oldest: string }>('SELECT count(*) AS n, min(seq) AS oldest FROM beanpole_audit');
      expect(Number(rows[0]!.n)).toBe(CLUSTER_AUDIT_ROWS);
      expect(Number(rows[0]!.oldest)).toBe(2);
    } finally {
      await db.end();
    }
  });
});
