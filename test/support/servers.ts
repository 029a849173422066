import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BEANPOLE_BIN = path.join(ROOT, 'bin', 'beanpole');

export type ServerKind = 'beanpole' | 'beanstalkd';

/** Where a server listens: a TCP port on 127.0.0.1, or a UNIX socket path. */
export type Address = { port: number } | { path: string };

/** True when Debian's beanstalkd is on PATH. */
export function hasBeanstalkd(): boolean {
  return spawnSync('beanstalkd', ['-v']).status === 0;
}

/** An ephemeral TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** A server process started for one case. */
export interface ServerProcess {
  kind: ServerKind;
  address: Address;
  process: ChildProcess;
  stderr(): string;
  signal(sig: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after 3 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

/** Ports handed out by this process and not yet released, so two starts never share one. */
const portsInUse = new Set<number>();

async function takePort(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (!portsInUse.has(p)) {
      portsInUse.add(p);
      return p;
    }
  }
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m !== null) out.add(m[1]!);
      } catch {
        // the fd closed meanwhile
      }
    }
  } catch {
    // the process is gone
  }
  return out;
}

/**
 * Lines of /proc/net/tcp up to the last listening socket. The kernel lists listening sockets
 * first, and the file can hold thousands of TIME_WAIT lines after a test run, so reading it all
 * on every poll would cost more than the servers themselves.
 */
function listeningTcpLines(): string[] {
  const fd = openSync('/proc/net/tcp', 'r');
  try {
    const buf = Buffer.alloc(16384);
    const lines: string[] = [];
    let rest = '';
    let header = true;
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n <= 0) return lines;
      const parts = (rest + buf.toString('latin1', 0, n)).split('\n');
      rest = parts.pop() ?? '';
      for (const l of parts) {
        if (header) {
          header = false;
          continue;
        }
        if (l.trim().split(/\s+/)[3] !== '0A') return lines;
        lines.push(l);
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** Inodes of sockets listening on `addr` (Linux /proc). */
function listeningInodes(addr: Address): string[] {
  if ('port' in addr) {
    const hexPort = addr.port.toString(16).toUpperCase().padStart(4, '0');
    return listeningTcpLines()
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length > 9 && f[1]!.endsWith(`:${hexPort}`))
      .map((f) => f[9]!);
  }
  return readFileSync('/proc/net/unix', 'latin1')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 8 && f[7] === addr.path && (parseInt(f[3]!, 16) & 0x10000) !== 0)
    .map((f) => f[6]!);
}

function canConnect(addr: Address): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = 'port' in addr ? net.connect({ port: addr.port, host: '127.0.0.1' }) : net.connect({ path: addr.path });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/**
 * True once *this* process listens on `addr`. On Linux this reads /proc, which also proves the
 * listener is ours (not another test's server that grabbed the same port) and opens no
 * connection, so the server's connection counters start at 0. Elsewhere it falls back to a
 * probe connection.
 */
async function listening(child: ChildProcess, addr: Address): Promise<boolean> {
  if (child.pid !== undefined && existsSync('/proc/net/tcp')) {
    const want = listeningInodes(addr);
    if (want.length === 0) return false;
    const mine = socketInodes(child.pid);
    return want.some((i) => mine.has(i));
  }
  return canConnect(addr);
}

/**
 * Starts beanstalkd or Beanpole on 127.0.0.1 and a fresh port (or on a UNIX socket path) with
 * beanstalkd-style `args`, and waits until that very process is listening.
 */
export async function startProcessServer(
  kind: ServerKind,
  listen: { tcp: true } | { path: string },
  args: readonly string[],
  /** Added to the environment the server starts with (NODE_OPTIONS, for example). */
  env: NodeJS.ProcessEnv = {},
): Promise<ServerProcess> {
  for (let attempt = 0; ; attempt++) {
    const port = 'tcp' in listen ? await takePort() : null;
    const address: Address = port !== null ? { port } : { path: (listen as { path: string }).path };
    const listenArgs = port !== null ? ['-l', '127.0.0.1', '-p', String(port)] : ['-l', `unix:${(listen as { path: string }).path}`];
    const cmd = kind === 'beanpole' ? process.execPath : 'beanstalkd';
    // Tests never touch the default dashboard port: Beanpole runs without it unless asked.
    const adminArgs = kind === 'beanpole' && !args.some((a) => a.startsWith('--admin') || a === '--no-admin') ? ['--no-admin'] : [];
    // Nor the default Gearman port: without a Gearman flag, Beanpole runs without it.
    const gearmanArgs = kind === 'beanpole' && !args.some((a) => a.startsWith('--gearman') || a === '--no-gearman') ? ['--no-gearman'] : [];
    const argv = [...(kind === 'beanpole' ? [BEANPOLE_BIN] : []), ...listenArgs, ...adminArgs, ...gearmanArgs, ...args];
    const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    let err = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (err += d));
    let exited = false;
    let stopping = false;
    let listened = false;
    const exitPromise = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        exited = true;
        if (port !== null) portsInUse.delete(port);
        // A server that dies on its own while a test uses it shows up in that test as a closed
        // connection; its own words say why.
        if (listened && !stopping) console.error(`${kind} (pid ${child.pid}, ${argv.join(' ')}) exited by itself: code ${code}, signal ${signal}\n${err.slice(-4000)}`);
        resolve();
      }),
    );
    const deadline = Date.now() + 15_000;
    while (!exited && Date.now() < deadline && !(await listening(child, address))) await delay(15);
    if (exited) {
      if (attempt < 3 && /EADDRINUSE|address already in use/i.test(err)) continue;
      throw new Error(`${kind} exited before listening (${argv.join(' ')}): ${err}`);
    }
    if (Date.now() >= deadline) {
      child.kill('SIGKILL');
      throw new Error(`${kind} did not start listening (${argv.join(' ')}): ${err}`);
    }
    listened = true;
    return {
      kind,
      address,
      process: child,
      stderr: () => err,
      signal: (sig) => {
        stopping = true;
        if (!exited) child.kill(sig);
      },
      stop: async () => {
        stopping = true;
        if (exited) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exitPromise;
        clearTimeout(timer);
      },
    };
  }
}

export interface RunningServer {
  kind: ServerKind;
  port: number;
  process: ChildProcess;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Sends a signal to this server only. */
  signal(sig: NodeJS.Signals): void;
  /** Stops the server (SIGTERM, then SIGKILL) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts a real server process on 127.0.0.1 and an ephemeral port and waits until that very
 * process listens. `args` are extra beanstalkd-style flags (for example ['-z', '10']).
 */
export async function startServer(kind: ServerKind, args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<RunningServer> {
  const server = await startProcessServer(kind, { tcp: true }, args, env);
  return { ...server, port: (server.address as { port: number }).port };
}
