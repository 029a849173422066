import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BEANPOLE_BIN = path.join(ROOT, 'bin', 'beanpole');

export type ServerKind = 'beanpole' | 'beanstalkd';

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

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/**
 * Starts a real server process on 127.0.0.1 and an ephemeral port and waits until it accepts
 * connections. `args` are extra beanstalkd-style flags (for example ['-z', '10']).
 */
export async function startServer(kind: ServerKind, args: string[] = []): Promise<RunningServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const cmd = kind === 'beanpole' ? process.execPath : 'beanstalkd';
    const argv = [...(kind === 'beanpole' ? [BEANPOLE_BIN] : []), '-l', '127.0.0.1', '-p', String(port), ...args];
    const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (err += d));
    let exited = false;
    const exitPromise = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())));
    const deadline = Date.now() + 15_000;
    while (!exited && Date.now() < deadline && !(await canConnect(port))) await new Promise((r) => setTimeout(r, 20));
    if (exited) {
      if (attempt < 3 && /EADDRINUSE|address already in use/i.test(err)) continue;
      throw new Error(`${kind} exited before listening: ${err}`);
    }
    if (Date.now() >= deadline) {
      child.kill('SIGKILL');
      throw new Error(`${kind} did not start listening on ${port}: ${err}`);
    }
    return {
      kind,
      port,
      process: child,
      stderr: () => err,
      signal: (sig) => {
        if (!exited) child.kill(sig);
      },
      stop: async () => {
        if (exited) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exitPromise;
        clearTimeout(timer);
      },
    };
  }
}
