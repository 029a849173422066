/**
 * The job systems the cluster benchmark compares, all on the same PostgreSQL in the same run,
 * each doing the same job flow: producers put jobs (a timestamp in the body), workers take them
 * and mark them done (Beanpole: reserve, then delete). `done` is called when a worker gets a job,
 * so its put time gives the put-to-reserve latency.
 *
 * - Beanpole in cluster mode, with 1 or 3 nodes (clients spread over them);
 * - batched plain SQL: 10 rows per INSERT, 10 reservations per UPDATE ... SKIP LOCKED and 10
 *   deletes per DELETE, the ceiling a job server on this database can hope for;
 * - pg-boss 10 (send, fetch, complete) and graphile-worker 0.17 (addJob, its own runner).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { Logger, makeWorkerUtils, run as runGraphile, type Runner, type WorkerUtils } from 'graphile-worker';

/** graphile-worker logs every job at info level: silence it (the benchmark prints its own). */
const quiet = new Logger(() => () => undefined);
import { BEANPOLE_BIN } from '../paths.js';
import { BeanstalkClient } from './beanstalk-client.js';

/** Called by a worker for each job done, with the put time in its body (performance.now ms). */
export type Done = (putAt: number) => void;

export interface JobSystem {
  readonly name: string;
  /** Jobs a producer's `put` puts (10 for batched SQL). */
  readonly batch: number;
  start(): Promise<void>;
  /** A producer lane: `put(putAt)` puts `batch` jobs stamped `putAt`. */
  producer(index: number): Promise<{ put(putAt: number): Promise<void>; close(): Promise<void> }>;
  /** Starts `lanes` workers; they run until `stop`. */
  startWorkers(lanes: number, done: Done): Promise<void>;
  stopWorkers(): Promise<void>;
  stop(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const stampOf = (body: Buffer | string): number => Number(String(body).split(':')[0]);
const bodyFor = (putAt: number): string => `${putAt}:benchmark job`;

/**
 * Worker lanes that each repeat one step (take a job, finish it) until stopped. A step that
 * finds nothing waits 2 ms (the polling systems); one that fails ends its lane (its server went
 * away at the end of a run).
 */
class WorkerLoops {
  private running = false;
  private loops: Promise<void>[] = [];

  start(step: () => Promise<void>): void {
    this.running = true;
    this.loops.push(
      (async () => {
        while (this.running) await step();
      })().catch(() => undefined),
    );
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops.splice(0));
  }
}

// ---- Beanpole ------------------------------------------------------------------------------

interface NodeProcess {
  child: ChildProcess;
  port: number;
}

async function startNode(url: string, leaseMs: number, args: readonly string[] = []): Promise<NodeProcess> {
  // BENCH_NODE_ARGS: more flags for the node processes' Node (e.g. "--cpu-prof --cpu-prof-dir=DIR"),
  // given through NODE_OPTIONS: the node is started as the launcher command, which picks V8's
  // flags for cluster mode as `beanpole --cluster` does.
  const nodeArgs = process.env.BENCH_NODE_ARGS ?? '';
  // BENCH_BEANPOLE_ARGS: more flags for Beanpole itself (e.g. "--history-events 0").
  const extra = (process.env.BENCH_BEANPOLE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const argv = ['-l', '127.0.0.1', '-p', '0', '--no-admin', '--no-gearman', '--cluster', url, '--cluster-lease-ms', String(leaseMs), ...args, ...extra];
  const env = nodeArgs === '' ? process.env : { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} ${nodeArgs}`.trim() };
  const child = spawn(BEANPOLE_BIN, argv, { stdio: ['ignore', 'ignore', 'pipe'], env });
  let err = '';
  child.stderr!.setEncoding('utf8');
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => {
      err += d;
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(err);
      if (m !== null) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`beanpole exited (${code}): ${err}`)));
  });
  return { child, port };
}

/**
 * Beanpole nodes, and beanstalkd clients that send one command at a time (`pipelined` 1), or,
 * like the batched SQL's 10 rows per statement, 10 commands per write: 10 puts; 10 non-blocking
 * reserves, then the deletes of the jobs they got (a blocking reserve when none came).
 */
export class BeanpoleSystem implements JobSystem {
  private nodes: NodeProcess[] = [];
  private workers: BeanstalkClient[] = [];
  private readonly loops = new WorkerLoops();

  constructor(
    readonly name: string,
    private readonly url: string,
    private readonly nodeCount: number,
    private readonly pipelined = 1,
    /** More flags for the nodes (e.g. --history-events 0). */
    private readonly args: readonly string[] = [],
  ) {}

  get batch(): number {
    return this.pipelined;
  }

  get ports(): number[] {
    return this.nodes.map((n) => n.port);
  }

  async start(): Promise<void> {
    // The first node migrates the schema; the others find it done.
    this.nodes.push(await startNode(this.url, 5000, this.args));
    for (let i = 1; i < this.nodeCount; i++) this.nodes.push(await startNode(this.url, 5000, this.args));
  }

  async producer(index: number) {
    const client = await BeanstalkClient.connect(this.nodes[index % this.nodes.length]!.port);
    return {
      put: async (putAt: number) => {
        const body = bodyFor(putAt);
        const command = `put 0 0 60 ${Buffer.byteLength(body)}\r\n${body}\r\n`;
        for (const r of await client.pipeline(Array.from({ length: this.pipelined }, () => command))) {
          if (!r.line.startsWith('INSERTED')) throw new Error(`put: ${r.line}`);
        }
      },
      close: async () => client.close(),
    };
  }

  async startWorkers(lanes: number, done: Done): Promise<void> {
    for (let i = 0; i < lanes; i++) {
      const client = await BeanstalkClient.connect(this.nodes[i % this.nodes.length]!.port);
      this.workers.push(client);
      this.loops.start(async () => {
        let taken = this.pipelined === 1 ? [] : await client.pipeline(Array.from({ length: this.pipelined }, () => 'reserve-with-timeout 0\r\n'));
        taken = taken.filter((r) => r.line.startsWith('RESERVED'));
        if (taken.length === 0) taken = [await client.call('reserve-with-timeout 1\r\n')].filter((r) => r.line.startsWith('RESERVED'));
        if (taken.length === 0) return;
        for (const r of taken) done(stampOf(r.body!));
        for (const d of await client.pipeline(taken.map((r) => `delete ${r.line.split(' ')[1]!}\r\n`))) {
          if (d.line !== 'DELETED') throw new Error(`delete: ${d.line}`);
        }
      });
    }
  }

  async stopWorkers(): Promise<void> {
    await this.loops.stop();
    for (const w of this.workers.splice(0)) w.close();
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    for (const n of this.nodes.splice(0)) {
      n.child.kill('SIGTERM');
      await once(n.child, 'exit');
    }
  }
}

// ---- batched plain SQL -----------------------------------------------------------------------

const SQL_BATCH = 10;

export class SqlSystem implements JobSystem {
  readonly name = 'plain SQL, 10 per statement';
  readonly batch = SQL_BATCH;
  private clients: pg.Client[] = [];
  private readonly loops = new WorkerLoops();

  constructor(private readonly url: string) {}

  private async client(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: this.url });
    await c.connect();
    this.clients.push(c);
    return c;
  }

  async start(): Promise<void> {
    const c = await this.client();
    await c.query(`
      CREATE TABLE IF NOT EXISTS sql_jobs (id bigserial PRIMARY KEY, tube text NOT NULL, state smallint NOT NULL,
        priority bigint NOT NULL, body bytea NOT NULL) WITH (fillfactor = 80);
      CREATE INDEX IF NOT EXISTS sql_jobs_ready ON sql_jobs (tube, priority, id) WHERE state = 0;`);
  }

  async producer() {
    const c = await this.client();
    return {
      put: async (putAt: number) => {
        const bodies = Array.from({ length: SQL_BATCH }, () => Buffer.from(bodyFor(putAt)));
        await c.query({
          name: 'put',
          text: "INSERT INTO sql_jobs (tube, state, priority, body) SELECT 'bench', 0, 0, b FROM unnest($1::bytea[]) AS b",
          values: [bodies],
        });
      },
      close: async () => undefined,
    };
  }

  async startWorkers(lanes: number, done: Done): Promise<void> {
    for (let i = 0; i < lanes; i++) {
      const c = await this.client();
      this.loops.start(async () => {
        const { rows } = await c.query<{ id: string; body: Buffer }>({
          name: 'reserve',
          text: `WITH h AS (SELECT id FROM sql_jobs WHERE tube = 'bench' AND state = 0 ORDER BY priority, id LIMIT ${SQL_BATCH} FOR UPDATE SKIP LOCKED)
                 UPDATE sql_jobs j SET state = 1 FROM h WHERE j.id = h.id RETURNING j.id, j.body`,
        });
        if (rows.length === 0) return sleep(2);
        for (const r of rows) done(stampOf(r.body));
        await c.query({ name: 'delete', text: 'DELETE FROM sql_jobs WHERE id = ANY($1::bigint[])', values: [rows.map((r) => r.id)] });
      });
    }
  }

  stopWorkers(): Promise<void> {
    return this.loops.stop();
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await Promise.all(this.clients.splice(0).map((c) => c.end()));
  }
}

// ---- pg-boss -------------------------------------------------------------------------------------

export class PgBossSystem implements JobSystem {
  readonly name = 'pg-boss 10';
  readonly batch = 1;
  private boss: PgBoss | null = null;
  private readonly loops = new WorkerLoops();

  constructor(private readonly url: string) {}

  async start(): Promise<void> {
    this.boss = new PgBoss({ connectionString: this.url, max: 16, supervise: false, schedule: false });
    this.boss.on('error', () => undefined);
    await this.boss.start();
    await this.boss.createQueue('bench');
  }

  async producer() {
    const boss = this.boss!;
    return {
      put: async (putAt: number) => {
        await boss.send('bench', { putAt });
      },
      close: async () => undefined,
    };
  }

  async startWorkers(lanes: number, done: Done): Promise<void> {
    const boss = this.boss!;
    for (let i = 0; i < lanes; i++) {
      this.loops.start(async () => {
        const jobs = await boss.fetch<{ putAt: number }>('bench');
        if (jobs.length === 0) return sleep(2);
        for (const job of jobs) {
          done(job.data.putAt);
          await boss.complete('bench', job.id);
        }
      });
    }
  }

  stopWorkers(): Promise<void> {
    return this.loops.stop();
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await this.boss?.stop({ graceful: false, wait: true });
  }
}

// ---- graphile-worker -----------------------------------------------------------------------------

export class GraphileSystem implements JobSystem {
  readonly name = 'graphile-worker 0.17';
  readonly batch = 1;
  private utils: WorkerUtils | null = null;
  private runner: Runner | null = null;

  constructor(private readonly url: string) {}

  async start(): Promise<void> {
    this.utils = await makeWorkerUtils({ connectionString: this.url, logger: quiet });
    await this.utils.migrate();
  }

  async producer() {
    const utils = this.utils!;
    return {
      put: async (putAt: number) => {
        await utils.addJob('bench', { putAt });
      },
      close: async () => undefined,
    };
  }

  async startWorkers(lanes: number, done: Done): Promise<void> {
    this.runner = await runGraphile({
      connectionString: this.url,
      concurrency: lanes,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quiet,
      taskList: {
        bench: async (payload) => {
          done((payload as { putAt: number }).putAt);
        },
      },
    });
  }

  async stopWorkers(): Promise<void> {
    await this.runner?.stop();
    this.runner = null;
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await this.utils?.release();
  }
}
