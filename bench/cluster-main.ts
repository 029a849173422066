/**
 * `npm run bench:cluster`: Beanpole's cluster mode against pg-boss, graphile-worker and batched
 * plain SQL, all on one throwaway PostgreSQL started for the run (initdb, fsync on), with
 * synchronous_commit on and off. Prints tables and saves the numbers as JSON in bench/results/.
 *
 * - cycle: producers put, workers take and finish, closed loop, for a window after a warm-up;
 *   jobs per second finished, for Beanpole with 1 and 3 nodes (clients sending one command at a
 *   time, and 10 per write as the batched SQL sends 10 rows per statement) and each other system.
 * - paced: 1,000 jobs/s spread over 3 Beanpole nodes; put-to-reserve latency p50 / p99.
 * - backlog: one worker's reserve+delete time with 10k, 100k and 1M ready jobs queued.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BeanstalkClient } from './cluster/beanstalk-client.js';
import { BeanpoleSystem, GraphileSystem, PgBossSystem, SqlSystem, type JobSystem } from './cluster/systems.js';
import { RESULTS_DIR } from './paths.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

const HELP = `Usage: npm run bench:cluster -- [options]

  --seconds S        measurement window of each cycle run, after a 1 s warm-up (default 5)
  --in-flight N      jobs each side keeps in flight (default 160): Beanpole N producer and N
                     worker connections (pipelined: N/10 of them, 10 commands per write);
                     plain SQL N/10 connections of 10 rows per statement;
                     pg-boss and graphile-worker N concurrent sends and N concurrent workers
  --sync on|off|both synchronous_commit for the cycle runs (default both)
  --backlog a,b,c    ready jobs queued for the backlog runs (default 10000,100000,1000000; 0 skips)
  --markdown         also print the tables as Markdown (for BENCHMARKS.md)
  --help
`;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface CycleResult {
  system: string;
  sync: 'on' | 'off';
  jobsPerSecond: number;
  putPerSecond: number;
}

/** Closed loop: producers keep `inFlight` jobs being put, workers `inFlight` being taken. */
async function cycle(system: JobSystem, inFlight: number, seconds: number): Promise<{ done: number; put: number }> {
  const lanes = Math.max(1, Math.round(inFlight / system.batch));
  let counting = false;
  let done = 0;
  let put = 0;
  await system.startWorkers(lanes, () => {
    if (counting) done++;
  });
  let producing = true;
  const producers = await Promise.all(Array.from({ length: lanes }, (_, i) => system.producer(i)));
  const loops = producers.map(async (p) => {
    while (producing) {
      await p.put(performance.now());
      if (counting) put += system.batch;
    }
  });
  await sleep(1000);
  counting = true;
  await sleep(seconds * 1000);
  counting = false;
  producing = false;
  await Promise.all(loops);
  await Promise.all(producers.map((p) => p.close()));
  await system.stopWorkers();
  return { done: done / seconds, put: put / seconds };
}

/** Puts at `rate` jobs/s spread over the nodes; workers on every node; latency from put to reserve. */
async function paced(system: BeanpoleSystem, rate: number, seconds: number, workers: number): Promise<{ p50: number; p99: number; jobs: number; rate: number }> {
  const latencies: number[] = [];
  let counting = false;
  await system.startWorkers(workers, (putAt) => {
    if (counting) latencies.push(performance.now() - putAt);
  });
  // A connection has one command in flight at a time: enough of them for the rate at any latency.
  const producers = await Promise.all(Array.from({ length: 16 * system.ports.length }, (_, i) => system.producer(i)));
  let sent = 0;
  const started = performance.now();
  const total = Math.round(rate * (seconds + 1));
  const inFlight = new Set<Promise<void>>();
  let lastSent = started;
  while (sent < total) {
    const due = started + (sent / rate) * 1000;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    if (sent === rate) counting = true; // after the first second
    const p = producers[sent % producers.length]!.put(performance.now()).finally(() => inFlight.delete(p));
    inFlight.add(p);
    sent++;
    lastSent = performance.now();
  }
  await Promise.all(inFlight);
  await sleep(500);
  counting = false;
  await system.stopWorkers();
  await Promise.all(producers.map((p) => p.close()));
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), jobs: latencies.length, rate: sent / ((lastSent - started) / 1000) };
}

/** One worker's reserve+delete time (ms) with `ready` jobs queued in its tube. */
async function backlog(pgServer: ThrowawayPostgres, ready: number): Promise<{ ready: number; meanMs: number; p50Ms: number; p99Ms: number }> {
  const url = await pgServer.createDatabase(`backlog_${ready}`);
  const system = new BeanpoleSystem('beanpole', url, 1);
  await system.start();
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    // Straight into the table: the run measures taking jobs, not putting them.
    await db.query(
      `INSERT INTO beanpole_jobs (tube, state, priority, delay_ms, ttr_ms, created_at, body)
       SELECT 'default', 0, (g % 100), 0, 60000, $2, convert_to(g::text || ':backlog job', 'UTF8') FROM generate_series(1, $1) AS g`,
      [ready, Date.now()],
    );
    await db.query('VACUUM ANALYZE beanpole_jobs');
    const client = await BeanstalkClient.connect(system.ports[0]!);
    const times: number[] = [];
    for (let i = 0; i < 2200; i++) {
      const t0 = performance.now();
      const r = await client.call('reserve-with-timeout 0\r\n');
      const id = r.line.split(' ')[1];
      await client.call(`delete ${id}\r\n`);
      if (i >= 200) times.push(performance.now() - t0);
    }
    client.close();
    times.sort((a, b) => a - b);
    return { ready, meanMs: times.reduce((a, b) => a + b, 0) / times.length, p50Ms: percentile(times, 50), p99Ms: percentile(times, 99) };
  } finally {
    await db.end();
    await system.stop();
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string' },
      'in-flight': { type: 'string' },
      sync: { type: 'string' },
      backlog: { type: 'string' },
      markdown: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    process.stdout.write(HELP);
    return 0;
  }
  const seconds = Number(values.seconds ?? '5');
  const lanes = Number(values['in-flight'] ?? '160');
  const syncModes: ('on' | 'off')[] = values.sync === 'on' ? ['on'] : values.sync === 'off' ? ['off'] : ['on', 'off'];
  const backlogs = (values.backlog ?? '10000,100000,1000000').split(',').map(Number).filter((n) => n > 0);
  const log = (line: string): void => void process.stderr.write(`${line}\n`);

  // autovacuum_naptime 1s, as the README advises for a cluster's PostgreSQL: a queue's table
  // churns, and between vacuums every reserve reads past the dead index entries at its head.
  const server = await startThrowawayPostgres({ settings: { shared_buffers: '256MB', max_connections: '400', autovacuum_naptime: '1s' } });
  log(`bench:cluster: PostgreSQL on port ${server.port}; ${os.cpus().length} CPUs, node ${process.version}`);
  const started = new Date();
  const cycles: CycleResult[] = [];
  let pacedResult: Awaited<ReturnType<typeof paced>> | null = null;
  const backlogResults: Awaited<ReturnType<typeof backlog>>[] = [];
  try {
    for (const sync of syncModes) {
      const systems: ((url: string) => JobSystem)[] = [
        (url) => new SqlSystem(url),
        (url) => new BeanpoleSystem('Beanpole, 1 node', url, 1),
        (url) => new BeanpoleSystem('Beanpole, 3 nodes', url, 3),
        (url) => new BeanpoleSystem('Beanpole, 1 node, 10 pipelined', url, 1, 10),
        (url) => new BeanpoleSystem('Beanpole, 3 nodes, 10 pipelined', url, 3, 10),
        // What the job history (a trigger's rows on every change) costs.
        (url) => new BeanpoleSystem('Beanpole, 1 node, --history-events 0', url, 1, 1, ['--history-events', '0']),
        (url) => new GraphileSystem(url),
        (url) => new PgBossSystem(url),
      ];
      for (const [i, make] of systems.entries()) {
        const url = await server.createDatabase(`cycle_${sync}_${i}`);
        const admin = new pg.Client({ connectionString: server.url });
        await admin.connect();
        await admin.query(`ALTER DATABASE cycle_${sync}_${i} SET synchronous_commit = ${sync}`);
        await admin.end();
        const system = make(url);
        await system.start();
        try {
          const r = await cycle(system, lanes, seconds);
          cycles.push({ system: system.name, sync, jobsPerSecond: Math.round(r.done), putPerSecond: Math.round(r.put) });
          log(`cycle, synchronous_commit ${sync}: ${system.name}: ${Math.round(r.done)} jobs/s done (${Math.round(r.put)} put/s)`);
        } finally {
          await system.stop();
        }
      }
    }
    const pacedUrl = await server.createDatabase('paced');
    const three = new BeanpoleSystem('Beanpole, 3 nodes', pacedUrl, 3);
    await three.start();
    try {
      pacedResult = await paced(three, 1000, seconds, 48);
      log(`paced 1,000 jobs/s over 3 nodes: put-to-reserve p50 ${pacedResult.p50.toFixed(1)} ms, p99 ${pacedResult.p99.toFixed(1)} ms`);
    } finally {
      await three.stop();
    }
    for (const n of backlogs) {
      const r = await backlog(server, n);
      backlogResults.push(r);
      log(`backlog ${n}: reserve+delete mean ${r.meanMs.toFixed(2)} ms, p50 ${r.p50Ms.toFixed(2)}, p99 ${r.p99Ms.toFixed(2)}`);
    }
  } finally {
    await server.stop();
  }

  const lines: string[] = [];
  for (const sync of syncModes) {
    const rows = cycles.filter((c) => c.sync === sync);
    const of = (prefix: string): number => rows.find((r) => r.system.startsWith(prefix))?.jobsPerSecond ?? NaN;
    lines.push(`put+reserve+delete cycle, synchronous_commit ${sync} (${lanes} jobs in flight on each side, ${seconds} s)`);
    lines.push('| system | jobs/s | / plain SQL | / graphile-worker | / pg-boss |');
    lines.push('| --- | ---: | ---: | ---: | ---: |');
    for (const r of rows) {
      const ratio = (base: number): string => (Number.isFinite(base) && base > 0 ? (r.jobsPerSecond / base).toFixed(2) : '-');
      lines.push(`| ${r.system} | ${r.jobsPerSecond} | ${ratio(of('plain SQL'))} | ${ratio(of('graphile'))} | ${ratio(of('pg-boss'))} |`);
    }
    lines.push('');
  }
  if (pacedResult !== null) {
    lines.push(`paced 1,000 jobs/s over 3 nodes (achieved ${pacedResult.rate.toFixed(0)}/s): put-to-reserve p50 ${pacedResult.p50.toFixed(1)} ms, p99 ${pacedResult.p99.toFixed(1)} ms`);
    lines.push('');
  }
  if (backlogResults.length > 0) {
    lines.push('| ready jobs queued | reserve+delete mean ms | p50 ms | p99 ms |');
    lines.push('| ---: | ---: | ---: | ---: |');
    for (const r of backlogResults) lines.push(`| ${r.ready} | ${r.meanMs.toFixed(2)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} |`);
  }
  process.stdout.write(`\n${lines.join('\n')}\n`);
  const doc = { startedAt: started.toISOString(), cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, node: process.version, seconds, lanes, cycles, paced: pacedResult, backlog: backlogResults };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `cluster-${started.toISOString().replace(/:/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(doc, null, 2) + '\n');
  log(`bench:cluster: results in ${file}`);
  return 0;
}

process.exit(await main());
