/**
 * Gearman scenarios, measured side by side with gearmand (single-threaded, `--threads=0`) in the
 * same run: background submits, a worker drain from a prefilled queue, the submit+grab+complete
 * cycle, foreground round trips (client submit to WORK_COMPLETE) and one-connection echo. The
 * load comes from gmbench (load/gmbench.ts), a generator in C that checks every reply and needs
 * well under a core where gearmand needs a whole one; each row reports the generator's CPU, and
 * a run whose generator reaches GENERATOR_BOUND_PCT is flagged, since its rate may be the
 * generator's. The scenarios and their parameters are gmbench's compare-gm.sh's.
 */
import { gmbenchNumber, runGmbench } from './load/gmbench.js';
import { GENERATOR_BOUND_PCT } from './report.js';
import { withServer, type MetricDef, type RunContext, type RunOutcome, type Scenario } from './scenario.js';
import { childrenCpuSeconds, cpusAllowed, machineBusySeconds } from './procfs.js';
import type { Target } from './targets.js';

const rate = (label: string): MetricDef => ({ key: 'rate', label, better: 'higher' });
const latency = (what: string): MetricDef[] => [
  { key: 'p50Us', label: `${what} p50 µs`, better: 'lower' },
  { key: 'p99Us', label: `${what} p99 µs`, better: 'lower' },
];

/** compare-gm.sh's time cap per run (its --secs default): the job count ends a run long before. */
const CAP_SEC = 10;
/** Fewest jobs a scaled-down run gets, so even a smoke run measures more than start-up. */
const MIN_JOBS = 1000;

interface GmScenario {
  /** gmbench's scenario and its shape, as in compare-gm.sh. */
  args: string[];
  /** compare-gm.sh's --jobs; its --warmup is a tenth of it, excluded from the measurement. */
  jobs: number;
}

async function measured(ctx: RunContext, target: Target, spec: GmScenario): Promise<RunOutcome> {
  const binary = ctx.settings.gmbenchPath;
  if (binary === null) throw new Error('gmbench is not available');
  if (target.gearmanPort === null) throw new Error(`${ctx.scenario} needs a server the harness starts with Gearman (not --target-port)`);
  const jobs = Math.max(MIN_JOBS, Math.round(spec.jobs * ctx.settings.gearmanJobScale));
  const args = [...spec.args, '--jobs', String(jobs), '--warmup', String(Math.round(jobs / 10)), '--size', '100', '--label', ctx.scenario];
  const before = { wall: performance.now(), busy: machineBusySeconds(), server: target.cpuSeconds(), children: childrenCpuSeconds(), self: process.cpuUsage() };
  const r = await runGmbench(binary, args, target.gearmanPort, target.pid, CAP_SEC);
  // Other processes over the whole gmbench run (prefill and warm-up too): a busy machine shows.
  const self = process.cpuUsage(before.self);
  const ownSec = childrenCpuSeconds() - before.children + (self.user + self.system) / 1e6;
  const otherSec = machineBusySeconds() - before.busy - (target.cpuSeconds() - before.server) - ownSec;
  const otherCpuPct = Math.max(0, Math.round((100 * otherSec) / ((performance.now() - before.wall) / 1000)));
  const generatorCpuPct = gmbenchNumber(r, 'client_cpu_pct');
  const generatorBound = generatorCpuPct >= GENERATOR_BOUND_PCT;
  if (generatorBound) ctx.note(`${ctx.scenario} ${ctx.target} round ${ctx.round}: gmbench at ${generatorCpuPct}% of its CPU: generator-bound, the rate may be the generator's`);
  return {
    metrics: { rate: gmbenchNumber(r, 'ops_per_sec'), p50Us: gmbenchNumber(r, 'p50_us'), p99Us: gmbenchNumber(r, 'p99_us') },
    info: {
      generator: 'gmbench',
      generatorCpuPct,
      generatorBound,
      otherCpuPct,
      // -1 when gmbench could not read the server's /proc entry.
      serverCpuPct: target.pid === null ? -1 : gmbenchNumber(r, 'srv_cpu_pct'),
      serverRssKb: target.pid === null ? -1 : gmbenchNumber(r, 'srv_rss_kb'),
      jobs,
      measuredSec: gmbenchNumber(r, 'secs'),
      verified: r.verified ?? '?',
      serverCpus: target.pid === null ? '?' : cpusAllowed(target.pid),
      // gmbench is this process's child and inherits its CPU mask.
      generatorCpus: cpusAllowed('self'),
      serverArgv: target.argv.join(' '),
      gmbenchArgs: args.join(' '),
    },
  };
}

function gearmanScenario(name: string, description: string, metrics: MetricDef[], spec: GmScenario): Scenario {
  return {
    name,
    description,
    metrics,
    beanstalkd: true,
    reference: 'gearmand',
    unpinned: false,
    run: (ctx) => withServer(ctx, { gearman: true }, (target) => measured(ctx, target, spec)),
  };
}

/** Whether `sc` is a Gearman row (its load is gmbench's). */
export function isGearmanScenario(sc: Scenario): boolean {
  return sc.reference === 'gearmand';
}

export const GEARMAN_SCENARIOS: readonly Scenario[] = [
  gearmanScenario('gearman-submit', 'gmbench bg-submit: SUBMIT_JOB_BG, 8 connections, 64 in flight each, 100-byte data', [rate('submits/s'), ...latency('submit')], {
    args: ['-s', 'bg-submit', '--conns', '8', '--pipeline', '64'],
    jobs: 1_000_000,
  }),
  gearmanScenario('gearman-drain', 'gmbench drain: 8 workers, GRAB_JOB_UNIQ (16 in flight) and WORK_COMPLETE, from a prefilled queue', [rate('jobs/s'), ...latency('grab')], {
    args: ['-s', 'drain', '--conns', '8', '--grabs', '16'],
    jobs: 300_000,
  }),
  gearmanScenario('gearman-cycle', 'gmbench cycle: 4 producers pipelining background submits (64 each), 4 workers grabbing (16 each) and completing', [rate('jobs/s'), ...latency('submit to assign')], {
    args: ['-s', 'cycle', '--conns', '4', '--consumers', '4', '--pipeline', '64', '--grabs', '16'],
    jobs: 1_000_000,
  }),
  gearmanScenario('gearman-foreground', 'gmbench roundtrip: 4 clients (SUBMIT_JOB, 16 in flight each) and 4 workers: submit to WORK_COMPLETE', [rate('jobs/s'), ...latency('round trip')], {
    args: ['-s', 'roundtrip', '--conns', '4', '--consumers', '4', '--pipeline', '16', '--grabs', '16'],
    jobs: 500_000,
  }),
  gearmanScenario('gearman-echo', 'gmbench echo: one connection, ECHO_REQ of 100 bytes, one at a time', [rate('round trips/s'), ...latency('echo')], {
    args: ['-s', 'echo'],
    jobs: 50_000,
  }),
];
