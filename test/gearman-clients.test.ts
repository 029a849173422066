/**
 * Real Gearman client libraries, unchanged, against Beanpole and (where installed) against
 * Debian's gearmand in the same run: the npm `gearman` package as client and worker, the npm
 * `node-gearman` package under its own test suite, Perl's Gearman::Client and Gearman::Worker
 * (Debian's libgearman-client-perl), and PHP's pecl gearman over libgearman (Debian's
 * php-gearman).
 * Each conversation must give the same results on both servers.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import gearman from 'gearman';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasGearmand, startGearmand, type Gearmand } from './support/gearmand.js';
import { startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

const run = promisify(execFile);
const requireFrom = createRequire(import.meta.url);
const HAS_PERL_CLIENT = await run('perl', ['-MGearman::Client', '-MGearman::Worker', '-e', '1']).then(
  () => true,
  () => false,
);

const HAS_PHP_GEARMAN = await run('php', ['-r', 'exit(class_exists("GearmanClient") ? 0 : 1);']).then(
  () => true,
  () => false,
);

let beanpole: ServerProcess;
let beanpolePort: number;
let gearmand: Gearmand | null = null;

beforeAll(async () => {
  ({ server: beanpole, port: beanpolePort } = await startGearmanServer());
  if (await hasGearmand()) gearmand = await startGearmand();
});

afterAll(async () => {
  await beanpole?.stop();
  await gearmand?.stop();
});

function servers(): [string, number][] {
  return gearmand === null ? [['beanpole', beanpolePort]] : [['beanpole', beanpolePort], ['gearmand', gearmand.port]];
}

/** Runs `conversation` on each server; the results must be equal and `expected`. */
async function onEach<T>(expected: T, conversation: (port: number) => Promise<T>): Promise<void> {
  for (const [name, port] of servers()) expect(await conversation(port), name).toEqual(expected);
}

/** A node-gearman worker that upper-cases, reporting status and a data chunk first. */
function npmWorker(port: number, fn: string): { close(): void } {
  const worker = gearman('127.0.0.1', port);
  worker.on('JOB_ASSIGN', (job) => {
    worker.sendWorkStatus(job.handle, '1', '2');
    worker.sendWorkData(job.handle, 'partial');
    worker.sendWorkComplete(job.handle, job.payload.toString().toUpperCase());
    worker.preSleep();
  });
  worker.on('NOOP', () => worker.grabJob());
  worker.connect(() => {
    worker.addFunction(fn);
    worker.preSleep();
  });
  return worker;
}

describe('the npm gearman package', () => {
  it('runs foreground jobs through a worker: data packets and results reach the client', async () => {
    await onEach(
      { data: ['partial', 'partial'], results: ['HELLO', 'WORLD'] },
      (port) =>
        new Promise((resolve, reject) => {
          const fn = `npm-upper-${port}`;
          const worker = npmWorker(port, fn);
          const client = gearman('127.0.0.1', port, { timeout: 5000 });
          const data: string[] = [];
          const results: string[] = [];
          client.on('error', reject);
          client.on('WORK_DATA', (job) => data.push(job.payload.toString()));
          client.on('WORK_COMPLETE', (job) => {
            results.push(job.payload.toString());
            if (results.length === 2) {
              client.close();
              worker.close();
              resolve({ data, results: results.sort() });
            }
          });
          client.connect(() => {
            client.submitJob(fn, 'hello');
            client.submitJob(fn, 'world', { priority: 'high' });
          });
        }),
    );
  });

  it('submits a background job and reads its status while it waits', async () => {
    await onEach({ known: '1', running: '0' }, (port) =>
      new Promise((resolve, reject) => {
        const client = gearman('127.0.0.1', port, { timeout: 5000 });
        client.on('error', reject);
        client.on('JOB_CREATED', (handle) => client.getJobStatus(handle));
        client.on('STATUS_RES', (status) => {
          client.close();
          resolve({ known: status.known, running: status.running });
        });
        client.connect(() => client.submitJob(`npm-bg-${port}`, 'later', { background: true }));
      }),
    );
  });
});

describe.skipIf(!HAS_PERL_CLIENT)("Perl's Gearman::Client", () => {
  const workerScript = `
    use Gearman::Worker;
    my $w = Gearman::Worker->new(job_servers => ["127.0.0.1:$ARGV[0]"]);
    $w->register_function($ARGV[1] => sub { scalar reverse $_[0]->arg });
    $w->work(stop_if => sub { $_[0] >= 3 }) ;
  `;
  const clientScript = `
    use Gearman::Client;
    my $c = Gearman::Client->new(job_servers => ["127.0.0.1:$ARGV[0]"]);
    for my $word (qw(alpha beta gamma)) {
      my $r = $c->do_task($ARGV[1] => $word, { uniq => "u-$word" });
      print defined $r ? $$r : "undef", "\\n";
    }
  `;

  it('runs do_task through a Perl worker', async () => {
    await onEach('ahpla\nateb\nammag\n', async (port) => {
      const fn = `perl-rev-${port}`;
      const worker = spawn('perl', ['-e', workerScript, String(port), fn], { stdio: 'ignore' });
      try {
        const { stdout } = await run('perl', ['-e', clientScript, String(port), fn], { timeout: 15_000 });
        return stdout;
      } finally {
        worker.kill();
      }
    });
  });
});

/**
 * node-gearman (npm `node-gearman`, andris9/node-gearman) run with its own test suite under
 * nodeunit, unchanged but for the server's address: three runs in a row on each server, every
 * one clean. One connection is client and worker at once; when a job's result arrives it closes,
 * and it reconnects (and the suite breaks) if an answer to its next GRAB_JOB comes after that.
 */
describe('node-gearman with its own test suite', () => {
  const packageDir = path.dirname(requireFrom.resolve('node-gearman/package.json'));
  const nodeunit = requireFrom.resolve('nodeunit');

  async function runSuite(port: number): Promise<string> {
    const dir = await mkdtemp(path.join(tmpdir(), 'node-gearman-'));
    try {
      const source = await readFile(path.join(packageDir, 'test', 'test.js'), 'utf8');
      const pointed = source
        .replace('require("../lib/gearman")', `require(${JSON.stringify(path.join(packageDir, 'lib', 'gearman'))})`)
        .replaceAll('new Gearman("localhost")', `new Gearman("127.0.0.1", ${port})`);
      expect(pointed).not.toBe(source);
      const file = path.join(dir, 'test.js');
      await writeFile(file, pointed);
      const runner = `require(${JSON.stringify(nodeunit)}).reporters.default.run([${JSON.stringify(file)}], null, (err) => process.exit(err ? 1 : 0));`;
      // The suite requires nodeunit by name: it is found in this project's node_modules.
      const env = { ...process.env, NODE_PATH: path.dirname(path.dirname(nodeunit)) };
      const { stdout } = await run(process.execPath, ['--no-deprecation', '-e', runner], { timeout: 30_000, env });
      return stdout.replace(/\x1b\[[0-9;]*m/g, ''); // the reporter's colours
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('passes three runs in a row', async () => {
    for (const [name, port] of servers()) {
      for (let round = 1; round <= 3; round++) {
        const out = await runSuite(port).catch((err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`);
        expect(out, `${name}, run ${round}`).toMatch(/OK: 10 assertions/);
        expect(out, `${name}, run ${round}`).not.toMatch(/FAILURES|Error/);
      }
    }
  }, 120_000);
});

describe.skipIf(!HAS_PHP_GEARMAN)("PHP's pecl gearman", () => {
  // A background job with a unique id, then its status by that id (GET_STATUS_UNIQUE), and the
  // status of a unique id nobody used.
  const script = `
    $c = new GearmanClient();
    $c->addServer("127.0.0.1", (int)$argv[1]);
    $c->doBackground($argv[2], "payload", $argv[2] . "-u");
    if ($c->returnCode() != GEARMAN_SUCCESS) { echo "submit: ", $c->error(), "\\n"; exit(1); }
    foreach ([$argv[2] . "-u", $argv[2] . "-none"] as $unique) {
      $s = $c->jobStatusByUniqueKey($unique);
      if ($c->returnCode() != GEARMAN_SUCCESS) { echo "status: ", $c->error(), "\\n"; exit(1); }
      echo json_encode($s), "\\n";
    }
  `;

  it('reads a job\'s status by its unique id (jobStatusByUniqueKey)', async () => {
    await onEach('[true,false,0,0]\n[false,false,0,0]\n', async (port) => {
      const { stdout } = await run('php', ['-r', script, String(port), `php-status-${port}`], { timeout: 15_000 });
      return stdout;
    });
  });
});
