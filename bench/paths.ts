/** Where things are: the repository, its server entry point, the results folder, programs on PATH. */
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: the nearest folder above this file whose package.json is Beanpole's (works from bench/ and dist/bench/). */
export const REPO_ROOT = ((): string => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'beanpole') return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('bench: cannot find the Beanpole repository above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
})();

/**
 * The server's launcher: a shell script and a JavaScript module at once. Run as a command, its
 * first lines start Node on it with the flags the mode wants; `node bin/beanpole` runs the module
 * without them.
 */
export const BEANPOLE_BIN = path.join(REPO_ROOT, 'bin', 'beanpole');
/**
 * Node's flags for the in-memory server, as the launcher's first `flags=` line gives them: a
 * benchmark of the in-memory server starts `node FLAGS bin/beanpole` (with its own profiling
 * flags, where asked) and measures the server as `./bin/beanpole` runs. A cluster node is
 * started as the command itself (bench/cluster/systems.ts), which picks its own.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ((): string[] => {
  const line = /^":" \/\/; flags=(.*)$/m.exec(readFileSync(BEANPOLE_BIN, 'utf8'));
  if (line === null) throw new Error(`bench: no flags= line in ${BEANPOLE_BIN}`);
  // sh's quoting: the flags are one quoted word, split when the launcher expands it unquoted.
  return line[1]!.replace(/^"(.*)"$/, '$1').split(/\s+/).filter((w) => w !== '');
})();

/** The built floor server (bench/floor-server.ts), started in Beanpole's place by --node-floor. */
export const FLOOR_SERVER_BIN = path.join(REPO_ROOT, 'dist', 'bench', 'floor-server.js');
/** The built Gearman floor server (bench/gearman-floor-server.ts), started by --node-floor for the Gearman scenarios. */
export const GEARMAN_FLOOR_SERVER_BIN = path.join(REPO_ROOT, 'dist', 'bench', 'gearman-floor-server.js');

/** Results and profiles (gitignored). */
export const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');

/** The absolute path of an executable found on PATH, or null (a `which` without a subprocess). */
export function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const full = path.join(dir, name);
    try {
      accessSync(full, constants.X_OK);
      return full;
    } catch {
      // not here
    }
  }
  return null;
}
