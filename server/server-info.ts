/** What `stats` and stats-job show, computed once for every front door (protocol YAML, admin JSON). */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { VERSION } from './version.js';
import { COUNTED_COMMANDS, type JobView, type ServerCounts, type TubeCounts } from './operations/operations.js';

/** Facts about the process that `stats` shows; the protocol layer gathers them once. */
export interface ServerInfo {
  version: string;
  /** 16 hex characters, new at every start. */
  instanceId: string;
  hostname: string;
  os: string;
  platform: string;
  pid: number;
  binlog: () => BinlogStats;
}

export interface BinlogStats {
  oldestIndex: number;
  currentIndex: number;
  recordsMigrated: number;
  recordsWritten: number;
  maxSize: number;
  /** Why the binlog cannot take records right now; shown only while it is so. */
  failure?: string | null;
}

/** This process's facts, with a fresh random instance id; `binlog` reads the binlog's numbers. */
export function processInfo(binlog: ServerInfo['binlog']): ServerInfo {
  return {
    version: VERSION,
    instanceId: randomBytes(8).toString('hex'),
    hostname: os.hostname(),
    os: os.version(),
    platform: os.machine(),
    pid: process.pid,
    binlog,
  };
}

/** The binlog numbers of a process without one: `binlog-max-size` still says -s. */
export function noBinlogStats(maxSize: number): BinlogStats {
  return { oldestIndex: 0, currentIndex: 0, recordsMigrated: 0, recordsWritten: 0, maxSize };
}

const SHOWN_COMMANDS = COUNTED_COMMANDS.filter((c) => c !== 'reserve-job' && c !== 'kick-job');

export function seconds(ms: number): number {
  return Math.trunc(ms / 1000);
}


/** A `stats` value; the object form is for values whose YAML text is not their JSON value. */
export type StatValue = number | boolean | string | { yaml: string; json: number | string };

function quoted(text: string): StatValue {
  return { yaml: `"${text}"`, json: text };
}

/** `%d.%06d` seconds of a microsecond count, and the same as a number for JSON. */
function rusage(micros: number): StatValue {
  return { yaml: `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, '0')}`, json: micros / 1e6 };
}

/**
 * beanstalkd 1.12's 51 `stats` keys in its order, with their values; the protocol prints them
 * as YAML and the admin API sends them as JSON, so both show the same numbers.
 */
export function serverStatsEntries(s: ServerCounts, info: ServerInfo, now: number): [string, StatValue][] {
  const cpu = process.cpuUsage();
  const binlog = info.binlog();
  const entries: [string, StatValue][] = [
    ['current-jobs-urgent', s.urgent],
    ['current-jobs-ready', s.ready],
    ['current-jobs-reserved', s.reserved],
    ['current-jobs-delayed', s.delayed],
    ['current-jobs-buried', s.buried],
    ...SHOWN_COMMANDS.map((c): [string, StatValue] => [`cmd-${c}`, s.operations[c]]),
    ['job-timeouts', s.jobTimeouts],
    ['total-jobs', s.totalJobs],
    ['max-job-size', s.maxJobSize],
    ['current-tubes', s.tubes],
    ['current-connections', s.currentConnections],
    ['current-producers', s.producers],
    ['current-workers', s.workers],
    ['current-waiting', s.waiting],
    ['total-connections', s.totalConnections],
    ['pid', info.pid],
    ['version', quoted(info.version)],
    ['rusage-utime', rusage(cpu.user)],
    ['rusage-stime', rusage(cpu.system)],
    ['uptime', seconds(now - s.startedAt)],
    ['binlog-oldest-index', binlog.oldestIndex],
    ['binlog-current-index', binlog.currentIndex],
    ['binlog-records-migrated', binlog.recordsMigrated],
    ['binlog-records-written', binlog.recordsWritten],
    ['binlog-max-size', binlog.maxSize],
    ['draining', s.draining],
    ['id', info.instanceId],
    ['hostname', info.hostname],
    ['os', info.os],
    ['platform', info.platform],
  ];
  // Beyond beanstalkd: a binlog that cannot write says so here as well as in the log.
  if (binlog.failure) entries.push(['binlog-error', quoted(binlog.failure.replace(/["\\\n\r]/g, ' '))]);
  return entries;
}

/** A tube's pause-time-left in whole seconds. */
export function pauseTimeLeft(tube: TubeCounts, now: number): number {
  return tube.pauseMs > 0 ? Math.max(0, seconds(tube.unpauseAt - now)) : 0;
}

/** A job's age and time-left in whole seconds, as stats-job shows them. */
export function jobTimes(job: JobView, now: number): { age: number; timeLeft: number } {
  // A job held without a TTR (a Gearman worker's) has no time left to show.
  const timed = (job.state === 'reserved' || job.state === 'delayed') && job.deadlineAt !== Number.POSITIVE_INFINITY;
  return { age: seconds(now - job.createdAt), timeLeft: timed ? seconds(job.deadlineAt - now) : 0 };
}

