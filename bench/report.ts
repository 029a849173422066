/**
 * Results: every run as recorded, the per-scenario summary (median over rounds per server, and
 * the Beanpole/beanstalkd ratio), printed as an aligned text table or as Markdown for
 * BENCHMARKS.md, and the JSON document saved in bench/results/.
 */
import type { MachineInfo } from './machine.js';
import type { PinMode } from './pinning.js';
import type { MetricDef, Scenario } from './scenario.js';
import type { TargetKind } from './targets.js';

/** One run of one scenario against one server in one round: a sample. */
export interface RunRecord {
  scenario: string;
  mode: PinMode;
  target: TargetKind;
  round: number;
  /** null when the run succeeded. */
  error: string | null;
  metrics: Record<string, number>;
  info: Record<string, string | number | boolean>;
  wallMs: number;
}

/** One row of the summary: a metric of a scenario in one mode. */
export interface SummaryRow {
  scenario: string;
  mode: PinMode;
  metric: string;
  label: string;
  better: MetricDef['better'];
  /** Median over the successful rounds, or null when there were none. */
  beanpole: number | null;
  /** The reference server's median (beanstalkd's, or gearmand's for a Gearman scenario). */
  beanstalkd: number | null;
  /** Which server `beanstalkd` holds. */
  reference: 'beanstalkd' | 'gearmand';
  /** beanpole / reference, or null when either is missing. */
  ratio: number | null;
  rounds: { beanpole: number; beanstalkd: number };
  /** Servers with a run whose generator was at GENERATOR_BOUND_PCT or more (the Gearman rows say). */
  generatorBound: TargetKind[];
}

/** The saved JSON document. */
export interface BenchDocument {
  format: 1;
  startedAt: string;
  finishedAt: string;
  wallSec: number;
  machine: MachineInfo;
  options: Record<string, unknown>;
  modes: { mode: PinMode; serverCpus: string | null; generatorCpus: string }[];
  notes: string[];
  summary: SummaryRow[];
  runs: RunRecord[];
}

/** The median of `xs` (mean of the middle two for an even count), null when empty. */
export function median(xs: readonly number[]): number | null {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Medians per scenario, mode and metric, in scenario order. */
export function summarize(scenarios: readonly Scenario[], runs: readonly RunRecord[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  for (const modeName of ['pinned', 'unpinned'] as const) {
    for (const sc of scenarios) {
      const mine = runs.filter((r) => r.scenario === sc.name && r.mode === modeName);
      if (mine.length === 0) continue;
      for (const def of sc.metrics) {
        const of = (t: TargetKind): number[] =>
          mine.filter((r) => r.target === t && r.error === null && def.key in r.metrics).map((r) => r.metrics[def.key]!);
        const reference = sc.reference ?? 'beanstalkd';
        const a = of('beanpole');
        const b = of(reference);
        const bound = [...new Set(mine.filter((r) => r.error === null && r.info.generatorBound === true).map((r) => r.target))];
        const ma = median(a);
        const mb = median(b);
        rows.push({
          scenario: sc.name,
          mode: modeName,
          metric: def.key,
          label: def.label,
          better: def.better,
          beanpole: ma,
          beanstalkd: mb,
          reference,
          ratio: ma !== null && mb !== null && mb !== 0 ? Math.round((ma / mb) * 100) / 100 : null,
          rounds: { beanpole: a.length, beanstalkd: b.length },
          generatorBound: bound,
        });
      }
    }
  }
  return rows;
}

/** 312,456 for large values, one decimal below 100, '-' for none. */
export function formatNumber(x: number | null): string {
  if (x === null || !Number.isFinite(x)) return '-';
  if (Math.abs(x) >= 100) return Math.round(x).toLocaleString('en-US');
  return (Math.round(x * 10) / 10).toFixed(1);
}

/**
 * A generator at or above this share of its core may be what limits the rate: its run is flagged
 * generator-bound, and so are the summary rows it feeds.
 */
export const GENERATOR_BOUND_PCT = 90;

const HEADERS = ['scenario', 'mode', 'metric', 'Beanpole', 'reference', 'ratio', 'better', 'flag'];

function cells(r: SummaryRow): string[] {
  const flag = r.generatorBound.length === 0 ? '' : `generator-bound (${r.generatorBound.join(', ')})`;
  return [r.scenario, r.mode, r.label, formatNumber(r.beanpole), formatNumber(r.beanstalkd), r.ratio === null ? '-' : r.ratio.toFixed(2), r.better, flag];
}

const LEGEND =
  'Medians over rounds. ratio = Beanpole / reference: beanstalkd 1.12, or gearmand for the gearman-* rows; "better" says which way favours a server ' +
  '(for latency and memory, a ratio below 1 means Beanpole uses less). flag "generator-bound": in some run of that server the load generator ' +
  `used ${GENERATOR_BOUND_PCT}% or more of its core, so the number may be the generator's.`;

/** The summary as a plain aligned table (numbers right-aligned). */
export function textTable(rows: readonly SummaryRow[]): string {
  const table = [HEADERS, ...rows.map(cells)];
  const widths = HEADERS.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  const numeric = new Set([3, 4, 5]);
  const line = (r: string[]): string =>
    r
      .map((cell, c) => (numeric.has(c) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(table[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...table.slice(1).map(line), '', LEGEND].join('\n');
}

/** The summary as a Markdown table, ready for BENCHMARKS.md. */
export function markdownTable(rows: readonly SummaryRow[]): string {
  const out = [`| ${HEADERS.join(' | ')} |`, `| ${HEADERS.map((_, c) => ([3, 4, 5].includes(c) ? '---:' : '---')).join(' | ')} |`];
  for (const r of rows) out.push(`| ${cells(r).join(' | ')} |`);
  return [...out, '', LEGEND].join('\n');
}

/** Runs that failed, one line each. */
export function failureLines(runs: readonly RunRecord[]): string[] {
  return runs.filter((r) => r.error !== null).map((r) => `FAILED ${r.scenario} [${r.mode}] ${r.target} round ${r.round}: ${r.error}`);
}

/** Other processes' CPU use (percent of one core) above which a run is flagged as disturbed. */
export const BUSY_MACHINE_PCT = 25;

/** A one-line account of a run, printed as it finishes. */
export function progressLine(sc: Scenario, r: RunRecord, rounds: number): string {
  const head = `[${r.mode}] ${sc.name} round ${r.round}/${rounds} ${r.target}:`;
  if (r.error !== null) return `${head} FAILED: ${r.error}`;
  const shown = sc.metrics.map((m) => `${formatNumber(r.metrics[m.key] ?? null)} ${m.label}`).join(', ');
  const i = r.info;
  const generator = i.generator === undefined ? 'generator' : String(i.generator);
  const other = i.otherCpuPct === undefined ? '' : `, other processes ${String(i.otherCpuPct)}%`;
  const cpu = i.serverCpuPct !== undefined ? ` (cpu: server ${String(i.serverCpuPct)}% on ${String(i.serverCpus)}, ${generator} ${String(i.generatorCpuPct)}% on ${String(i.generatorCpus)}${other})` : '';
  const busy = typeof i.otherCpuPct === 'number' && i.otherCpuPct >= BUSY_MACHINE_PCT ? ' WARNING: the machine was busy with other work' : '';
  const bound = i.generatorBound === true ? ` GENERATOR-BOUND: ${generator} at ${GENERATOR_BOUND_PCT}% or more of its core` : '';
  return `${head} ${shown}${cpu}${busy}${bound}`;
}
