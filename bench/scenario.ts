/**
 * What a scenario is, what one run of it gets and returns, and the two helpers every scenario
 * uses: a fresh server for the run, and a measured load with the CPU time both sides spent in
 * each of its windows.
 */
import type { CpuLayout, PinMode } from './pinning.js';
import { cpusAllowed, machineBusySeconds } from './procfs.js';
import { runLoad, type LoadOptions, type LoadResult } from './load/run-load.js';
import type { ConnectionSpec, CounterName, WaitMode } from './load/plan.js';
import { externalTarget, startTarget, type Target, type TargetKind, type TargetOptions } from './targets.js';

/** One row of the results table. */
export interface MetricDef {
  key: string;
  /** What the number is, unit included ("puts/s", "p99 µs"). */
  label: string;
  better: 'higher' | 'lower';
}

/** Settings shared by every run of a bench invocation. */
export interface RunSettings {
  warmupMs: number;
  windowMs: number;
  /** Jobs for the fill scenarios. */
  fillJobs: number;
  /** Jobs prefilled for reserve-delete. */
  drainJobs: number;
  /** Wait before reading RSS (idle, and after a fill). */
  settleMs: number;
  /** Worker threads of the generator (overrides the layout's CPU count). */
  workers: number | null;
  /** Generator threads sleep this long between loop turns in pipelined loads, 0 to block (see load/worker.ts). */
  pollIntervalUs: number;
  /** Beanpole CPU profiles go here when set (--cpu-prof). */
  cpuProfileDir: string | null;
  /** More flags for Beanpole (--beanpole-args), e.g. to measure what a feature costs. */
  beanpoleArgs: readonly string[];
  /** Start the fixed-reply floor server instead of Beanpole (--node-floor). */
  nodeFloor: boolean;
  /** Run against a server already listening on this port instead of starting one (testing the harness). */
  externalPort: number | null;
  /** The built gmbench, the Gearman rows' generator (null: those rows are not run). */
  gmbenchPath: string | null;
  /** Share of compare-gm.sh's job counts the Gearman rows run (1, or 0.1 with --quick as there). */
  gearmanJobScale: number;
}

/** One run: one scenario, one server, one round, in one pinning mode. */
export interface RunContext {
  scenario: string;
  target: TargetKind;
  mode: PinMode;
  round: number;
  layout: CpuLayout;
  settings: RunSettings;
  /** Prints a remark about this run (e.g. a capped job count). */
  note(message: string): void;
}

/** What a run measured: metrics (MetricDef keys and more) and facts about the run. */
export interface RunOutcome {
  metrics: Record<string, number>;
  info: Record<string, string | number | boolean>;
}

/** A benchmark scenario. */
export interface Scenario {
  name: string;
  description: string;
  /** Rows of the table, in order; the JSON keeps every metric a run returns. */
  metrics: MetricDef[];
  /** Also run against beanstalkd (when installed). */
  beanstalkd: boolean;
  /** The server compared with: beanstalkd (the default), or gearmand for a Gearman scenario. */
  reference?: 'beanstalkd' | 'gearmand';
  /** Also run unpinned. */
  unpinned: boolean;
  run(ctx: RunContext): Promise<RunOutcome>;
}

/** Server flags a scenario needs beyond the defaults. */
export interface ServerNeeds {
  binlog?: { fsyncMs: number | null };
  admin?: boolean;
  /** Distinguishes profiles of several servers started in one run. */
  profileSuffix?: string;
  /** Beanpole serves Gearman too (Gearman scenarios). */
  gearman?: boolean;
  /** TLS beside plaintext: Beanpole's own, or stunnel in front of beanstalkd (tls-* scenarios). */
  tls?: boolean;
  /** More flags for Beanpole (after --beanpole-args), such as --policies FILE. */
  beanpoleArgs?: readonly string[];
}

/** Largest body any scenario puts (4 KiB) with room to spare; beanstalkd's default is 65535 too. */
const MAX_JOB_SIZE = 65_535;

/** Starts a fresh server for `ctx` (or uses the external one), runs `fn`, and always stops it. */
export async function withServer<T>(ctx: RunContext, needs: ServerNeeds, fn: (target: Target) => Promise<T>): Promise<T> {
  if (ctx.settings.externalPort !== null) {
    if (needs.binlog !== undefined || needs.admin === true || needs.tls === true) throw new Error(`${ctx.scenario} needs a server the harness starts (not --target-port)`);
    return fn(externalTarget(ctx.settings.externalPort));
  }
  const opts: TargetOptions = {
    kind: ctx.target,
    cpus: ctx.layout.server,
    binlog: needs.binlog ?? null,
    admin: needs.admin ?? false,
    cpuProfile:
      ctx.settings.cpuProfileDir !== null && ctx.target === 'beanpole'
        ? { dir: ctx.settings.cpuProfileDir, name: `${ctx.scenario}-${ctx.mode}-r${ctx.round}${needs.profileSuffix ?? ''}.cpuprofile` }
        : null,
    maxJobSize: MAX_JOB_SIZE,
    gearman: needs.gearman ?? false,
    extraArgs: ctx.target === 'beanpole' ? [...ctx.settings.beanpoleArgs, ...(needs.beanpoleArgs ?? [])] : [],
    nodeFloor: ctx.target === 'beanpole' && ctx.settings.nodeFloor,
    tls: needs.tls ?? false,
  };
  const target = await startTarget(opts);
  try {
    return await fn(target);
  } finally {
    await target.stop();
  }
}

const UNIT_NAMES: Record<CounterName, string> = { inserted: 'put', deleted: 'delete', triples: 'put-reserve-delete triple' };

/** CPU time both sides (and everything else) spent inside one window, and the window's length. */
export interface WindowUsage {
  wallSec: number;
  serverSec: number;
  generatorSec: number;
  /** Other processes, from the machine's busy time (softirq excluded). */
  otherSec: number;
}

/** A load result with the CPU use inside each window. */
export interface Measured {
  result: LoadResult;
  /** Per window, in order. */
  usage: WindowUsage[];
  /**
   * Facts about the run, with the first window's CPU use in percent of one core (serverCpuPct,
   * generatorCpuPct) and otherCpuPct as the highest of any window, so a busy machine shows.
   */
  info: Record<string, string | number | boolean>;
}

/** CPU use in percent of one core, keys prefixed by `prefix` (e.g. `paced.serverCpuPct`). */
export function cpuPercents(u: WindowUsage, prefix = ''): Record<string, number> {
  const pct = (sec: number): number => Math.round((100 * sec) / u.wallSec);
  return {
    [`${prefix}serverCpuPct`]: pct(u.serverSec),
    [`${prefix}generatorCpuPct`]: pct(u.generatorSec),
    // Clock-tick rounding makes a few percent either way noise.
    [`${prefix}otherCpuPct`]: Math.max(0, pct(u.otherSec)),
  };
}

/** Spin for a lone unpipelined connection (its round trips must not include our wake-ups), else poll or block. */
function waitFor(ctx: RunContext, connections: readonly ConnectionSpec[]): WaitMode {
  if (connections.some((c) => c.role === 'latency')) return { kind: 'spin' };
  return ctx.settings.pollIntervalUs > 0 ? { kind: 'sleep', us: ctx.settings.pollIntervalUs } : { kind: 'block' };
}

/** Worker threads for a load: one per generator CPU unless overridden. */
function workersFor(ctx: RunContext): number {
  return ctx.settings.workers ?? Math.max(1, ctx.layout.generatorCpus);
}

/**
 * Runs a load against `target` and records server and generator CPU use inside each window: a
 * generator near its CPUs' limit while the server idles means the number measures the generator,
 * and the JSON shows it. It also records what other processes used meanwhile (a busy machine
 * makes a run worthless). Fails when `unit` did not move at all in a window: a server that
 * answers nothing does not get a score of zero, it fails.
 */
export async function measure(
  ctx: RunContext,
  target: Target,
  unit: CounterName,
  load: Omit<LoadOptions, 'host' | 'port' | 'tlsCa' | 'workers' | 'wait' | 'onWindowOpen' | 'onWindowClose'> & {
    /** Over TLS to the target's TLS port (it must have one). */
    overTls?: boolean;
  },
  hooks: { open?: (index: number) => void; close?: (index: number) => void } = {},
): Promise<Measured> {
  const starts: { wall: number; server: number; gen: NodeJS.CpuUsage; busy: number }[] = [];
  const usage: WindowUsage[] = [];
  const workers = workersFor(ctx);
  const wait = waitFor(ctx, load.connections);
  const { overTls, ...loadOptions } = load;
  if (overTls === true && target.tls === null) throw new Error(`${ctx.scenario}: the ${target.kind} target serves no TLS`);
  const result = await runLoad({
    ...loadOptions,
    host: target.host,
    port: overTls === true ? target.tls!.port : target.port,
    tlsCa: overTls === true ? target.tls!.caPem : null,
    workers,
    wait,
    onWindowOpen: (index) => {
      starts[index] = { wall: performance.now(), server: target.cpuSeconds(), gen: process.cpuUsage(), busy: machineBusySeconds() };
      hooks.open?.(index);
    },
    onWindowClose: (index) => {
      const s = starts[index]!;
      const wall = performance.now();
      const serverSec = target.cpuSeconds() - s.server;
      const gen = process.cpuUsage(s.gen);
      const generatorSec = (gen.user + gen.system) / 1e6;
      const busySec = machineBusySeconds() - s.busy;
      usage[index] = { wallSec: (wall - s.wall) / 1000, serverSec, generatorSec, otherSec: busySec - serverSec - generatorSec };
      hooks.close?.(index);
    },
  });
  for (const w of result.windows) {
    if (w.counts[unit] === 0) throw new Error(`no ${UNIT_NAMES[unit]} completed in the ${Math.round(w.elapsedSec * 1000)} ms window`);
  }
  const first = result.windows[0]!;
  return {
    result,
    usage,
    info: {
      ...cpuPercents(usage[0]!),
      otherCpuPct: Math.max(...usage.map((u) => cpuPercents(u).otherCpuPct!)),
      serverCpus: target.pid === null ? '?' : cpusAllowed(target.pid),
      serverArgv: target.argv.join(' '),
      generatorCpus: cpusAllowed('self'),
      workers: Math.min(workers, load.connections.length),
      // A spinning generator shows 100% CPU by design.
      generatorWait: wait.kind === 'sleep' ? `sleep ${wait.us} µs` : wait.kind,
      windowSec: Math.round(first.elapsedSec * 1000) / 1000,
    },
  };
}
