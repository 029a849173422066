/**
 * `npm run bench:profile-top -- FILE.cpuprofile [--top N]`: the functions a V8 CPU profile
 * (from `npm run bench -- --cpu-prof`) spent the most time in, by self time and by total
 * (inclusive) time.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** The parts of a .cpuprofile this reads. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    hitCount?: number;
    children?: number[];
  }[];
  startTime: number;
  endTime: number;
  /** Node id of each sample, and the µs since the previous sample. */
  samples?: number[];
  timeDeltas?: number[];
}

/** Time attributed to one function (all its nodes in the tree together). */
export interface FunctionCost {
  name: string;
  /** url:line (1-based), or a V8 pseudo-frame's empty location. */
  location: string;
  selfMs: number;
  totalMs: number;
}

const PSEUDO = new Set(['(root)']);

function keyOf(frame: CpuProfile['nodes'][number]['callFrame'], cwd: string): { key: string; name: string; location: string } {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  let url = frame.url;
  if (url.startsWith('file://')) url = path.relative(cwd, new URL(url).pathname);
  const location = url === '' ? '' : `${url}:${frame.lineNumber + 1}`;
  return { key: `${name}\u0000${location}`, name, location };
}

/**
 * Self and total time per function. A sample's duration is the gap to the next sample (as in
 * Chrome's profiler); total time counts a function once per sample however often it recurs.
 */
export function functionCosts(profile: CpuProfile, cwd = process.cwd()): { costs: FunctionCost[]; totalMs: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keys = new Map(profile.nodes.map((n) => [n.id, keyOf(n.callFrame, cwd)]));
  const costs = new Map<string, FunctionCost>();
  const cost = (id: number): FunctionCost => {
    const k = keys.get(id)!;
    let c = costs.get(k.key);
    if (c === undefined) {
      c = { name: k.name, location: k.location, selfMs: 0, totalMs: 0 };
      costs.set(k.key, c);
    }
    return c;
  };

  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let totalMs = 0;
  if (samples.length === 0) {
    // Old profiles carry only hit counts: spread the duration evenly over the hits.
    const hits = profile.nodes.reduce((n, x) => n + (x.hitCount ?? 0), 0);
    const msPerHit = hits === 0 ? 0 : (profile.endTime - profile.startTime) / 1000 / hits;
    for (const n of profile.nodes) for (let i = 0; i < (n.hitCount ?? 0); i++) attribute(n.id, msPerHit);
  } else {
    for (let i = 0; i < samples.length; i++) attribute(samples[i]!, (deltas[i + 1] ?? 0) / 1000);
  }

  function attribute(id: number, ms: number): void {
    if (ms <= 0) return;
    totalMs += ms;
    if (!PSEUDO.has(byId.get(id)!.callFrame.functionName)) cost(id).selfMs += ms;
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at)!;
      if (PSEUDO.has(node.callFrame.functionName)) continue;
      const k = keys.get(at)!.key;
      if (seen.has(k)) continue;
      seen.add(k);
      cost(at).totalMs += ms;
    }
  }
  return { costs: [...costs.values()], totalMs };
}

function table(title: string, rows: FunctionCost[], totalMs: number, by: 'selfMs' | 'totalMs'): string {
  const lines = [title, `${'ms'.padStart(9)} ${'%'.padStart(6)}  function (location)`];
  for (const r of rows) {
    const ms = r[by];
    lines.push(`${ms.toFixed(1).padStart(9)} ${((100 * ms) / totalMs).toFixed(1).padStart(6)}  ${r.name}${r.location === '' ? '' : ` (${r.location})`}`);
  }
  return lines.join('\n');
}

/** The report for one profile: top `top` by self time, then by total time. */
export function profileReport(profile: CpuProfile, top: number, cwd = process.cwd()): string {
  const { costs, totalMs } = functionCosts(profile, cwd);
  const bySelf = [...costs].sort((a, b) => b.selfMs - a.selfMs).slice(0, top);
  const byTotal = [...costs].sort((a, b) => b.totalMs - a.totalMs).slice(0, top);
  return [
    `${totalMs.toFixed(0)} ms sampled`,
    '',
    table(`Top ${top} by self time`, bySelf, totalMs, 'selfMs'),
    '',
    table(`Top ${top} by total (inclusive) time`, byTotal, totalMs, 'totalMs'),
  ].join('\n');
}

function main(): number {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help === true || positionals.length === 0) {
    process.stdout.write('Usage: npm run bench:profile-top -- FILE.cpuprofile... [--top N]\n');
    return values.help === true ? 0 : 2;
  }
  const top = values.top === undefined ? 25 : Number(values.top);
  if (!Number.isInteger(top) || top <= 0) {
    process.stderr.write(`--top wants a positive integer, not ${values.top}\n`);
    return 2;
  }
  for (const file of positionals) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    process.stdout.write(`== ${file}\n${profileReport(profile, top)}\n\n`);
  }
  return 0;
}

// Run only as a program, so tests can import the functions.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) process.exitCode = main();
