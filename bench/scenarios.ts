/**
 * The scenarios of `npm run bench`. Each names its load, the server flags it needs, what it
 * reports, and whether beanstalkd and unpinned runs take part.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { openDashboards, type Dashboards } from './load/dashboards.js';
import type { ConnectionSpec, ConsumerSpec, CounterName, FillerSpec, ProducerSpec } from './load/plan.js';
import type { WindowSpec } from './load/run-load.js';
import { mergeSamples, microseconds, percentiles } from './load/samples.js';
import { tubeName } from './load/wire.js';
import { GEARMAN_SCENARIOS } from './gearman-scenarios.js';
import { GENERATOR_BOUND_PCT } from './report.js';
import type { Target } from './targets.js';
import { cpuPercents, measure, withServer, type Measured, type MetricDef, type RunContext, type RunOutcome, type Scenario, type ServerNeeds } from './scenario.js';

const SMALL_BODY = 100;
const LARGE_BODY = 4096;
/** Commands in flight per pipelined connection. */
const DEPTH = 64;
const CONNECTIONS = 8;
const PRODUCERS = 4;
const CONSUMERS = 4;
/** Jobs in the system (put, not yet deleted) that cycling producers keep at most. */
const FLOW_WINDOW = 2048;
/** Fixed work (prefill, fill) must finish within this; it is a failure otherwise. */
const FIXED_WORK_LIMIT_MS = 15 * 60_000;
/** Watching 10,000 tubes per consumer takes a few seconds on a slow server. */
const SETUP_TIMEOUT_MS = 120_000;
/** Share of free memory a fill may take (the server holds every job). */
const FILL_MEMORY_SHARE = 0.4;
/** Guessed cost of a job beyond its body, for the memory cap only. */
const FILL_OVERHEAD_BYTES = 600;
/**
 * Offered rate (jobs/s) of the paced phase of cycle and tubes-100: the same for both servers, so
 * their put→reserve latency is compared at the same load. Well below what either sustains on
 * 2 cores (beanstalkd: about 30,000 in cycle, 26,000 in tubes-100), so --quick keeps it too.
 */
export const PACED_RATE = 10_000;
/** Offered rate (jobs/s) of the paced phase of tubes-1000 and tubes-10000 (beanstalkd manages about 1,900 unpaced with 10,000 tubes). */
export const PACED_RATE_10000_TUBES = 1_000;
/**
 * Offered rate (jobs/s) of tubes-100000's paced phase: beanstalkd's every reserve and every put
 * walks all 100,000 tubes, so it manages about a tenth of its 10,000-tube rate.
 */
export const PACED_RATE_100000_TUBES = 100;
/**
 * A paced phase is sustained when both its put and its delete rate are within this share of the
 * target; otherwise its latency is not reported (it would be measured at another load).
 */
export const PACE_TOLERANCE = 0.03;
/** Dashboard clients of the dashboards scenario. */
const DASHBOARDS = 10;
/**
 * Windows with 0 and with 10 dashboards in the dashboards scenario, in this order (after a
 * warm-up window with them open). ABBA BAAB: both kinds sit at the same mean position, so a
 * server that speeds up or slows down over the run (Beanpole's cycle still gains about 10% over
 * its first 30 s) biases neither; plain alternation would credit the drift to the later kind.
 */
const DASHBOARD_ORDER: readonly number[] = [0, DASHBOARDS, DASHBOARDS, 0, 0, DASHBOARDS, DASHBOARDS, 0];
/** Length of each dashboards phase (shorter when --seconds is). */
const DASHBOARD_PHASE_MS = 3000;
/** After dashboards open or close, the load runs this long before the phase's window opens. */
const DASHBOARD_SETTLE_MS = 500;

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const us = microseconds;
const perSec = (n: number, sec: number): number => Math.round(n / sec);
const oneDecimal = (x: number): number => Math.round(x * 10) / 10;
const thousands = (n: number): string => n.toLocaleString('en-US');

const repeat = <T>(n: number, spec: T): T[] => Array.from({ length: n }, () => spec);

/** a0 b0 a1 b1 ...: worker threads get connections round-robin, so each gets both kinds. */
function interleave<T>(a: T[], b: T[]): T[] {
  const out: T[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (i < a.length) out.push(a[i]!);
    if (i < b.length) out.push(b[i]!);
  }
  return out;
}

/** `connections` fillers putting `jobs` jobs between them. */
function fillers(connections: number, jobs: number, bodySize: number): FillerSpec[] {
  return Array.from({ length: connections }, (_, i) => ({
    role: 'filler' as const,
    bodySize,
    depth: DEPTH,
    jobs: Math.floor(jobs / connections) + (i < jobs % connections ? 1 : 0),
  }));
}

/** Puts `jobs` jobs with 8 pipelined connections; returns the fill rate (jobs/s) and the run's CPU facts. */
async function fill(ctx: RunContext, target: Target, jobs: number, bodySize: number): Promise<{ rate: number; info: Measured['info'] }> {
  const m = await measure(ctx, target, 'inserted', {
    connections: fillers(CONNECTIONS, jobs, bodySize),
    windows: [{ warmupMs: 0, windowMs: FIXED_WORK_LIMIT_MS, until: { counter: 'inserted', total: jobs } }],
  });
  const w = m.result.windows[0]!;
  if (!w.finished) throw new Error(`filling ${jobs} jobs took longer than ${FIXED_WORK_LIMIT_MS / 1000} s`);
  return { rate: perSec(jobs, w.elapsedSec), info: m.info };
}

const rate = (label: string): MetricDef => ({ key: 'rate', label, better: 'higher' });
/** p50, p99 and p99.9 rows: keys `${prefix}p50Us` ..., labels `${what} p50 µs${suffix}` ... */
const latencyRows = (what: string, prefix = '', suffix = ''): MetricDef[] => [
  { key: `${prefix}p50Us`, label: `${what} p50 µs${suffix}`, better: 'lower' },
  { key: `${prefix}p99Us`, label: `${what} p99 µs${suffix}`, better: 'lower' },
  { key: `${prefix}p999Us`, label: `${what} p99.9 µs${suffix}`, better: 'lower' },
];

function latencyMetrics(samples: Float64Array | undefined, prefix = ''): Record<string, number> {
  const p = percentiles(samples ?? new Float64Array(0));
  return { [`${prefix}p50Us`]: us(p.p50), [`${prefix}p99Us`]: us(p.p99), [`${prefix}p999Us`]: us(p.p999), [`${prefix}samples`]: p.count };
}

/** 8 connections of pipelined 100-byte puts into one tube. */
function putScenario(name: string, description: string, needs: ServerNeeds, unpinned: boolean): Scenario {
  const producer: ProducerSpec = { role: 'producer', tubes: 1, bodySize: SMALL_BODY, depth: DEPTH, stamp: false, flowControl: false };
  return {
    name,
    description,
    metrics: [rate('puts/s')],
    beanstalkd: true,
    unpinned,
    run: (ctx) =>
      withServer(ctx, needs, async (target) => {
        const m = await measure(ctx, target, 'inserted', {
          connections: repeat(CONNECTIONS, producer),
          windows: [{ warmupMs: ctx.settings.warmupMs, windowMs: ctx.settings.windowMs }],
        });
        const w = m.result.windows[0]!;
        return { metrics: { rate: perSec(w.counts.inserted, w.elapsedSec) }, info: m.info };
      }),
  };
}

/** Producers and consumers at once over `tubes` tubes, with put-to-reserve latency. */
function cycleLoad(tubes: number): { connections: ConnectionSpec[]; flowWindow: number; setupTimeoutMs: number } {
  const producer: ProducerSpec = { role: 'producer', tubes, bodySize: SMALL_BODY, depth: DEPTH, stamp: true, flowControl: true };
  const consumer: ConsumerSpec = { role: 'consumer', tubes, bodySize: SMALL_BODY, depth: DEPTH, stamped: true, drain: false };
  // The window must exceed what consumers can hold reserved-but-undeleted (a delete may queue
  // behind a blocked reserve), or producers and consumers could wait on each other for ever.
  const flowWindow = Math.max(FLOW_WINDOW, 4 * CONSUMERS * DEPTH);
  // beanstalkd finds a tube by walking the list of all tubes, so 4 workers watching 100,000
  // tubes take it minutes to set up.
  const setupTimeoutMs = tubes >= 100_000 ? 10 * SETUP_TIMEOUT_MS : SETUP_TIMEOUT_MS;
  return { connections: interleave<ConnectionSpec>(repeat(PRODUCERS, producer), repeat(CONSUMERS, consumer)), flowWindow, setupTimeoutMs };
}

/**
 * The cycle in two phases on one server: first unpaced, producers keeping the flow window full
 * (throughput, and latency at that load), then, once consumers have reserved every job put (the
 * queue is empty), paced at `pace` jobs/s in total (latency at the same load for every server). The paced phase's latency is
 * reported only when the server sustained the pace; the run notes it otherwise.
 */
async function runCycle(ctx: RunContext, tubes: number, pace: number): Promise<RunOutcome> {
  return withServer(ctx, {}, async (target) => {
    const { warmupMs, windowMs } = ctx.settings;
    const m = await measure(ctx, target, 'deleted', {
      ...cycleLoad(tubes),
      windows: [
        { warmupMs, windowMs },
        { warmupMs, windowMs, pace, drain: true },
      ],
    });
    const full = m.result.windows[0]!;
    const paced = m.result.windows[1]!;
    const putRate = perSec(paced.counts.inserted, paced.elapsedSec);
    const achieved = perSec(paced.counts.deleted, paced.elapsedSec);
    const sustained = [putRate, achieved].every((r) => Math.abs(r - pace) <= PACE_TOLERANCE * pace);
    if (!sustained) {
      ctx.note(
        `${ctx.scenario} [${ctx.mode}] ${ctx.target} round ${ctx.round}: failed to sustain ${thousands(pace)} jobs/s ` +
          `(puts ${thousands(putRate)}/s, deletes ${thousands(achieved)}/s); its latency at that rate is not reported`,
      );
    }
    const pacedUsage = m.usage[1]!;
    return {
      metrics: {
        rate: perSec(full.counts.deleted, full.elapsedSec),
        ...latencyMetrics(full.samples.cycle),
        'paced.rate': achieved,
        'paced.putRate': putRate,
        ...(sustained ? latencyMetrics(paced.samples.cycle, 'paced.') : {}),
      },
      info: {
        ...m.info,
        tubes,
        'paced.targetRate': pace,
        'paced.status': sustained ? 'sustained' : 'failed-to-sustain',
        'paced.drainMs': paced.drainMs,
        'paced.windowSec': Math.round(paced.elapsedSec * 1000) / 1000,
        ...cpuPercents(pacedUsage, 'paced.'),
        'paced.serverCpuMsPer1000Jobs': oneDecimal((1e6 * pacedUsage.serverSec) / paced.counts.deleted),
      },
    };
  });
}

/** A cycle scenario over `tubes` tubes whose paced phase offers `pace` jobs/s. */
function cycleScenario(name: string, tubes: number, pace: number, description: string, unpinned: boolean): Scenario {
  return {
    name,
    description,
    metrics: [rate('jobs/s'), ...latencyRows('put→reserve', 'paced.', ` at ${thousands(pace)} jobs/s`), ...latencyRows('put→reserve', '', ', window full')],
    beanstalkd: true,
    unpinned,
    run: (ctx) => runCycle(ctx, tubes, pace),
  };
}

/**
 * The put load, or the cycle's unpaced phase, over TLS and over plaintext in the same run, each on
 * a fresh server: Beanpole with --tls-cert/--tls-key for TLS and without them for plaintext;
 * beanstalkd behind stunnel (on the same CPU, so the server side gets the same core) for TLS,
 * and beanstalkd alone for plaintext. Reports both rates and the TLS rate as a share of the
 * plaintext one. The generator does the client side of TLS, so its CPU use is checked: at
 * GENERATOR_BOUND_PCT of its core the run is flagged, as its rate may be the generator's.
 */
function tlsScenario(name: string, load: 'put' | 'cycle', description: string): Scenario {
  const unit: CounterName = load === 'put' ? 'inserted' : 'deleted';
  const what = load === 'put' ? 'puts/s' : 'jobs/s';
  const producer: ProducerSpec = { role: 'producer', tubes: 1, bodySize: SMALL_BODY, depth: DEPTH, stamp: false, flowControl: false };
  const spec = (): Pick<Parameters<typeof measure>[3], 'connections' | 'flowWindow' | 'setupTimeoutMs'> =>
    load === 'put' ? { connections: repeat(CONNECTIONS, producer) } : cycleLoad(1);
  return {
    name,
    description,
    metrics: [
      rate(`${what} over TLS`),
      { key: 'plain.rate', label: `${what} plaintext`, better: 'higher' },
      { key: 'tlsPct', label: 'TLS rate, % of plaintext', better: 'higher' },
      // CPU per job is steadier than a rate on a shared machine: a neighbour's load slows a run, not its work per job.
      { key: 'cpuUsPerJob', label: 'server CPU µs/job over TLS', better: 'lower' },
      { key: 'plain.cpuUsPerJob', label: 'server CPU µs/job plaintext', better: 'lower' },
    ],
    beanstalkd: true,
    unpinned: false,
    run: async (ctx) => {
      const windows = [{ warmupMs: ctx.settings.warmupMs, windowMs: ctx.settings.windowMs }];
      const plain = await withServer(ctx, {}, (target) => measure(ctx, target, unit, { ...spec(), windows }));
      const secure = await withServer(ctx, { tls: true }, (target) => measure(ctx, target, unit, { ...spec(), windows, overTls: true }));
      const rateOf = (m: Measured): number => perSec(m.result.windows[0]!.counts[unit], m.result.windows[0]!.elapsedSec);
      const cpuUsPerJob = (m: Measured): number => oneDecimal((1e6 * m.usage[0]!.serverSec) / m.result.windows[0]!.counts[unit]);
      const tlsRate = rateOf(secure);
      const plainRate = rateOf(plain);
      const generatorPct = Math.max(Number(secure.info.generatorCpuPct), Number(plain.info.generatorCpuPct));
      const generatorBound = generatorPct >= GENERATOR_BOUND_PCT;
      if (generatorBound) ctx.note(`${name} ${ctx.target} round ${ctx.round}: the generator at ${generatorPct}% of its CPU: generator-bound, the rate may be the generator's`);
      const plainUsage = plain.usage[0]!;
      return {
        metrics: {
          rate: tlsRate,
          'plain.rate': plainRate,
          tlsPct: Math.round((100 * tlsRate) / plainRate),
          cpuUsPerJob: cpuUsPerJob(secure),
          'plain.cpuUsPerJob': cpuUsPerJob(plain),
        },
        info: { ...secure.info, ...cpuPercents(plainUsage, 'plain.'), 'plain.serverArgv': String(plain.info.serverArgv), generatorBound },
      };
    },
  };
}

/**
 * What a tube policy costs a job: the cycle (unpaced) on one tube on a fresh server without a
 * policy, then on one whose --policies file gives that tube a concurrency cap and a rate far above
 * the load (they never hold anything back, so every reserve and every end of a reservation goes
 * through the gate for nothing). Beanpole only: beanstalkd has no policies.
 */
const policyScenario: Scenario = {
  name: 'policy',
  description: 'Beanpole only: the cycle (unpaced) on one tube without a policy, then with a cap and a rate that never bind, fresh servers',
  metrics: [
    rate('jobs/s, capped and rated tube'),
    { key: 'plain.rate', label: 'jobs/s, no policy', better: 'higher' },
    { key: 'pct', label: 'policy rate, % of no policy', better: 'higher' },
    { key: 'cpuUsPerJob', label: 'server CPU µs/job with the policy', better: 'lower' },
    { key: 'plain.cpuUsPerJob', label: 'server CPU µs/job without', better: 'lower' },
  ],
  beanstalkd: false,
  unpinned: false,
  run: async (ctx) => {
    const windows = [{ warmupMs: ctx.settings.warmupMs, windowMs: ctx.settings.windowMs }];
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'bench-policies-')), 'policies.json');
    const never = { concurrency: 1_000_000, rate: { perSecond: 1_000_000, burst: 1_000_000 } };
    writeFileSync(file, JSON.stringify({ tubes: { [tubeName(0, 1)]: never } }));
    try {
      const plain = await withServer(ctx, {}, (target) => measure(ctx, target, 'deleted', { ...cycleLoad(1), windows }));
      const gated = await withServer(ctx, { beanpoleArgs: ['--policies', file], profileSuffix: '-policy' }, (target) =>
        measure(ctx, target, 'deleted', { ...cycleLoad(1), windows }),
      );
      const rateOf = (m: Measured): number => perSec(m.result.windows[0]!.counts.deleted, m.result.windows[0]!.elapsedSec);
      const cpuUsPerJob = (m: Measured): number => oneDecimal((1e6 * m.usage[0]!.serverSec) / m.result.windows[0]!.counts.deleted);
      return {
        metrics: {
          rate: rateOf(gated),
          'plain.rate': rateOf(plain),
          pct: Math.round((100 * rateOf(gated)) / rateOf(plain)),
          cpuUsPerJob: cpuUsPerJob(gated),
          'plain.cpuUsPerJob': cpuUsPerJob(plain),
        },
        info: { ...gated.info, ...cpuPercents(plain.usage[0]!, 'plain.') },
      };
    } finally {
      rmSync(path.dirname(file), { recursive: true, force: true });
    }
  },
};

/** Fills `--fill-jobs` jobs of `bodySize` bytes and reports the server's RSS growth per job. */
function fillScenario(name: string, bodySize: number): Scenario {
  return {
    name,
    description: `fill: RSS per job after putting --fill-jobs ${bodySize}-byte jobs (8 connections pipelined)`,
    metrics: [
      { key: 'bytesPerJob', label: 'RSS bytes/job', better: 'lower' },
      rate('fill jobs/s'),
    ],
    beanstalkd: true,
    unpinned: false,
    run: (ctx) =>
      withServer(ctx, {}, async (target) => {
        if (target.pid === null) throw new Error(`${name} reads the server's RSS: it needs a server the harness starts`);
        const cap = Math.floor((os.freemem() * FILL_MEMORY_SHARE) / (bodySize + FILL_OVERHEAD_BYTES));
        const jobs = Math.min(ctx.settings.fillJobs, cap);
        if (jobs < ctx.settings.fillJobs) ctx.note(`${name}: ${jobs} jobs instead of ${ctx.settings.fillJobs} (free memory)`);
        await delay(ctx.settings.settleMs);
        const idle = target.rssBytes();
        const filled = await fill(ctx, target, jobs, bodySize);
        await delay(ctx.settings.settleMs);
        const full = target.rssBytes();
        return {
          metrics: { bytesPerJob: Math.round((full - idle) / jobs), rate: filled.rate },
          info: { ...filled.info, jobs, bodySize, rssIdleBytes: idle, rssFullBytes: full },
        };
      }),
  };
}

const latencyScenario: Scenario = {
  name: 'one-connection',
  description: 'one connection, no pipelining: put, reserve, delete, each waiting for its reply',
  metrics: [rate('triples/s'), ...latencyRows('command')],
  beanstalkd: true,
  unpinned: true,
  run: (ctx) =>
    withServer(ctx, {}, async (target) => {
      const m = await measure(ctx, target, 'triples', {
        connections: [{ role: 'latency', bodySize: SMALL_BODY }],
        windows: [{ warmupMs: ctx.settings.warmupMs, windowMs: ctx.settings.windowMs }],
      });
      const w = m.result.windows[0]!;
      const s = w.samples;
      const all = mergeSamples([s.put, s.reserve, s.delete].flatMap((x) => (x === undefined ? [] : [x])));
      return {
        metrics: {
          rate: perSec(w.counts.triples, w.elapsedSec),
          ...latencyMetrics(all),
          ...latencyMetrics(s.put, 'put.'),
          ...latencyMetrics(s.reserve, 'reserve.'),
          ...latencyMetrics(s.delete, 'delete.'),
        },
        info: m.info,
      };
    }),
};

const reserveDeleteScenario: Scenario = {
  name: 'reserve-delete',
  description: 'drain a prefilled tube: 8 connections, reserve pipelined 64 deep, delete each job',
  metrics: [rate('pairs/s')],
  beanstalkd: true,
  unpinned: true,
  run: (ctx) =>
    withServer(ctx, {}, async (target) => {
      const jobs = ctx.settings.drainJobs;
      await fill(ctx, target, jobs, SMALL_BODY);
      const consumer: ConsumerSpec = { role: 'consumer', tubes: 1, bodySize: SMALL_BODY, depth: DEPTH, stamped: false, drain: true };
      // Fixed work measured from the first reserve: until the tube is empty, or the window ends.
      const m = await measure(ctx, target, 'deleted', {
        connections: repeat(CONNECTIONS, consumer),
        windows: [{ warmupMs: 0, windowMs: ctx.settings.windowMs, until: { counter: 'deleted', total: jobs } }],
      });
      const w = m.result.windows[0]!;
      return { metrics: { rate: perSec(w.counts.deleted, w.elapsedSec) }, info: { ...m.info, prefilled: jobs, drained: w.finished } };
    }),
};

/** Sums over the dashboards scenario's windows of one kind (0 or 10 dashboards). */
interface PhaseTotals {
  jobs: number;
  sec: number;
  serverSec: number;
  events: number;
}

const dashboardsScenario: Scenario = {
  name: 'dashboards',
  description: `Beanpole only: the cycle with 0 and ${DASHBOARDS} socket.io dashboards in turn (${DASHBOARD_ORDER.join(',')}), one server`,
  metrics: [
    { key: 'rate0', label: 'jobs/s, 0 dashboards', better: 'higher' },
    { key: 'rate10', label: `jobs/s, ${DASHBOARDS} dashboards`, better: 'higher' },
    { key: 'costPct', label: `cost of ${DASHBOARDS} dashboards % (jobs/s)`, better: 'lower' },
    { key: 'cpuMsPer1kJobs0', label: 'server CPU ms per 1,000 jobs, 0 dashboards', better: 'lower' },
    { key: 'cpuMsPer1kJobs10', label: `server CPU ms per 1,000 jobs, ${DASHBOARDS} dashboards`, better: 'lower' },
    { key: 'cpuCostPct', label: `cost of ${DASHBOARDS} dashboards % (CPU per job)`, better: 'lower' },
    { key: 'eventsPerSec', label: 'events/s received (all dashboards)', better: 'higher' },
  ],
  beanstalkd: false,
  unpinned: false,
  run: (ctx) =>
    withServer(ctx, { admin: true }, async (target) => {
      const url = `http://${target.host}:${target.adminPort}`;
      let boards: Dashboards | null = null;
      const open = async (): Promise<void> => {
        boards ??= await openDashboards(url, tubeName(0, 1), DASHBOARDS);
      };
      const close = async (): Promise<void> => {
        const b = boards;
        boards = null;
        await b?.close();
      };
      // Window 0 warms up with the dashboards open (both code paths get hot), then DASHBOARD_ORDER.
      const kinds = [DASHBOARDS, ...DASHBOARD_ORDER];
      const phaseMs = Math.min(DASHBOARD_PHASE_MS, ctx.settings.windowMs);
      const windows: WindowSpec[] = kinds.map((n, i) => ({
        warmupMs: i === 0 ? ctx.settings.warmupMs : DASHBOARD_SETTLE_MS,
        windowMs: phaseMs,
        before: n > 0 ? open : close,
      }));
      const events: number[] = [];
      let events0 = 0;
      try {
        const m = await measure(
          ctx,
          target,
          'deleted',
          { ...cycleLoad(1), windows },
          { open: () => (events0 = boards?.events() ?? 0), close: (i) => (events[i] = (boards?.events() ?? 0) - events0) },
        );
        // The measured windows of each kind (window 0, the warm-up, is not one of them).
        const indices = (n: number): number[] => kinds.flatMap((k, i) => (i > 0 && k === n ? [i] : []));
        const totals = (n: number): PhaseTotals => {
          const t: PhaseTotals = { jobs: 0, sec: 0, serverSec: 0, events: 0 };
          for (const i of indices(n)) {
            const w = m.result.windows[i]!;
            t.jobs += w.counts.deleted;
            t.sec += w.elapsedSec;
            t.serverSec += m.usage[i]!.serverSec;
            t.events += events[i] ?? 0;
          }
          return t;
        };
        const without = totals(0);
        const withBoards = totals(DASHBOARDS);
        const rate0 = perSec(without.jobs, without.sec);
        const rate10 = perSec(withBoards.jobs, withBoards.sec);
        const cpuPerJob0 = without.serverSec / without.jobs;
        const cpuPerJob10 = withBoards.serverSec / withBoards.jobs;
        // Each pair's own cost (the k-th window without against the k-th with), to show the
        // spread that the sums smooth out.
        const rateOf = (i: number): number => m.result.windows[i]!.counts.deleted / m.result.windows[i]!.elapsedSec;
        const tens = indices(DASHBOARDS);
        const pairCosts = indices(0).map((zero, p) => oneDecimal(100 * (1 - rateOf(tens[p]!) / rateOf(zero))));
        return {
          metrics: {
            rate0,
            rate10,
            costPct: oneDecimal(100 * (1 - rate10 / rate0)),
            cpuMsPer1kJobs0: Math.round(1e7 * cpuPerJob0) / 10,
            cpuMsPer1kJobs10: Math.round(1e7 * cpuPerJob10) / 10,
            cpuCostPct: oneDecimal(100 * (cpuPerJob10 / cpuPerJob0 - 1)),
            eventsPerSec: perSec(withBoards.events, withBoards.sec),
          },
          info: {
            ...m.info,
            dashboards: DASHBOARDS,
            order: DASHBOARD_ORDER.join(','),
            phaseSec: phaseMs / 1000,
            costPctByPair: pairCosts.join(' / '),
            // Every window as dashboards:jobs/s:server CPU %:other processes' CPU %, the warm-up first.
            windows: kinds
              .map((k, i) => {
                const cpu = cpuPercents(m.usage[i]!);
                return `${k}:${Math.round(rateOf(i))}:${cpu.serverCpuPct}:${cpu.otherCpuPct}`;
              })
              .join(' '),
            serverCpuPct0: Math.round((100 * without.serverSec) / without.sec),
            serverCpuPct10: Math.round((100 * withBoards.serverSec) / withBoards.sec),
          },
        };
      } finally {
        await close();
      }
    }),
};

/** Every scenario, in run order. */
export const SCENARIOS: readonly Scenario[] = [
  putScenario('put', 'put: 8 connections pipelined 64 deep, 100-byte bodies, one tube', {}, true),
  reserveDeleteScenario,
  cycleScenario('cycle', 1, PACED_RATE, `4 producers + 4 consumers on one tube, ≤ 2048 jobs in the system; then paced: ${thousands(PACED_RATE)} jobs/s`, true),
  latencyScenario,
  cycleScenario('tubes-100', 100, PACED_RATE, `the cycle, puts rotating over 100 tubes, consumers watching all; paced: ${thousands(PACED_RATE)} jobs/s`, true),
  cycleScenario('tubes-1000', 1_000, PACED_RATE_10000_TUBES, `the same over 1,000 tubes; paced: ${thousands(PACED_RATE_10000_TUBES)} jobs/s`, false),
  cycleScenario('tubes-10000', 10_000, PACED_RATE_10000_TUBES, `the same over 10,000 tubes; paced: ${thousands(PACED_RATE_10000_TUBES)} jobs/s`, false),
  cycleScenario('tubes-100000', 100_000, PACED_RATE_100000_TUBES, `the same over 100,000 tubes; paced: ${thousands(PACED_RATE_100000_TUBES)} jobs/s`, false),
  fillScenario('fill-100B', SMALL_BODY),
  fillScenario('fill-4KiB', LARGE_BODY),
  putScenario('binlog', 'put with a binlog (-b, default fsync every 50 ms)', { binlog: { fsyncMs: null } }, false),
  putScenario('binlog-f0', 'put with a binlog fsynced before every reply (-b -f 0)', { binlog: { fsyncMs: 0 } }, false),
  dashboardsScenario,
  policyScenario,
  tlsScenario('tls-put', 'put', 'put over TLS (Beanpole --tls-cert; beanstalkd behind stunnel) and plaintext, fresh servers, same run'),
  tlsScenario('tls-cycle', 'cycle', 'the cycle (unpaced) over TLS (Beanpole --tls-cert; beanstalkd behind stunnel) and plaintext'),
  ...GEARMAN_SCENARIOS,
];
