import type { JobView, ServerCounts, TubeCounts } from '../../operations/operations.js';
import { jobTimes, pauseTimeLeft, seconds, serverStatsEntries, type ServerInfo } from '../../server-info.js';

export type { BinlogStats, ServerInfo } from '../../server-info.js';

/** The body of a `stats` reply. */
export function formatServerStats(counts: ServerCounts, info: ServerInfo, now: number): string {
  let out = '---\n';
  for (const [key, value] of serverStatsEntries(counts, info, now)) {
    out += `${key}: ${typeof value === 'object' ? value.yaml : String(value)}\n`;
  }
  return out;
}

/** The body of a `stats-tube` reply. */
export function formatTubeStats(tube: TubeCounts, now: number): string {
  const timeLeft = pauseTimeLeft(tube, now);
  return (
    `---\nname: ${tube.name}\n` +
    `current-jobs-urgent: ${tube.urgent}\n` +
    `current-jobs-ready: ${tube.ready}\n` +
    `current-jobs-reserved: ${tube.reserved}\n` +
    `current-jobs-delayed: ${tube.delayed}\n` +
    `current-jobs-buried: ${tube.buried}\n` +
    `total-jobs: ${tube.totalJobs}\n` +
    `current-using: ${tube.using}\n` +
    `current-watching: ${tube.watching}\n` +
    `current-waiting: ${tube.waiting}\n` +
    `cmd-delete: ${tube.deletes}\n` +
    `cmd-pause-tube: ${tube.pauses}\n` +
    `pause: ${seconds(tube.pauseMs)}\n` +
    `pause-time-left: ${timeLeft}\n`
  );
}

/** The body of a `stats-job` reply. */
export function formatJobStats(job: JobView, now: number): string {
  const { age, timeLeft } = jobTimes(job, now);
  return (
    `---\nid: ${job.id}\n` +
    `tube: ${job.tube}\n` +
    `state: ${job.state}\n` +
    `pri: ${job.priority}\n` +
    `age: ${age}\n` +
    `delay: ${seconds(job.delayMs)}\n` +
    `ttr: ${seconds(job.ttrMs)}\n` +
    `time-left: ${timeLeft}\n` +
    `file: ${job.file}\n` +
    `reserves: ${job.reserves}\n` +
    `timeouts: ${job.timeouts}\n` +
    `releases: ${job.releases}\n` +
    `buries: ${job.buries}\n` +
    `kicks: ${job.kicks}\n`
  );
}

/** The body of a `list-tubes` or `list-tubes-watched` reply. */
export function formatTubeList(names: readonly string[]): string {
  let out = '---\n';
  for (const name of names) out += `- ${name}\n`;
  return out;
}
