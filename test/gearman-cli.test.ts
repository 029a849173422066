/**
 * The stock `gearman` command-line tool (Debian's gearman-tools, built on libgearman), unchanged,
 * against Beanpole's Gearman port and, where installed, against Debian's gearmand in the same
 * run: each conversation must print the same bytes on both.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasGearmand, startGearmand, type Gearmand } from './support/gearmand.js';
import { startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

const run = promisify(execFile);
const HAS_GEARMAN = await run('gearman', ['-H']).then(
  () => true,
  (err: { code?: unknown }) => err.code !== 'ENOENT',
);

let beanpole: ServerProcess;
let beanpolePort: number;
let gearmand: Gearmand | null = null;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  if (!HAS_GEARMAN) return;
  ({ server: beanpole, port: beanpolePort } = await startGearmanServer());
  if (await hasGearmand()) gearmand = await startGearmand();
});

afterAll(async () => {
  for (const w of workers) w.kill();
  await beanpole?.stop();
  await gearmand?.stop();
});

/** The servers to run each conversation against: Beanpole, and gearmand when it is installed. */
function ports(): [string, number][] {
  return gearmand === null ? [['beanpole', beanpolePort]] : [['beanpole', beanpolePort], ['gearmand', gearmand.port]];
}

function startWorker(port: number, args: string[]): ChildProcess {
  const w = spawn('gearman', ['-h', '127.0.0.1', '-p', String(port), '-w', ...args], { stdio: 'ignore' });
  workers.push(w);
  return w;
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

async function client(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('gearman', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 });
  return stdout;
}

/** Runs `conversation` on every server; all must give `expected`. */
async function onEach(expected: string, conversation: (port: number, name: string) => Promise<string>): Promise<void> {
  for (const [name, port] of ports()) expect(await conversation(port, name), name).toBe(expected);
}

describe.skipIf(!HAS_GEARMAN)('the stock gearman CLI', () => {
  it('runs a foreground job through a worker that runs a command', async () => {
    await onEach('dlrow olleh', async (port) => {
      const w = startWorker(port, ['-c', '1', '-f', 'cli-rev', '--', 'rev']);
      const out = await client(port, '-f', 'cli-rev', 'hello world');
      expect(await exited(w)).toBe(0);
      return out;
    });
  });

  it('queues background jobs of three priorities that a later worker runs, high first', async () => {
    await onEach('high\nnormal\nlow\n', async (port, name) => {
      for (const [flag, data] of [['-L', 'low'], ['', 'normal'], ['-I', 'high']] as const) {
        await client(port, '-b', ...(flag === '' ? [] : [flag]), '-f', 'cli-bg', data);
      }
      // The worker appends each job's data to a file, in the order it gets them.
      const file = `/tmp/beanpole-cli-${process.pid}-${name}.txt`;
      const w = startWorker(port, ['-c', '3', '-f', 'cli-bg', '--', 'sh', '-c', `cat >> ${file}; echo >> ${file}`]);
      expect(await exited(w)).toBe(0);
      const out = readFileSync(file, 'utf8');
      rmSync(file);
      return out;
    });
  });

  it('passes a unique id, and a worker that sends one data packet per line', async () => {
    await onEach('a\na\nb\n', async (port) => {
      const w = startWorker(port, ['-c', '1', '-n', '-f', 'cli-lines', '--', 'cat']);
      const out = await client(port, '-u', 'my-unique', '-f', 'cli-lines', 'a\nb\n');
      expect(await exited(w)).toBe(0);
      return out;
    });
  });
});
