/** Facts about the machine and the code under test, saved with every result so numbers can be compared later. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { REPO_ROOT, findOnPath } from './paths.js';
import { beanstalkdVersion } from './targets.js';

/** Where and what was measured. */
export interface MachineInfo {
  cpuModel: string;
  /** Logical CPUs of the machine, and those this process could use when it started. */
  cores: number;
  availableParallelism: number;
  totalMemoryBytes: number;
  kernel: string;
  node: string;
  /** `beanstalkd -v`, or null when it is not installed. */
  beanstalkd: string | null;
  taskset: boolean;
  gitCommit: string | null;
  /** Uncommitted changes to tracked files when the run started. */
  gitDirty: boolean | null;
}

function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'latin1'));
    if (m !== null) return m[1]!.trim();
  } catch {
    // not Linux
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

function git(args: string[]): string | null {
  // --no-optional-locks: reading status must not rewrite the index of the work tree.
  const r = spawnSync('git', ['--no-optional-locks', ...args], { cwd: REPO_ROOT, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Collects the machine facts (call before pinning: parallelism is read from this process's CPU mask). */
export function machineInfo(): MachineInfo {
  const status = git(['status', '--porcelain', '--untracked-files=no']);
  return {
    cpuModel: cpuModel(),
    cores: os.cpus().length,
    availableParallelism: os.availableParallelism(),
    totalMemoryBytes: os.totalmem(),
    kernel: os.release(),
    node: process.version,
    beanstalkd: beanstalkdVersion(),
    taskset: findOnPath('taskset') !== null,
    gitCommit: git(['rev-parse', 'HEAD']),
    gitDirty: status === null ? null : status !== '',
  };
}
