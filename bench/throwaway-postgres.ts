/**
 * A PostgreSQL server of its own for a test run or a benchmark: initdb in a temporary directory,
 * started on a free port of 127.0.0.1 with its socket in that directory, stopped and removed at
 * the end. PostgreSQL refuses to run as root, so under root the directory is given to the
 * `postgres` user (Debian's package makes it) and the server runs as that user.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './targets.js';

export interface ThrowawayPostgres {
  /** postgres://beanpole@127.0.0.1:PORT/postgres: the superuser's maintenance database. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** postgres://beanpole@127.0.0.1:PORT/NAME, made empty for a test or a benchmark run. */
  createDatabase(name: string): Promise<string>;
  /** Fast shutdown then start again on the same port and data (a database restart mid-load), after `downMs`. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ThrowawayOptions {
  /** Settings given as -c NAME=VALUE (e.g. synchronous_commit). */
  settings?: Record<string, string>;
}

const SUPERUSER = 'beanpole';

/** The newest installed PostgreSQL's bin directory (PG_BIN overrides), or null. */
export function postgresBinDir(): string | null {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv !== undefined && existsSync(path.join(fromEnv, 'initdb'))) return fromEnv;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : path.join(root, versions[0]!, 'bin');
}

/** uid and gid to run PostgreSQL (or pg_autoctl) as: ourselves (null), or `postgres` when we are root. */
export function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (line === undefined) throw new Error('running as root, and there is no postgres user to run PostgreSQL as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

async function waitUntilAccepting(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`PostgreSQL exited (${child.exitCode}):\n${log()}`);
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`PostgreSQL did not start: ${(err as Error).message}\n${log()}`);
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

export async function startThrowawayPostgres(options: ThrowawayOptions = {}): Promise<ThrowawayPostgres> {
  const bin = postgresBinDir();
  if (bin === null) throw new Error('PostgreSQL is not installed (apt-get install postgresql, or set PG_BIN)');
  const owner = runAs();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-pg-'));
  const data = path.join(dir, 'data');
  if (owner !== null) chownSync(dir, owner.uid, owner.gid);
  const spawnOptions = owner === null ? {} : { uid: owner.uid, gid: owner.gid };
  const init = spawnSync(
    path.join(bin, 'initdb'),
    ['-D', data, '-U', SUPERUSER, '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
    { ...spawnOptions, encoding: 'utf8', cwd: dir },
  );
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
  }
  const port = await freePort();
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dir,
    max_connections: '300',
    shared_buffers: '128MB',
    ...options.settings,
  };
  const args = ['-D', data, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const url = `postgres://${SUPERUSER}@127.0.0.1:${port}/postgres`;
  let output = '';
  let child: ChildProcess;
  const start = async (): Promise<void> => {
    child = spawn(path.join(bin, 'postgres'), args, { ...spawnOptions, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-8192);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    await waitUntilAccepting(url, child, () => output);
  };
  const shutdown = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGINT'); // fast shutdown: ends sessions, writes a checkpoint
    await exited;
  };
  await start();
  return {
    url,
    port,
    get pid() {
      return child.pid ?? 0;
    },
    async createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${SUPERUSER}@127.0.0.1:${port}/${name}`;
    },
    async restart(downMs = 0) {
      await shutdown();
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
    async stop() {
      await shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
