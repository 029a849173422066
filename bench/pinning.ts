/**
 * CPU pinning with taskset: the server on one CPU, the generator (this process and every thread
 * it has or will start) on the others, so neither steals the other's cycles and the comparison
 * measures the server, not the scheduler.
 */
import { execFileSync } from 'node:child_process';
import { findOnPath } from './paths.js';
import { cpusAllowed } from './procfs.js';

/** Where the server and the generator run in one mode. */
export interface CpuLayout {
  /** taskset -c list for the server, or null to start it unpinned. */
  server: string | null;
  /** The CPUs the generator may use (a taskset list). */
  generator: string;
  /** How many CPUs the generator has: its worker-thread count. */
  generatorCpus: number;
}

/** How a comparison is run: pinned (server and generator on different CPUs) or not. */
export type PinMode = 'pinned' | 'unpinned';

/** Parses a CPU list like `0-3,6` into CPU numbers. */
export function parseCpuList(list: string): number[] {
  const out: number[] = [];
  for (const part of list.trim().split(',')) {
    if (part === '') continue;
    const [a, b] = part.split('-').map(Number);
    for (let c = a!; c <= (b ?? a!); c++) out.push(c);
  }
  return out;
}

/** The generator's CPUs when it started, before any pinning: unpinned runs go back to these. */
const initialCpus = ((): number[] => {
  const list = cpusAllowed('self');
  return list === '?' ? [] : parseCpuList(list);
})();

/** Whether pinned runs are possible here, and if not, why. */
export function pinningSupport(): { ok: true } | { ok: false; reason: string } {
  if (findOnPath('taskset') === null) return { ok: false, reason: 'taskset is not installed' };
  if (initialCpus.length < 2) return { ok: false, reason: `only ${Math.max(1, initialCpus.length)} CPU is available` };
  return { ok: true };
}

/** The layout for `mode`: pinned puts the server on the first allowed CPU and the generator on the rest. */
export function cpuLayout(mode: PinMode): CpuLayout {
  const all = initialCpus.length > 0 ? initialCpus : [0];
  if (mode === 'pinned') {
    const rest = all.slice(1);
    return { server: String(all[0]), generator: rest.join(','), generatorCpus: rest.length };
  }
  return { server: null, generator: all.join(','), generatorCpus: all.length };
}

/**
 * Moves this process, all its threads included (-a), to `layout.generator`. Call it before
 * starting worker threads: new threads inherit the mask of the thread that creates them.
 */
export function pinGenerator(layout: CpuLayout): void {
  if (findOnPath('taskset') === null) return;
  execFileSync('taskset', ['-a', '-p', '-c', layout.generator, String(process.pid)], { stdio: 'ignore' });
}
