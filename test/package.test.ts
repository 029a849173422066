/**
 * Shipping: `npm pack` makes a package whose `beanpole` command, installed into an empty prefix
 * from the tarball (with its dependencies from the registry), starts the job server with the
 * built dashboard, its assets compressed. Needs the build (`npm test` builds first) and the npm registry.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { dashboardUrl } from './support/admin-server.js';
import { RawClient } from './support/raw-client.js';
import { freePort } from './support/servers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-pack-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

describe('npm pack', () => {
  it('yields a package whose beanpole command serves jobs and the built dashboard', { timeout: 300_000 }, async () => {
    // The build is done (npm test builds first): pack what it made, without building again.
    run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], ROOT);
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    expect(tarball).toMatch(/^beanpole-\d+\.\d+\.\d+\.tgz$/);
    const listing = run('tar', ['-tzf', path.join(dir, tarball)], dir);
    expect(listing).toContain('package/dist/ui/index.html');
    expect(listing).toContain('package/dist/server/main.js');
    expect(listing).not.toContain('package/test/');

    const prefix = path.join(dir, 'prefix');
    run('npm', ['install', '--global', '--prefix', prefix, '--omit=dev', '--no-audit', '--no-fund', path.join(dir, tarball)], dir);
    const port = await freePort();
    const child = spawn(path.join(prefix, 'bin', 'beanpole'), ['-l', '127.0.0.1', '-p', String(port), '--admin-port', '0', '--no-gearman'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    try {
      let url: string | null = null;
      for (let i = 0; i < 200 && url === null && child.exitCode === null; i++) {
        await new Promise((r) => setTimeout(r, 50));
        url = dashboardUrl(stderr);
      }
      expect(url, stderr).not.toBeNull();
      // The command runs Node with the launcher's flags (chosen by its first lines, in sh), in
      // the process it started: the young generation capped, and a kill by PID reaches the server.
      const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
      expect(argv).toContain('--max-semi-space-size=2');
      const page = await fetch(url!);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('<div id="app"');
      // Static assets go out compressed.
      const script = /src="([^"]+\.js)"/.exec(html)![1]!;
      const asset = await fetch(new URL(script, url!), { headers: { 'accept-encoding': 'gzip' } });
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-encoding')).toBe('gzip');
      const c = await RawClient.connect(port);
      expect(await c.call('put 0 0 60 2\r\nhi\r\n')).toMatch(/^INSERTED \d+\r\n$/);
      c.destroy();
    } finally {
      child.kill('SIGTERM');
    }
  });
});

describe('the startup banner', () => {
  const BIN = path.join(ROOT, 'bin', 'beanpole');

  /** Starts bin/beanpole (in a pseudo-terminal with `tty`), waits for `until` in its stdout, stops it. */
  async function startupOutput(tty: boolean, until: RegExp): Promise<{ stdout: string; stderr: string }> {
    // Every door on a port the kernel picks: a port found free first could be taken by another test before the server binds it.
    const args = [BIN, '-l', '127.0.0.1', '-p', '0', '--admin-port', '0', '--gearman-port', '0', '--gearman-listen', '127.0.0.1'];
    const child = tty
      ? spawn('script', ['-qfec', [process.execPath, ...args].join(' '), '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
      : spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    try {
      for (let i = 0; i < 200 && !until.test(tty ? stdout : stderr); i++) await new Promise((r) => setTimeout(r, 50));
      return { stdout, stderr };
    } finally {
      child.kill('SIGTERM');
    }
  }

  it('says in words where each door listens when stdout is a terminal, and nothing there otherwise', async () => {
    const tty = await startupOutput(true, /dashboard\s+http/);
    expect(tty.stdout).toMatch(/Beanpole \d+\.\d+\.\d+/);
    expect(tty.stdout).toMatch(/beanstalkd protocol\s+127\.0\.0\.1:\d+/);
    expect(tty.stdout).toMatch(/Gearman protocol\s+127\.0\.0\.1:\d+/);
    expect(tty.stdout).toMatch(/dashboard\s+http:\/\/127\.0\.0\.1:\d+\//);
    const plain = await startupOutput(false, /memory budget/);
    expect(plain.stdout).toBe('');
    expect(plain.stderr).toContain('"msg":"memory budget');
  });
});

describe('the launcher', () => {
  const BIN = path.join(ROOT, 'bin', 'beanpole');

  /** Node's command line for `bin/beanpole ...args`, run as a command (its sh lines choose the flags), read once Node runs. */
  async function nodeArgv(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string[]> {
    const child = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    try {
      // The server logs once it runs; a cluster node that cannot reach its database logs its first retry.
      for (let i = 0; i < 200 && !/"msg"/.test(stderr); i++) await new Promise((r) => setTimeout(r, 50));
      expect(stderr, 'the server never logged').toMatch(/"msg"/);
      return readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    } finally {
      child.kill('SIGTERM');
    }
  }

  it('starts Node with the young generation each mode wants: 2 MiB in memory, 16 MiB in cluster mode', async () => {
    const memory = await nodeArgv(['-l', '127.0.0.1', '-p', '0', '--no-admin', '--no-gearman']);
    expect(memory).toContain('--max-semi-space-size=2');
    expect(memory).toContain('--no-parallel-scavenge');
    expect(memory).toContain(BIN);
    // Nothing listens on port 1: the node keeps trying, which is long enough to look at it.
    const unreachable = 'postgres://nobody@127.0.0.1:1/none';
    const common = ['-l', '127.0.0.1', '-p', '0', '--no-admin', '--no-gearman', '--cluster-connect-timeout', '20'];
    const cluster = await nodeArgv([...common, '--cluster', unreachable]);
    expect(cluster).toContain('--max-semi-space-size=16');
    expect(cluster).not.toContain('--no-parallel-scavenge');
    expect(await nodeArgv([...common, `--cluster=${unreachable}`])).toContain('--max-semi-space-size=16');
    expect(await nodeArgv(common, { BEANPOLE_CLUSTER_URL: unreachable })).toContain('--max-semi-space-size=16');
  });
});
