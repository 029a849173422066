/**
 * A pg_auto_failover formation of its own for a test: a monitor and two data nodes on free ports
 * of 127.0.0.1, trust authentication, no TLS, in a temporary directory, with the monitor's health
 * checks tuned so that a failover takes about ten seconds rather than a minute. Replication is
 * synchronous (pg_auto_failover's default with two data nodes: replication quorum on, one
 * standby in synchronous_standby_names). PostgreSQL refuses to run as root, so under root the
 * directory is given to the `postgres` user and every pg_autoctl runs as that user, as
 * bench/throwaway-postgres.ts does for its server.
 *
 * Each pg_autoctl runs in a process group of its own (its keeper, its PostgreSQL and that
 * PostgreSQL's backends): `kill` sends SIGKILL to the group, as a machine that dies would.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runAs } from '../../bench/throwaway-postgres.js';
import { freePort } from './servers.js';

/** Where Debian's postgresql-15-auto-failover (pg-auto-failover-cli) puts pg_autoctl, or null. */
export function autoctlBinary(): string | null {
  const bin = autoFailoverBinDir();
  for (const candidate of ['/usr/bin/pg_autoctl', ...(bin === null ? [] : [path.join(bin, 'pg_autoctl')])]) {
    if (existsSync(candidate) && bin !== null) return candidate;
  }
  return null;
}

/** The bin directory of the PostgreSQL that has the pgautofailover extension (its pg_ctl must run the nodes). */
function autoFailoverBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const version = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'lib', 'pgautofailover.so')))
    .sort((a, b) => Number(b) - Number(a))[0];
  return version === undefined ? null : path.join(root, version, 'bin');
}

/**
 * The monitor's health checks: a probe a second, one retry, a node unhealthy after 3 s without
 * an answer, and 3 s for a primary that cannot be reached to demote itself before its standby
 * is promoted (the defaults are 5 s, 2 retries, 20 s and 30 s).
 */
const MONITOR_SETTINGS: Record<string, string> = {
  'pgautofailover.health_check_period': '1000',
  'pgautofailover.health_check_timeout': '1000',
  'pgautofailover.health_check_max_retries': '1',
  'pgautofailover.health_check_retry_delay': '500',
  'pgautofailover.node_considered_unhealthy_timeout': '3000',
  'pgautofailover.primary_demote_timeout': '3000',
};

const SOCKET_DIR = '/var/run/postgresql';

export const APP_USER = 'beanpole';
export const APP_DATABASE = 'jobs';

export interface DataNode {
  readonly name: string;
  readonly port: number;
  /** Its pg_autoctl (keeper, PostgreSQL), or null while killed. */
  process: ChildProcess | null;
}

/** A node's states as the monitor has them. */
export interface NodeState {
  name: string;
  port: number;
  reported: string;
  goal: string;
}

export interface Formation {
  /** postgres://beanpole@127.0.0.1:P1,127.0.0.1:P2/jobs?target_session_attrs=read-write */
  readonly url: string;
  readonly nodes: readonly DataNode[];
  /** The monitor's view of the data nodes. */
  states(): Promise<NodeState[]>;
  /** Waits until the monitor reports one primary and one secondary, both settled; returns the primary's index. */
  settled(timeoutMs: number): Promise<number>;
  /** Resolves with the time the monitor first reports a node other than `old` promoted (wait_primary or primary). */
  promoted(old: number, timeoutMs: number): Promise<number>;
  /**
   * pg_autoctl perform switchover: the primary is demoted (it restarts as the standby) and the
   * standby promoted, both alive; resolves once the monitor says it is done.
   */
  switchover(): Promise<void>;
  /** SIGKILL to the node's pg_autoctl and its PostgreSQL. */
  kill(i: number): void;
  /** Starts the node's pg_autoctl again (it rejoins as a standby). */
  start(i: number): void;
  stop(): Promise<void>;
  /** The end of each pg_autoctl's log, for a failure message. */
  logs(): string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startFormation(): Promise<Formation> {
  const autoctl = autoctlBinary();
  const bin = autoFailoverBinDir();
  if (autoctl === null || bin === null) throw new Error('pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)');
  const owner = runAs();
  // pg_autoctl reaches its own PostgreSQL through the packaged socket directory, which a
  // container's /run may have lost since the package was installed.
  if (!existsSync(SOCKET_DIR)) {
    mkdirSync(SOCKET_DIR, { recursive: true, mode: 0o2775 });
    if (owner !== null) chownSync(SOCKET_DIR, owner.uid, owner.gid);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-paf-'));
  if (owner !== null) chownSync(dir, owner.uid, owner.gid);
  // pg_autoctl keeps its state and configuration under the XDG directories: the test's own.
  const env = {
    ...process.env,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_RUNTIME_DIR: path.join(dir, 'run'),
    PG_CONFIG: path.join(bin, 'pg_config'),
  };
  const spawnOptions = { env, cwd: dir, ...(owner === null ? {} : { uid: owner.uid, gid: owner.gid }) };
  const pgctl = path.join(bin, 'pg_ctl');
  const output = new Map<string, string>();
  const create = (args: string[]): void => {
    const r = spawnSync(autoctl, ['create', ...args, '--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', pgctl], {
      ...spawnOptions,
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r.status !== 0) throw new Error(`pg_autoctl create ${args.join(' ')} failed:\n${r.stderr}${r.stdout}`);
  };
  const run = (name: string): ChildProcess => {
    const child = spawn(autoctl, ['run', '--pgdata', path.join(dir, name)], { ...spawnOptions, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      output.set(name, ((output.get(name) ?? '') + chunk.toString()).slice(-6000));
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    return child;
  };
  const killGroup = (child: ChildProcess | null): void => {
    if (child?.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };

  const monitorPort = await freePort();
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
  let monitor: ChildProcess | null = null;
  const nodes: DataNode[] = [];
  const stop = async (): Promise<void> => {
    const all = [...nodes.map((n) => n.process), monitor];
    const exits = all.map((c) => (c === null || c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r))));
    for (const c of all) killGroup(c);
    await Promise.all(exits);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    create(['monitor', '--pgdata', path.join(dir, 'monitor'), '--pgport', String(monitorPort)]);
    // The monitor would listen on every address: only 127.0.0.1 here.
    const set = spawnSync(autoctl, ['config', 'set', '--pgdata', path.join(dir, 'monitor'), 'postgresql.listen_addresses', '127.0.0.1'], {
      ...spawnOptions,
      encoding: 'utf8',
    });
    if (set.status !== 0) throw new Error(`pg_autoctl config set failed:\n${set.stderr}`);
    appendFileSync(
      path.join(dir, 'monitor', 'postgresql.conf'),
      `\n# Beanpole's failover test: a failover in about ten seconds\n${Object.entries(MONITOR_SETTINGS)
        .map(([k, v]) => `${k} = ${v}\n`)
        .join('')}`,
    );
    monitor = run('monitor');
    await untilConnects(monitorUrl, 30_000);
    for (const name of ['node1', 'node2']) {
      const port = await freePort();
      create([
        'postgres',
        '--pgdata',
        path.join(dir, name),
        '--pgport',
        String(port),
        '--listen',
        '127.0.0.1',
        '--monitor',
        monitorUrl,
        '--username',
        APP_USER,
        '--dbname',
        APP_DATABASE,
        '--name',
        name,
      ]);
      const node: DataNode = { name, port, process: run(name) };
      nodes.push(node);
      // The second node copies the first (pg_basebackup): the first must be serving by then.
      if (nodes.length === 1) await untilConnects(`postgres://${APP_USER}@127.0.0.1:${port}/${APP_DATABASE}`, 60_000);
    }
  } catch (err) {
    await stop();
    throw err;
  }

  const states = async (): Promise<NodeState[]> => {
    const client = new pg.Client({ connectionString: monitorUrl, connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<NodeState>(
        'SELECT nodename AS name, nodeport AS port, reportedstate::text AS reported, goalstate::text AS goal FROM pgautofailover.node ORDER BY nodeid',
      );
      return rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  const formation: Formation = {
    url: `postgres://${APP_USER}@${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}/${APP_DATABASE}?target_session_attrs=read-write&connect_timeout=2`,
    nodes,
    states,
    async settled(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const now = await states().catch(() => []);
        const primary = now.findIndex((s) => s.reported === 'primary' && s.goal === 'primary');
        const secondary = now.findIndex((s) => s.reported === 'secondary' && s.goal === 'secondary');
        if (primary >= 0 && secondary >= 0) return nodes.findIndex((n) => n.port === now[primary]!.port);
        if (Date.now() > deadline) throw new Error(`the formation did not settle: ${JSON.stringify(now)}\n${formation.logs()}`);
        await sleep(250);
      }
    },
    async promoted(old, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const now = await states().catch(() => []);
        if (now.some((s) => s.port !== nodes[old]!.port && (s.reported === 'wait_primary' || s.reported === 'primary'))) return Date.now();
        if (Date.now() > deadline) throw new Error(`no node was promoted: ${JSON.stringify(now)}`);
        await sleep(100);
      }
    },
    switchover() {
      return new Promise((resolve, reject) => {
        const child = spawn(autoctl, ['perform', 'switchover', '--pgdata', path.join(dir, 'monitor'), '--wait', '90'], { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
        let said = '';
        child.stdout.on('data', (d: Buffer) => (said += d.toString()));
        child.stderr.on('data', (d: Buffer) => (said += d.toString()));
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_autoctl perform switchover exited ${code}:\n${said.slice(-3000)}`))));
      });
    },
    kill(i) {
      killGroup(nodes[i]!.process);
      nodes[i]!.process = null;
    },
    start(i) {
      nodes[i]!.process ??= run(nodes[i]!.name);
    },
    stop,
    logs() {
      return [...output].map(([name, text]) => `--- ${name}\n${text.split('\n').slice(-25).join('\n')}`).join('\n');
    },
  };
  return formation;
}

async function untilConnects(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${url} did not accept connections: ${(err as Error).message}`);
      await sleep(200);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
