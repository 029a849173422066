/**
 * The servers under test: Beanpole and, when installed, beanstalkd. Each run gets a fresh process
 * on a free port of 127.0.0.1 (optionally pinned with taskset, optionally with a binlog in a
 * fresh temporary folder), and the harness reads its RSS and CPU time from /proc.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { BEANPOLE_BIN, FLOOR_SERVER_BIN, GEARMAN_FLOOR_SERVER_BIN, SERVER_NODE_FLAGS, findOnPath } from './paths.js';
import { commandName, cpuSecondsOf, rssOf } from './procfs.js';
import { benchCertificates, spawnStunnel, stunnelConfig } from './tls.js';

/** Which server. */
/** Beanpole, and the reference servers it is compared with: beanstalkd, or gearmand for Gearman scenarios. */
export type TargetKind = 'beanpole' | 'beanstalkd' | 'gearmand';

/** How to start one server for one run. */
export interface TargetOptions {
  kind: TargetKind;
  /** taskset -c list, or null for unpinned. */
  cpus: string | null;
  /** -b on a fresh temporary folder; with -f MS when fsyncMs is not null. */
  binlog: { fsyncMs: number | null } | null;
  /** Beanpole only: serve the dashboard on a free port of 127.0.0.1 (otherwise --no-admin). */
  admin: boolean;
  /** Beanpole only: write a V8 CPU profile into `dir` as `name` when it exits. */
  cpuProfile: { dir: string; name: string } | null;
  /** Largest job body (-z). */
  maxJobSize: number;
  /** Beanpole only: serve Gearman on a free port (otherwise --no-gearman). gearmand always does. */
  gearman?: boolean;
  /** Beanpole only: more flags, after the harness's own. */
  extraArgs?: readonly string[];
  /**
   * Beanpole only: start a floor server in its place (--node-floor): floor-server.ts (fixed
   * replies) for the beanstalkd protocol, gearman-floor-server.ts for a Gearman scenario.
   */
  nodeFloor?: boolean;
  /**
   * Serve TLS too (tls-* scenarios): Beanpole with --tls-cert, --tls-key and --tls-allow-plain
   * (TLS and plaintext on its port); beanstalkd with stunnel in front, on the same CPUs.
   */
  tls?: boolean;
}

/** A server the load runs against. */
export interface Target {
  kind: TargetKind;
  host: string;
  port: number;
  /** The dashboard port (Beanpole with `admin`), else null. */
  adminPort: number | null;
  /** The Gearman port (gearmand's own, or Beanpole's with `gearman`), else null. */
  gearmanPort: number | null;
  /** The server's own PID (never a taskset wrapper), or null for an external server. */
  pid: number | null;
  /** Where TLS clients connect (Beanpole's own port, or stunnel's), and the CA they trust; null: no TLS. */
  tls: { port: number; caPem: string } | null;
  /** The command line it was started with. */
  argv: string[];
  /** Resident set size in bytes (VmRSS), NaN when unknown. */
  rssBytes(): number;
  /** User + system CPU seconds used so far, NaN when unknown. */
  cpuSeconds(): number;
  /** SIGTERM, then SIGKILL after a grace period; resolves once it has exited and its temp folder is gone. */
  stop(): Promise<void>;
}

/** Ports this harness must never touch (the defaults of a server someone may be running). */
const RESERVED_PORTS = new Set([11300, 11380, 4730]);
const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 10_000;
/** Keep only the tail of the server's logs, for error messages. */
const LOG_TAIL = 8192;

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Servers started and not yet stopped, and their binlog folders: cleaned up if the harness exits early. */
const live = new Set<ChildProcess>();
const liveDirs = new Set<string>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

/** The path of beanstalkd when it is on PATH. */
export function beanstalkdPath(): string | null {
  return findOnPath('beanstalkd');
}

/** `beanstalkd -v` (e.g. "beanstalkd 1.12"), or null when it is not installed. */
export function beanstalkdVersion(): string | null {
  const bin = beanstalkdPath();
  if (bin === null) return null;
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** An ephemeral port that was free a moment ago (never one of the reserved defaults). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.on('error', reject);
      srv.listen(0, HOST, () => {
        const { port: p } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(p));
      });
    });
    if (!RESERVED_PORTS.has(port)) return port;
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: HOST, port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/** The path of gearmand (Debian's gearman-job-server) when it is installed. */
export function gearmandPath(): string | null {
  return findOnPath('gearmand') ?? (existsSync('/usr/sbin/gearmand') ? '/usr/sbin/gearmand' : null);
}

/** The server's argv (without taskset) for `opts` on `port`. */
function serverArgv(
  opts: TargetOptions,
  port: number,
  adminPort: number | null,
  gearmanPort: number | null,
  binlogDir: string | null,
): { exe: string; args: string[] } {
  if (opts.kind === 'gearmand') {
    const bin = gearmandPath();
    if (bin === null) throw new Error('gearmand is not installed');
    // Single-threaded, as Beanpole is; its log is not wanted.
    return { exe: bin, args: ['--threads=0', '-L', HOST, '-p', String(port), '-l', '/dev/null', '--verbose=ERROR'] };
  }
  const flags = ['-l', HOST, '-p', String(port), '-z', String(opts.maxJobSize)];
  if (binlogDir !== null) {
    flags.push('-b', binlogDir);
    if (opts.binlog!.fsyncMs !== null) flags.push('-f', String(opts.binlog!.fsyncMs));
  }
  if (opts.kind === 'beanstalkd') {
    const bin = beanstalkdPath();
    if (bin === null) throw new Error('beanstalkd is not on PATH');
    return { exe: bin, args: flags };
  }
  const gearman = gearmanPort === null ? ['--no-gearman'] : ['--gearman-listen', HOST, '--gearman-port', String(gearmanPort)];
  // The floor servers run under the server's Node flags too: the floor is Node as Beanpole runs it.
  if (opts.nodeFloor === true) return { exe: process.execPath, args: [...SERVER_NODE_FLAGS, gearmanPort === null ? FLOOR_SERVER_BIN : GEARMAN_FLOOR_SERVER_BIN, ...flags, ...gearman] };
  const profile = opts.cpuProfile === null ? [] : ['--cpu-prof', '--cpu-prof-dir', opts.cpuProfile.dir, '--cpu-prof-name', opts.cpuProfile.name];
  const nodeFlags = [...SERVER_NODE_FLAGS, ...profile];
  const admin = adminPort === null ? ['--no-admin'] : ['--admin-listen', HOST, '--admin-port', String(adminPort)];
  const certs = opts.tls === true ? benchCertificates() : null;
  const tls = certs === null ? [] : ['--tls-cert', certs.cert, '--tls-key', certs.key, '--tls-allow-plain'];
  return { exe: process.execPath, args: [...nodeFlags, BEANPOLE_BIN, ...flags, ...admin, ...gearman, ...tls, ...(opts.extraArgs ?? [])] };
}

/** Starts one server and waits until it accepts connections (and its dashboard too, if asked). */
export async function startTarget(opts: TargetOptions): Promise<Target> {
  const binlogDir = opts.binlog === null ? null : mkdtempSync(path.join(os.tmpdir(), `bench-${opts.kind}-binlog-`));
  if (binlogDir !== null) liveDirs.add(binlogDir);
  const removeBinlog = (): void => {
    if (binlogDir === null) return;
    rmSync(binlogDir, { recursive: true, force: true });
    liveDirs.delete(binlogDir);
  };
  try {
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const adminPort = opts.admin && opts.kind === 'beanpole' ? await freePort() : null;
      const gearmanPort = opts.kind === 'gearmand' ? port : opts.gearman === true && opts.kind === 'beanpole' ? await freePort() : null;
      const { exe, args } = serverArgv(opts, port, adminPort, gearmanPort, binlogDir);
      // taskset execs the server, so the child's PID is the server's own.
      const argv = opts.cpus === null ? [exe, ...args] : ['taskset', '-c', opts.cpus, exe, ...args];
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
      live.add(child);
      let log = '';
      const keep = (d: Buffer): void => {
        log = (log + d.toString('utf8')).slice(-LOG_TAIL);
      };
      child.stdout!.on('data', keep);
      child.stderr!.on('data', keep);
      // An object, not a `let`: the compiler does not see assignments made in callbacks.
      const status = { running: true };
      const exited = new Promise<void>((resolve) =>
        child.once('exit', () => {
          status.running = false;
          live.delete(child);
          resolve();
        }),
      );

      const deadline = Date.now() + START_TIMEOUT_MS;
      const ready = async (p: number): Promise<boolean> => {
        while (status.running && Date.now() < deadline) {
          if (await canConnect(p)) return true;
          await delay(20);
        }
        return false;
      };
      const up = (await ready(port)) && (adminPort === null || (await ready(adminPort))) && (gearmanPort === null || (await ready(gearmanPort)));
      if (!up || !status.running) {
        if (status.running) {
          child.kill('SIGKILL');
          await exited;
          throw new Error(`${opts.kind} did not accept connections within ${START_TIMEOUT_MS} ms (${argv.join(' ')}):\n${log}`);
        }
        if (attempt < 3 && /EADDRINUSE|address already in use/i.test(log)) continue;
        throw new Error(`${opts.kind} exited before listening (${argv.join(' ')}):\n${log}`);
      }
      const pid = child.pid!;
      const comm = commandName(pid);
      if (comm === 'taskset') {
        child.kill('SIGKILL');
        throw new Error(`bench: PID ${pid} is still taskset, not the server`);
      }

      let tls: Target['tls'] = null;
      let stunnel: Awaited<ReturnType<typeof startStunnel>> | null = null;
      if (opts.tls === true) {
        const caPem = benchCertificates().caPem;
        if (opts.kind === 'beanpole') tls = { port, caPem };
        else {
          try {
            stunnel = await startStunnel(port, opts.cpus);
          } catch (err) {
            child.kill('SIGKILL');
            await exited;
            throw err;
          }
          tls = { port: stunnel.port, caPem };
        }
      }

      let stopped: Promise<void> | null = null;
      return {
        kind: opts.kind,
        host: HOST,
        port,
        adminPort,
        gearmanPort,
        pid,
        tls,
        argv: stunnel === null ? argv : [...argv, '(behind stunnel)'],
        rssBytes: () => rssOf(pid),
        // With stunnel in front, the server side is both processes (they share the server's CPU).
        cpuSeconds: () => cpuSecondsOf(pid) + (stunnel?.cpuSeconds() ?? 0),
        stop: () =>
          (stopped ??= (async () => {
            await stunnel?.stop();
            if (status.running) {
              child.kill('SIGTERM');
              const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
              await exited;
              clearTimeout(timer);
            }
            removeBinlog();
          })()),
      };
    }
  } catch (err) {
    removeBinlog();
    throw err;
  }
}

/** A server someone else started (the hidden --target-port flag, for testing the harness): no RSS, no CPU, no stop. */
export function externalTarget(port: number): Target {
  if (RESERVED_PORTS.has(port)) throw new Error(`bench: port ${port} is reserved; use another`);
  return {
    kind: 'beanpole',
    host: HOST,
    port,
    adminPort: null,
    gearmanPort: null,
    pid: null,
    tls: null,
    argv: [],
    rssBytes: () => NaN,
    cpuSeconds: () => NaN,
    stop: () => Promise.resolve(),
  };
}

/** stunnel accepting TLS on a free port and forwarding to `beanstalkdPort`, once it accepts connections. */
async function startStunnel(beanstalkdPort: number, cpus: string | null): Promise<{ port: number; stop(): Promise<void>; cpuSeconds(): number }> {
  const port = await freePort();
  const { child, configFile } = spawnStunnel(stunnelConfig(benchCertificates(), port, beanstalkdPort), cpus);
  live.add(child);
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString('utf8')).slice(-LOG_TAIL)));
  const status = { running: true };
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      status.running = false;
      live.delete(child);
      resolve();
    }),
  );
  const removeConfig = (): void => rmSync(path.dirname(configFile), { recursive: true, force: true });
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (status.running && Date.now() < deadline && !(await canConnect(port))) await delay(20);
  if (!status.running || Date.now() >= deadline) {
    child.kill('SIGKILL');
    await exited;
    removeConfig();
    throw new Error(`stunnel did not accept connections on ${port}:\n${log}`);
  }
  const pid = child.pid!;
  return {
    port,
    cpuSeconds: () => cpuSecondsOf(pid),
    stop: async () => {
      if (status.running) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
      removeConfig();
    },
  };
}
