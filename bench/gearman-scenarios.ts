/**
 * Gearman scenarios, measured side by side with gearmand (single-threaded, `--threads=0`) in the
 * same run: background submits, a worker drain from a prefilled queue, the submit+grab+complete
 * cycle, foreground round trips (client submit to WORK_COMPLETE) and one-connection echo. The
 * load comes from gmbench (load/gmbench.ts), a generator in C that checks every reply and needs
 * well under a core where gearmand needs a whole one; each row reports the generator's CPU, so a
 * row limited by its generator shows as such. The parameters are those of gmbench's
 * compare-gm.sh, scaled down with the fill size (--quick).
 */
import { gmbenchBinary, runGmbench } from './load/gmbench.js';
import { withServer, type MetricDef, type RunContext, type RunOutcome, type Scenario } from './scenario.js';
import { cpusAllowed } from './procfs.js';
import type { Target } from './targets.js';

const rate = (label: string): MetricDef => ({ key: 'rate', label, better: 'higher' });
const latency = (what: string): MetricDef[] => [
  { key: 'p50Us', label: `${what} p50 µs`, better: 'lower' },
  { key: 'p99Us', label: `${what} p99 µs`, better: 'lower' },
];

/** A generator at or above this share of its core measures itself: the row says so. */
const GENERATOR_BOUND_PCT = 90;
/** The fill size the job counts below are for (RunSettings.fillJobs' default). */
const FULL_FILL = 1_000_000;

interface GmScenario {
  /** gmbench's scenario and its shape (compare-gm.sh's). */
  args: string[];
  /** Jobs in a full run; a tenth of them more as warm-up. */
  jobs: number;
}

async function measured(ctx: RunContext, target: Target, spec: GmScenario): Promise<RunOutcome> {
  const gm = gmbenchBinary();
  if ('missing' in gm) throw new Error(`Gearman rows skipped: ${gm.missing}`);
  const jobs = Math.max(2000, Math.round((spec.jobs * ctx.settings.fillJobs) / FULL_FILL));
  const capSec = Math.max(10, Math.ceil(ctx.settings.windowMs / 1000) * 6);
  const r = await runGmbench(gm.path, [...spec.args, '--jobs', String(jobs), '--warmup', String(Math.round(jobs / 10)), '--size', '100'], target.gearmanPort!, target.pid, capSec);
  const generatorCpuPct = Number(r.client_cpu_pct);
  if (generatorCpuPct >= GENERATOR_BOUND_PCT) ctx.note(`${ctx.scenario} ${ctx.target}: gmbench at ${generatorCpuPct}% of its CPU: the rate may be the generator's`);
  return {
    metrics: { rate: Number(r.ops_per_sec), p50Us: Number(r.p50_us), p99Us: Number(r.p99_us) },
    info: {
      generator: 'gmbench',
      generatorCpuPct,
      serverCpuPct: Number(r.srv_cpu_pct),
      serverRssKb: Number(r.srv_rss_kb),
      jobs,
      serverCpus: target.pid === null ? '?' : cpusAllowed(target.pid),
      generatorCpus: cpusAllowed('self'),
      serverArgv: target.argv.join(' '),
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

export const GEARMAN_SCENARIOS: readonly Scenario[] = [
  gearmanScenario('gearman-submit', 'SUBMIT_JOB_BG: 8 connections, 64 in flight each, 100-byte data', [rate('submits/s'), ...latency('submit')], {
    args: ['-s', 'bg-submit', '--conns', '8', '--pipeline', '64'],
    jobs: 1_000_000,
  }),
  gearmanScenario('gearman-drain', '8 workers: GRAB_JOB_UNIQ (16 in flight) and WORK_COMPLETE, from a prefilled queue', [rate('jobs/s'), ...latency('grab')], {
    args: ['-s', 'drain', '--conns', '8', '--grabs', '16'],
    jobs: 300_000,
  }),
  gearmanScenario('gearman-cycle', '4 producers pipelining background submits (64 each), 4 workers grabbing (16 each) and completing', [rate('jobs/s'), ...latency('submit to assign')], {
    args: ['-s', 'cycle', '--conns', '4', '--consumers', '4', '--pipeline', '64', '--grabs', '16'],
    jobs: 1_000_000,
  }),
  gearmanScenario('gearman-foreground', '4 clients (SUBMIT_JOB, 16 in flight each) and 4 workers: submit to WORK_COMPLETE', [rate('jobs/s'), ...latency('round trip')], {
    args: ['-s', 'roundtrip', '--conns', '4', '--consumers', '4', '--pipeline', '16', '--grabs', '16'],
    jobs: 500_000,
  }),
  gearmanScenario('gearman-echo', 'one connection, ECHO_REQ of 100 bytes, one at a time', [rate('round trips/s'), ...latency('echo')], {
    args: ['-s', 'echo'],
    jobs: 50_000,
  }),
];
