/**
 * `-u USER` with a binlog (`-b DIR`), when the tests run as root: the directory is opened as
 * USER before serving, so a directory USER cannot write stops the start (exit 10, like
 * beanstalkd) instead of turning every put into OUT_OF_MEMORY once the first segment fills;
 * with a directory USER owns, segments roll, files belong to USER and SIGTERM exits cleanly.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { BEANPOLE_BIN, freePort, startProcessServer, type ServerProcess } from './support/servers.js';

const USER = 'nobody';
/** beanstalkd's exit status when the binlog directory cannot be used. */
const BINLOG_EXIT = 10;

function userIds(name: string): { uid: number; gid: number } | null {
  const uid = spawnSync('id', ['-u', name]);
  const gid = spawnSync('id', ['-g', name]);
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { uid: Number(uid.stdout.toString()), gid: Number(gid.stdout.toString()) };
}

const ids = userIds(USER);
const runnable = process.getuid?.() === 0 && ids !== null;

const dirs: string[] = [];
const servers: ServerProcess[] = [];
const clients: RawClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A directory USER can reach (mkdtemp makes it 0700 root): owned by root, or by USER. */
function binlogDir(ownedByUser: boolean): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-user-'));
  dirs.push(dir);
  chmodSync(dir, 0o755);
  if (ownedByUser) chownSync(dir, ids!.uid, ids!.gid);
  return dir;
}

/** Runs the server to its exit with `args`; returns the status and what it wrote to stderr. */
async function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [BEANPOLE_BIN, '-l', '127.0.0.1', '-p', String(port), '--no-admin', '--no-gearman', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await once(child, 'exit');
  clearTimeout(timer);
  return { code: child.exitCode, stderr };
}

describe('-u with a user that does not exist', () => {
  it("exits 33 with one line, as beanstalkd's su() does, before listening", async () => {
    for (const name of ['no-such-user-beanpole', '-g']) {
      const run = await runToExit(['-u', name]);
      expect(run.code, run.stderr).toBe(33);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toContain('no such user');
    }
  });
});

describe.skipIf(!runnable)(`-u ${USER} with -b (run as root)`, () => {
  it('refuses to start, in one line with exit 10, when USER cannot write the directory', async () => {
    const dir = binlogDir(false);
    const { code, stderr } = await runToExit(['-u', USER, '-b', dir]);
    expect(code, stderr).toBe(BINLOG_EXIT);
    expect(stderr).toMatch(/EACCES|permission denied/i);
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    // Nothing was left behind by root: no lock, no segment.
    expect(readdirSync(dir)).toEqual([]);
  });

  it('writes as USER: segments roll past the first one, files belong to USER, SIGTERM exits 0, and a restart has every job', async () => {
    const dir = binlogDir(true);
    // 4 KiB segments: a few hundred puts roll many segments, each created after the drop.
    const args = ['-u', USER, '-b', dir, '-s', '4096'];
    let server = await startProcessServer('beanpole', { tcp: true }, args);
    servers.push(server);
    let c = await RawClient.connect((server.address as { port: number }).port);
    clients.push(c);
    const body = 'x'.repeat(200);
    for (let i = 1; i <= 300; i++) expect(await c.call(`put 0 0 60 ${body.length}\r\n${body}\r\n`)).toBe(`INSERTED ${i}\r\n`);
    const segments = readdirSync(dir).filter((n) => n.endsWith('.bp'));
    expect(segments.length).toBeGreaterThan(5);
    for (const name of readdirSync(dir)) expect(statSync(path.join(dir, name)).uid, name).toBe(ids!.uid);

    c.destroy();
    server.signal('SIGTERM');
    await once(server.process, 'exit');
    expect(server.process.exitCode, server.stderr()).toBe(0);
    expect(server.stderr()).not.toMatch(/EACCES|\n\s+at /);
    expect(server.stderr()).not.toMatch(/"level":50/); // no error logged

    server = await startProcessServer('beanpole', { tcp: true }, args);
    servers.push(server);
    c = await RawClient.connect((server.address as { port: number }).port);
    clients.push(c);
    const stats = await c.call('stats\r\n');
    expect(stats).toMatch(/\ncurrent-jobs-ready: 300\n/);
  });
});
