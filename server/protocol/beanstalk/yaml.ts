import type { Engine, Job, Tube } from '../../engine/engine.js';
import { COUNTED_COMMANDS } from '../../engine/stats.js';

/** Facts about the process that `stats` shows; the protocol layer gathers them once. */
export interface ServerInfo {
  version: string;
  /** 16 hex characters, new at every start. */
  instanceId: string;
  hostname: string;
  os: string;
  platform: string;
  pid: number;
  maxJobSize: number;
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

const SHOWN_COMMANDS = COUNTED_COMMANDS.filter((c) => c !== 'reserve-job' && c !== 'kick-job');

function seconds(ms: number): number {
  return Math.trunc(ms / 1000);
}

/** `%d.%06d` of a microsecond count. */
function rusage(micros: number): string {
  return `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, '0')}`;
}

/** The body of a `stats` reply: beanstalkd 1.12's 51 keys in its order. */
export function formatServerStats(engine: Engine, info: ServerInfo, now: number): string {
  const s = engine.stats;
  const cpu = process.cpuUsage();
  const binlog = info.binlog();
  const lines = [
    '---',
    `current-jobs-urgent: ${s.urgent}`,
    `current-jobs-ready: ${s.ready}`,
    `current-jobs-reserved: ${s.reserved}`,
    `current-jobs-delayed: ${engine.delayedCount}`,
    `current-jobs-buried: ${s.buried}`,
    ...SHOWN_COMMANDS.map((c) => `cmd-${c}: ${s.commands[c]}`),
    `job-timeouts: ${s.jobTimeouts}`,
    `total-jobs: ${s.totalJobs}`,
    `max-job-size: ${info.maxJobSize}`,
    `current-tubes: ${engine.tubes().length}`,
    `current-connections: ${s.currentConnections}`,
    `current-producers: ${s.producers}`,
    `current-workers: ${s.workers}`,
    `current-waiting: ${s.waiting}`,
    `total-connections: ${s.totalConnections}`,
    `pid: ${info.pid}`,
    `version: "${info.version}"`,
    `rusage-utime: ${rusage(cpu.user)}`,
    `rusage-stime: ${rusage(cpu.system)}`,
    `uptime: ${seconds(now - engine.startedAt)}`,
    `binlog-oldest-index: ${binlog.oldestIndex}`,
    `binlog-current-index: ${binlog.currentIndex}`,
    `binlog-records-migrated: ${binlog.recordsMigrated}`,
    `binlog-records-written: ${binlog.recordsWritten}`,
    `binlog-max-size: ${binlog.maxSize}`,
    `draining: ${engine.draining ? 'true' : 'false'}`,
    `id: ${info.instanceId}`,
    `hostname: ${info.hostname}`,
    `os: ${info.os}`,
    `platform: ${info.platform}`,
  ];
  // Beyond beanstalkd: a binlog that cannot write says so here as well as in the log.
  if (binlog.failure) lines.push(`binlog-error: "${binlog.failure.replace(/["\\\n\r]/g, ' ')}"`);
  return lines.join('\n') + '\n';
}

/** The body of a `stats-tube` reply. */
export function formatTubeStats(tube: Tube, now: number): string {
  const timeLeft = tube.paused ? Math.max(0, seconds(tube.unpauseAt - now)) : 0;
  return (
    `---\nname: ${tube.name}\n` +
    `current-jobs-urgent: ${tube.urgent}\n` +
    `current-jobs-ready: ${tube.ready.size}\n` +
    `current-jobs-reserved: ${tube.reserved}\n` +
    `current-jobs-delayed: ${tube.delayed.size}\n` +
    `current-jobs-buried: ${tube.buried.size}\n` +
    `total-jobs: ${tube.totalJobs}\n` +
    `current-using: ${tube.using}\n` +
    `current-watching: ${tube.watching}\n` +
    `current-waiting: ${tube.waiting.size}\n` +
    `cmd-delete: ${tube.cmdDelete}\n` +
    `cmd-pause-tube: ${tube.cmdPause}\n` +
    `pause: ${seconds(tube.pauseMs)}\n` +
    `pause-time-left: ${timeLeft}\n`
  );
}

/** The body of a `stats-job` reply. */
export function formatJobStats(job: Job, now: number): string {
  const timed = job.state === 'reserved' || job.state === 'delayed';
  return (
    `---\nid: ${job.id}\n` +
    `tube: ${job.tube.name}\n` +
    `state: ${job.state}\n` +
    `pri: ${job.priority}\n` +
    `age: ${seconds(now - job.createdAt)}\n` +
    `delay: ${seconds(job.delayMs)}\n` +
    `ttr: ${seconds(job.ttrMs)}\n` +
    `time-left: ${timed ? seconds(job.deadlineAt - now) : 0}\n` +
    `file: ${job.file}\n` +
    `reserves: ${job.reserves}\n` +
    `timeouts: ${job.timeouts}\n` +
    `releases: ${job.releases}\n` +
    `buries: ${job.buries}\n` +
    `kicks: ${job.kicks}\n`
  );
}

/** The body of a `list-tubes` or `list-tubes-watched` reply. */
export function formatTubeList(tubes: readonly Tube[]): string {
  let out = '---\n';
  for (const tube of tubes) out += `- ${tube.name}\n`;
  return out;
}
