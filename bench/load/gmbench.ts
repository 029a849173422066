/**
 * gmbench, a Gearman load generator in C (`../shared/tools/gmbench/` beside the repository, or
 * the file GMBENCH_SRC names): built on first use into bench/results/, then run as a child of
 * this process, so it inherits the generator's CPUs when the run is pinned. It can saturate
 * gearmand with a fraction of its own core, where a generator in Node cannot.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, RESULTS_DIR, findOnPath } from '../paths.js';

const run = promisify(execFile);

/** Where gmbench's source is looked for. */
export function gmbenchSource(): string {
  return process.env.GMBENCH_SRC ?? path.join(REPO_ROOT, '..', 'shared', 'tools', 'gmbench', 'gmbench.c');
}

const BINARY = path.join(RESULTS_DIR, 'gmbench');

/** The built binary, or why there is none (the Gearman rows are then skipped). */
export function gmbenchBinary(): { path: string } | { missing: string } {
  const source = gmbenchSource();
  if (!existsSync(source)) return { missing: `gmbench's source is not at ${source} (set GMBENCH_SRC)` };
  const cc = findOnPath('cc') ?? findOnPath('gcc');
  if (cc === null) return { missing: 'no C compiler (cc) to build gmbench' };
  if (!existsSync(BINARY) || statSync(source).mtimeMs > statSync(BINARY).mtimeMs) {
    mkdirSync(RESULTS_DIR, { recursive: true });
    execFileSync(cc, ['-O2', '-Wall', '-Wextra', '-o', BINARY, source], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return { path: BINARY };
}

/** One gmbench run's result line, as key=value pairs. */
export type GmbenchResult = Record<string, string>;

/**
 * Runs gmbench with `args` against 127.0.0.1:`port`; `pid` is the server's (gmbench reads its
 * CPU and RSS). Rejects when gmbench reports an error or a status other than OK.
 */
export async function runGmbench(binary: string, args: readonly string[], port: number, pid: number | null, capSec: number): Promise<GmbenchResult> {
  const argv = [...args, '--port', String(port), '--secs', String(capSec), ...(pid === null ? [] : ['--pid', String(pid)])];
  const { stdout } = await run(binary, argv, { timeout: (capSec + 60) * 1000, maxBuffer: 1 << 20 }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(`gmbench ${argv.join(' ')} failed: ${err.stderr?.trim() || err.message}`);
  });
  const result: GmbenchResult = {};
  for (const pair of stdout.trim().split(/\s+/)) {
    const eq = pair.indexOf('=');
    if (eq > 0) result[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  if (result.status !== 'OK' || (result.errors !== undefined && result.errors !== '0')) {
    throw new Error(`gmbench ${argv.join(' ')}: status ${result.status ?? '?'}, ${result.errors ?? '?'} errors`);
  }
  return result;
}
