import { execFile, spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { freePort } from './servers.js';

/** True when Debian's gearmand (package gearman-job-server) is installed. */
export async function hasGearmand(): Promise<boolean> {
  return promisify(execFile)('gearmand', ['--version']).then(
    () => true,
    () => false,
  );
}

/** A gearmand 1.1.20 started for a test: single-threaded, on a free port of 127.0.0.1. */
export interface Gearmand {
  port: number;
  stop(): Promise<void>;
}

/** Starts gearmand with its test defaults and `args` (e.g. `--round-robin`). */
export async function startGearmand(args: readonly string[] = []): Promise<Gearmand> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gearmand-'));
  const child: ChildProcess = spawn('gearmand', ['--threads=0', '-p', String(port), '-L', '127.0.0.1', '-l', path.join(dir, 'log'), '--verbose=ERROR', ...args], {
    stdio: 'ignore',
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('gearmand did not start');
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    port,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
