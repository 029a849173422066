import { freshDatabase } from './cluster-db.js';
import { GearmanTestClient } from './gearman-client.js';
import { freePort, startProcessServer, type ServerProcess } from './servers.js';

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Waits until a Gearman port accepts connections (it opens right after the beanstalkd one). */
export async function waitForGearman(port: number): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const up = await GearmanTestClient.connect(port).then(
      (c) => (c.destroy(), true),
      () => false,
    );
    if (up) return;
    await delay(20);
  }
  throw new Error(`the Gearman port ${port} did not open`);
}

/** The Gearman port a server started with `--gearman-port 0` picked, read from its log. */
export async function gearmanPortFromLog(stderr: () => string): Promise<number> {
  // By the clock, not a count of tries: on a loaded machine each try can take far longer than its delay.
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const m = /Gearman protocol listening on 127\.0\.0\.1:(\d+)/.exec(stderr());
    if (m !== null) return Number(m[1]);
    await delay(20);
  }
  throw new Error('no Gearman port in the log');
}

/**
 * Gearman suites run against a cluster node too (npm run test:gearman-cluster): then each
 * server started here gets `--cluster` and a fresh database of its own.
 */
export const GEARMAN_IN_CLUSTER = process.env.BEANPOLE_GEARMAN_CLUSTER === '1';

/** The run's throwaway PostgreSQL (vitest's global setup); imported here only when used, so Playwright can load this file. */
async function testPostgres(): Promise<string> {
  const { inject } = await import('vitest');
  const url = inject('pgUrl');
  if (url === null) throw new Error('BEANPOLE_GEARMAN_CLUSTER=1 needs PostgreSQL (apt-get install postgresql)');
  return url;
}

/**
 * Starts bin/beanpole with Gearman on 127.0.0.1 (on `port`, or a free one) and `args`, and
 * waits until both of its ports accept connections.
 */
export async function startGearmanServer(args: readonly string[] = [], port?: number): Promise<{ server: ServerProcess; port: number }> {
  const gearmanPort = port ?? (await freePort());
  const cluster = GEARMAN_IN_CLUSTER && !args.includes('--cluster') ? ['--cluster', await freshDatabase(await testPostgres(), 'gearman')] : [];
  const server = await startProcessServer('beanpole', { tcp: true }, [...cluster, ...args, '--gearman-listen', '127.0.0.1', '--gearman-port', String(gearmanPort)]);
  await waitForGearman(gearmanPort);
  return { server, port: gearmanPort };
}
