/**
 * A cluster node's start against a database that is not there yet, or that says no: it keeps
 * trying while the database cannot be reached (and serves once it can), gives up after
 * --cluster-connect-timeout, and stops at once with one line that says what to fix when the
 * login, the database or the role's rights are wrong. Exit status 111 in each failing case.
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../bench/throwaway-postgres.js';
import { RawClient } from './support/raw-client.js';
import { BEANPOLE_BIN, freePort, startServer, type RunningServer } from './support/servers.js';

let db: ThrowawayPostgres | null = null;
const nodes: RunningServer[] = [];
beforeAll(async () => {
  if (postgresBinDir() !== null) db = await startThrowawayPostgres({ settings: { fsync: 'off' } });
});
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await db?.stop();
});

/** Runs a node until it exits (at most `limitMs`); its status, stderr and how long it ran. */
async function runToExit(args: string[], limitMs = 30_000): Promise<{ code: number | null; stderr: string; ms: number }> {
  const port = await freePort();
  const started = Date.now();
  const child = spawn(process.execPath, [BEANPOLE_BIN, '-l', '127.0.0.1', '-p', String(port), '--no-admin', '--no-gearman', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stderr, ms: Date.now() - started };
}

const fatalLines = (stderr: string): string[] =>
  stderr
    .split('\n')
    .filter((l) => l.includes('"level":60'))
    .map((l) => (JSON.parse(l) as { msg: string }).msg);

describe.skipIf(postgresBinDir() === null)('a cluster node starting', () => {
  it('stops at once with one clear line for a database that does not exist, a role that does not, and a role without rights', async () => {
    const base = new URL(db!.url);
    const noDatabase = await runToExit(['--cluster', `postgres://beanpole@127.0.0.1:${base.port}/no_such_database`]);
    expect(noDatabase.code, noDatabase.stderr).toBe(111);
    expect(fatalLines(noDatabase.stderr)).toEqual([expect.stringMatching(/^cluster: cannot use the database: the database does not exist .*no_such_database/)]);
    expect(noDatabase.stderr).not.toMatch(/trying again/);

    const noRole = await runToExit(['--cluster', `postgres://nobody_here@127.0.0.1:${base.port}/postgres`]);
    expect(noRole.code, noRole.stderr).toBe(111);
    expect(fatalLines(noRole.stderr)).toEqual([expect.stringMatching(/^cluster: cannot use the database: the database refused the login .*nobody_here/)]);

    // A role that may log in but not create the node's tables (PostgreSQL 15: no CREATE on public for others).
    const url = await db!.createDatabase('weak_rights');
    const admin = new pg.Client({ connectionString: db!.url });
    await admin.connect();
    try {
      await admin.query('DROP ROLE IF EXISTS weak_worker');
      await admin.query('CREATE ROLE weak_worker LOGIN');
    } finally {
      await admin.end();
    }
    const weak = await runToExit(['--cluster', url.replace('beanpole@', 'weak_worker@')]);
    expect(weak.code, weak.stderr).toBe(111);
    expect(fatalLines(weak.stderr)).toEqual([expect.stringMatching(/^cluster: cannot use the database: the role lacks a right it needs/)]);
  });

  it('keeps trying a database it cannot reach, each attempt logged, and gives up after --cluster-connect-timeout', async () => {
    const nowhere = await freePort();
    const run = await runToExit(['--cluster', `postgres://beanpole@127.0.0.1:${nowhere}/jobs`, '--cluster-connect-timeout', '2']);
    expect(run.code, run.stderr).toBe(111);
    const attempts = run.stderr.split('\n').filter((l) => l.includes('trying again'));
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(fatalLines(run.stderr)).toEqual([expect.stringMatching(/^cluster: gave up reaching the database after \d+ attempts \(--cluster-connect-timeout\)/)]);
    expect(run.ms).toBeGreaterThanOrEqual(2000);
  });

  it('serves as soon as a database that was down at its start is there', async () => {
    const url = await db!.createDatabase('late');
    // The database is down for 4 s; the node starts in that window and waits for it.
    const restarted = db!.restart(4000);
    await new Promise((r) => setTimeout(r, 1000));
    const node = await startServer('beanpole', ['--cluster', url]);
    nodes.push(node);
    await restarted;
    expect(node.stderr()).toMatch(/cannot reach the database .*trying again/);
    const c = await RawClient.connect(node.port);
    try {
      expect(await c.call('put 0 0 60 2\r\nhi\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    } finally {
      c.destroy();
    }
  });
});
