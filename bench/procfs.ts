/** What the harness reads from Linux's /proc: a process's memory, CPU time and CPU mask, and the machine's CPU time. */
import { readFileSync } from 'node:fs';

/** Clock ticks per second in /proc (USER_HZ, 100 on every Linux build we run on). */
const USER_HZ = 100;

/** VmRSS of a process in bytes, NaN when it cannot be read. */
export function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s*(\d+)\s*kB/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m === null ? NaN : Number(m[1]) * 1024;
  } catch {
    return NaN;
  }
}

/** utime + stime of a process (all its threads) in seconds, NaN when it cannot be read. */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name may contain spaces and parentheses: fields are counted after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  } catch {
    return NaN;
  }
}

/** Seconds all CPUs together spent in user and system mode (not idle, not interrupts), NaN off Linux. */
export function machineBusySeconds(): number {
  try {
    const f = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    return (f[0]! + f[1]! + f[2]!) / USER_HZ;
  } catch {
    return NaN;
  }
}

/** The CPUs a process may run on (`Cpus_allowed_list`, e.g. `1-3`), or '?' when unreadable. */
export function cpusAllowed(pid: number | 'self'): string {
  try {
    const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m?.[1] ?? '?';
  } catch {
    return '?';
  }
}

/** A process's command name (`comm`), '' when it cannot be read. */
export function commandName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
  } catch {
    return '';
  }
}

/** CPU seconds (user + system) of this process's children that have exited and been waited for. */
export function childrenCpuSeconds(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / USER_HZ;
  } catch {
    return NaN;
  }
}
