/**
 * gmbench, a Gearman load generator in C (`../shared/tools/gmbench/` beside the repository, or
 * the file GMBENCH_SRC names): built into bench/results/ (gitignored) when missing or older than
 * its source, then run as a child of this process, so it inherits the generator's CPUs when the
 * run is pinned. It can saturate gearmand with a fraction of its own core, where a generator in
 * Node cannot.
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

/**
 * The built binary, or why there is none (the Gearman rows are then skipped). Throws when the
 * source is there but does not compile: that is a broken setup, not a missing tool.
 */
export function gmbenchBinary(): { path: string } | { missing: string } {
  const source = gmbenchSource();
  if (!existsSync(source)) return { missing: `gmbench's source is not at ${source} (set GMBENCH_SRC to gmbench.c)` };
  const cc = findOnPath('cc') ?? findOnPath('gcc');
  if (cc === null) return { missing: 'no C compiler (cc or gcc) on PATH to build gmbench' };
  if (!existsSync(BINARY) || statSync(source).mtimeMs > statSync(BINARY).mtimeMs) {
    mkdirSync(RESULTS_DIR, { recursive: true });
    try {
      execFileSync(cc, ['-O2', '-Wall', '-Wextra', '-o', BINARY, source], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
      throw new Error(`${cc} could not build gmbench from ${source}: ${stderr || (err as Error).message}`);
    }
  }
  return { path: BINARY };
}

/** One gmbench run's result line, as key=value pairs. */
export type GmbenchResult = Record<string, string>;

/** Parses gmbench's one line of `key=value` pairs. */
export function parseGmbenchLine(line: string): GmbenchResult {
  const result: GmbenchResult = {};
  for (const pair of line.trim().split(/\s+/)) {
    const eq = pair.indexOf('=');
    if (eq > 0) result[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return result;
}

/** A number gmbench reported, or an error naming the key it lacks. */
export function gmbenchNumber(r: GmbenchResult, key: string): number {
  const n = Number(r[key]);
  if (r[key] === undefined || !Number.isFinite(n)) throw new Error(`gmbench reported no ${key}`);
  return n;
}

/**
 * Runs gmbench with `args` against 127.0.0.1:`port` for at most `capSec` seconds of issuing;
 * `pid` is the server's (gmbench reads its CPU and RSS). Rejects when gmbench exits non-zero,
 * reports a status other than OK, or counts any error: a server that answers wrongly fails.
 */
export async function runGmbench(binary: string, args: readonly string[], port: number, pid: number | null, capSec: number): Promise<GmbenchResult> {
  const argv = [...args, '--host', '127.0.0.1', '--port', String(port), '--secs', String(capSec), ...(pid === null ? [] : ['--pid', String(pid)])];
  // gmbench bounds itself (3 * secs + 60 s); this is the backstop should it hang anyway.
  const { stdout } = await run(binary, argv, { timeout: (3 * capSec + 90) * 1000, maxBuffer: 1 << 20 }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
    const why = err.stderr?.trim().split('\n').slice(-3).join(' / ') || err.message;
    throw new Error(`gmbench ${argv.join(' ')} failed: ${why}`);
  });
  const result = parseGmbenchLine(stdout);
  if (result.status !== 'OK' || result.errors !== '0') {
    throw new Error(`gmbench ${argv.join(' ')}: status ${result.status ?? '?'}, ${result.errors ?? '?'} errors`);
  }
  return result;
}
