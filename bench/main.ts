/**
 * `npm run bench`: Beanpole against beanstalkd (when installed) on the same machine in the same
 * run, scenario by scenario; prints a table and saves every sample as JSON in bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isGearmanScenario } from './gearman-scenarios.js';
import { gmbenchBinary } from './load/gmbench.js';
import { machineInfo } from './machine.js';
import { RESULTS_DIR } from './paths.js';
import { pinningSupport, type PinMode } from './pinning.js';
import { failureLines, markdownTable, summarize, textTable, type BenchDocument } from './report.js';
import { runPlan, scenariosFor, targetsOf, type RunPlan } from './runner.js';
import { PACE_TOLERANCE, PACED_RATE, PACED_RATE_100000_TUBES, PACED_RATE_10000_TUBES, SCENARIOS } from './scenarios.js';
import { beanstalkdPath, gearmandPath } from './targets.js';

const HELP = `Usage: npm run bench -- [options]

Runs each scenario against Beanpole and, when beanstalkd is on PATH, against beanstalkd,
alternating A B A B with a fresh server per run. Prints medians and the Beanpole/beanstalkd
ratio; saves every sample as JSON in bench/results/.

The cycle scenarios (cycle, tubes-100 ... tubes-100000) run twice on one server: unpaced (jobs/s,
and put→reserve latency with the 2048-job window full), then, once the queue is drained, paced
at a fixed rate both servers sustain (${thousands(PACED_RATE)} jobs/s; ${thousands(PACED_RATE_10000_TUBES)} for tubes-1000 and tubes-10000, ${thousands(PACED_RATE_100000_TUBES)} for tubes-100000). Latency at the
paced rate is the comparison that counts; a server that misses the rate by more than ${PACE_TOLERANCE * 100}% is
noted as failed to sustain it, and its paced latency is left out. dashboards runs 0 and 10
dashboards in turn on one server (0,10,10,0,0,10,10,0 after a warm-up window) and reports the
cost in jobs/s and in server CPU per job.

The gearman-* scenarios compare with gearmand; their load is gmbench (a generator in C, built with
cc from ../shared/tools/gmbench/gmbench.c beside the repository, or from GMBENCH_SRC). Without
its source they are skipped, with the reason printed.

Options:
  --only a,b          scenarios to run (default: all; see below)
  --rounds N          rounds per scenario and server (default 2)
  --seconds S         measurement window in seconds, after a 1 s warm-up (default 5); the cycle
                      scenarios' paced phase gets the same; dashboards phases take 3 s, or S if
                      shorter
  --fill-jobs N       jobs for the fill scenarios (default 1000000)
  --pin both|on|off   pinned runs (server on one CPU, generator on the others), unpinned runs,
                      or both; unpinned repeats put, reserve-delete, cycle, one-connection and
                      tubes-100 (default both)
  --workers N         generator threads (default: one per generator CPU)
  --poll-us N         pipelined loads: generator threads sleep N µs between event-loop turns,
                      so replies pile up and each read takes many (default 100; 0 wakes per
                      reply); paced phases always spin
  --beanpole-only     skip beanstalkd even when it is installed
  --beanpole-args=A   more flags for Beanpole, space-separated (e.g. --beanpole-args="--history-events 0"
                      to measure what the job history costs)
  --node-floor        with --only one-connection: start a Node server that answers with fixed
                      replies and does no job work (bench/floor-server.ts) in Beanpole's place,
                      to measure the floor of Node's socket path against beanstalkd; with
                      --only gearman-...: a Node Gearman server doing the least job work
                      gmbench checks (bench/gearman-floor-server.ts), against gearmand
  --quick             smoke run: 1 round, 1 s windows, 20000 fill jobs, a tenth of the Gearman
                      rows' jobs (as gmbench's compare-gm.sh --quick), pinned only
  --cpu-prof          write Beanpole's V8 CPU profiles to bench/results/profiles/
                      (read them with npm run bench:profile-top -- FILE)
  --json PATH         where to save the JSON (default bench/results/bench-<time>.json)
  --markdown          also print the table as Markdown (for BENCHMARKS.md)
  --help              this text

Scenarios:
${SCENARIOS.map((s) => `  ${s.name.padEnd(16)}${s.description}`).join('\n')}
`;

/**
 * Measured on 2 cores: against beanstalkd, which writes each reply in its own segment, the
 * generator's CPU falls from about 90% to 55% of its core with rates unchanged (the server was
 * the limit either way), so the generator keeps its headroom.
 */
const DEFAULT_POLL_US = 100;

/** Parsed command line. */
interface CliOptions {
  only: string[] | null;
  rounds: number;
  seconds: number;
  fillJobs: number;
  pin: 'both' | 'on' | 'off';
  workers: number | null;
  pollUs: number;
  beanpoleOnly: boolean;
  beanpoleArgs: string[];
  nodeFloor: boolean;
  quick: boolean;
  cpuProf: boolean;
  json: string | null;
  markdown: boolean;
  targetPort: number | null;
}

class UsageError extends Error {}

function thousands(n: number): string {
  return n.toLocaleString('en-US');
}

function positive(name: string, raw: string | undefined, fallback: number, integer = true): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) throw new UsageError(`--${name} wants a positive ${integer ? 'integer' : 'number'}, not ${raw}`);
  return n;
}

function parseCli(argv: string[]): CliOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      only: { type: 'string' },
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      'fill-jobs': { type: 'string' },
      pin: { type: 'string' },
      workers: { type: 'string' },
      'poll-us': { type: 'string' },
      'beanpole-only': { type: 'boolean' },
      'beanpole-args': { type: 'string' },
      'node-floor': { type: 'boolean' },
      quick: { type: 'boolean' },
      'cpu-prof': { type: 'boolean' },
      json: { type: 'string' },
      markdown: { type: 'boolean' },
      // Hidden: load a server that is already running (the harness's own tests use a broken one).
      'target-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) return 'help';
  const quick = values.quick === true;
  const pin = values.pin ?? (quick ? 'on' : 'both');
  if (pin !== 'both' && pin !== 'on' && pin !== 'off') throw new UsageError(`--pin wants both, on or off, not ${pin}`);
  const only = values.only === undefined ? null : values.only.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const name of only ?? []) {
    if (!SCENARIOS.some((s) => s.name === name)) throw new UsageError(`unknown scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  }
  const nodeFloor = values['node-floor'] === true;
  if (nodeFloor && (only === null || only.some((name) => name !== 'one-connection' && !name.startsWith('gearman-')))) {
    throw new UsageError('--node-floor answers only the one-connection load and the Gearman scenarios: use it with --only one-connection or --only gearman-...');
  }
  return {
    only,
    nodeFloor,
    rounds: positive('rounds', values.rounds, quick ? 1 : 2),
    seconds: positive('seconds', values.seconds, quick ? 1 : 5, false),
    fillJobs: positive('fill-jobs', values['fill-jobs'], quick ? 20_000 : 1_000_000),
    pin,
    workers: values.workers === undefined ? null : positive('workers', values.workers, 1),
    pollUs: values['poll-us'] === '0' ? 0 : positive('poll-us', values['poll-us'], DEFAULT_POLL_US),
    beanpoleOnly: values['beanpole-only'] === true,
    beanpoleArgs: (values['beanpole-args'] ?? '').split(' ').filter((a) => a !== ''),
    quick,
    cpuProf: values['cpu-prof'] === true,
    json: values.json ?? null,
    markdown: values.markdown === true,
    targetPort: values['target-port'] === undefined ? null : positive('target-port', values['target-port'], 1),
  };
}

/** The pinning modes to run, falling back to unpinned where pinning is impossible. */
function modesFor(cli: CliOptions, log: (line: string) => void): PinMode[] {
  if (cli.targetPort !== null) return ['unpinned'];
  const wanted: PinMode[] = cli.pin === 'both' ? ['pinned', 'unpinned'] : cli.pin === 'on' ? ['pinned'] : ['unpinned'];
  const support = pinningSupport();
  if (support.ok || !wanted.includes('pinned')) return wanted;
  log(`note: pinned runs skipped: ${support.reason}`);
  return ['unpinned'];
}

async function main(): Promise<number> {
  let cli: CliOptions | 'help';
  try {
    cli = parseCli(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (cli === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  const started = new Date();
  // Before pinning: the machine facts read this process's CPU mask.
  const machine = machineInfo();
  const hasBeanstalkd = beanstalkdPath() !== null;
  if (!hasBeanstalkd) log('note: beanstalkd is not on PATH: Beanpole runs alone');
  if (cli.nodeFloor) log("note: --node-floor: the rows named beanpole are a floor server's (bench/floor-server.ts; for gearman-*, bench/gearman-floor-server.ts)");
  let scenarios = cli.only === null ? SCENARIOS : SCENARIOS.filter((s) => cli.only!.includes(s.name));
  const preNotes: string[] = [];
  let gmbenchPath: string | null = null;
  if (scenarios.some(isGearmanScenario)) {
    let gm: ReturnType<typeof gmbenchBinary>;
    try {
      gm = gmbenchBinary();
    } catch (err) {
      log(`bench: ${(err as Error).message}`);
      return 2;
    }
    if ('path' in gm) gmbenchPath = gm.path;
    else {
      // Skipped, not measured another way: a slower generator would score itself.
      preNotes.push(`Gearman rows skipped: ${gm.missing}`);
      log(`note: ${preNotes[0]!}`);
      scenarios = scenarios.filter((s) => !isGearmanScenario(s));
    }
  }
  const profileDir = cli.cpuProf ? path.join(RESULTS_DIR, 'profiles') : null;
  if (profileDir !== null) mkdirSync(profileDir, { recursive: true });
  const plan: RunPlan = {
    modes: modesFor(cli, log),
    scenarios,
    rounds: cli.rounds,
    beanstalkd: hasBeanstalkd && !cli.beanpoleOnly && cli.targetPort === null,
    gearmand: gearmandPath() !== null && !cli.beanpoleOnly && cli.targetPort === null,
    settings: {
      warmupMs: cli.quick ? 500 : 1000,
      windowMs: cli.seconds * 1000,
      fillJobs: cli.fillJobs,
      drainJobs: cli.quick ? 20_000 : 400_000,
      settleMs: cli.quick ? 300 : 2000,
      workers: cli.workers,
      pollIntervalUs: cli.pollUs,
      cpuProfileDir: profileDir,
      externalPort: cli.targetPort,
      beanpoleArgs: cli.beanpoleArgs,
      nodeFloor: cli.nodeFloor,
      gmbenchPath,
      gearmanJobScale: cli.quick ? 0.1 : 1,
    },
  };
  const runCount = plan.modes.reduce((n, m) => n + scenariosFor(plan, m).reduce((k, s) => k + targetsOf(plan, s).length, 0), 0) * plan.rounds;
  log(`bench: ${runCount} run${runCount === 1 ? '' : 's'} on ${machine.cpuModel} (${machine.availableParallelism} CPUs), node ${machine.node}, ${machine.beanstalkd ?? 'no beanstalkd'}`);

  const planned = await runPlan(plan, log);
  const { runs, modes } = planned;
  const notes = [...preNotes, ...planned.notes];
  const summary = summarize(plan.scenarios, runs);
  const finished = new Date();
  const doc: BenchDocument = {
    format: 1,
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    wallSec: Math.round((finished.getTime() - started.getTime()) / 100) / 10,
    machine,
    options: { ...cli, ...plan.settings, modes: plan.modes, beanstalkd: plan.beanstalkd },
    modes: modes.map((m) => ({ mode: m.mode, serverCpus: m.layout.server, generatorCpus: m.layout.generator })),
    notes,
    summary,
    runs,
  };
  const jsonPath = cli.json ?? path.join(RESULTS_DIR, `bench-${started.toISOString().replace(/:/g, '-')}.json`);
  mkdirSync(path.dirname(jsonPath), { recursive: true });
  writeFileSync(jsonPath, JSON.stringify(doc, null, 2) + '\n');

  process.stdout.write(`\n${textTable(summary)}\n`);
  if (cli.markdown) process.stdout.write(`\n${markdownTable(summary)}\n`);
  // Notes (a capped fill, a paced rate not sustained) were logged as they came; repeat them by the table.
  for (const n of notes) process.stdout.write(`note: ${n}\n`);
  const failures = failureLines(runs);
  for (const f of failures) process.stdout.write(`${f}\n`);
  log(`\nbench: ${runs.length} run${runs.length === 1 ? '' : 's'} in ${doc.wallSec} s; results in ${jsonPath}`);
  return failures.length > 0 ? 1 : 0;
}

// Ctrl-C: exit through 'exit' handlers, which stop the servers this harness started.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));
// Exit explicitly: a run is over when main returns, whatever handle might linger.
process.exit(await main());
