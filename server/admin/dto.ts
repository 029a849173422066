import type { TubePolicyState } from '../../shared/policy.js';
import { MAX_PAUSE_SECONDS } from '../../shared/limits.js';
import type {
  BodyDto,
  ConnectionDto,
  GearmanJobDto,
  JobDto,
  JobSummaryDto,
  JobStatsDto,
  ServerStatsDto,
  TubeDto,
  TubePolicyDto,
} from '../../shared/dto.js';
import type { GearmanJobRecord } from '../gearman/view.js';
import { BODY_PREVIEW_BYTES } from '../../shared/api.js';
import type { JobSnapshot, JobView, ServerCounts, SessionView, TubeCounts } from '../operations/operations.js';
import { jobTimes, pauseTimeLeft, seconds, serverStatsEntries, type ServerInfo } from '../server-info.js';

/** The operations' snapshots as the JSON the dashboard reads (shared/dto.ts). */

export function statsDto(counts: ServerCounts, info: ServerInfo, now: number): ServerStatsDto {
  const out: ServerStatsDto = {};
  for (const [key, value] of serverStatsEntries(counts, info, now)) out[key] = typeof value === 'object' ? value.json : value;
  return out;
}

export function tubeDto(tube: TubeCounts, now: number): TubeDto {
  return {
    name: tube.name,
    urgent: tube.urgent,
    ready: tube.ready,
    reserved: tube.reserved,
    delayed: tube.delayed,
    buried: tube.buried,
    totalJobs: tube.totalJobs,
    using: tube.using,
    watching: tube.watching,
    waiting: tube.waiting,
    cmdDelete: tube.deletes,
    cmdPauseTube: tube.pauses,
    pauseSeconds: seconds(tube.pauseMs),
    pauseTimeLeftSeconds: pauseTimeLeft(tube, now),
    pausedUntilResumed: tube.pauseMs >= MAX_PAUSE_SECONDS * 1000 && tube.unpauseAt > now,
    nextReadyAgeSeconds: tube.nextReadyCreatedAt === 0 ? 0 : Math.max(0, Math.floor((now - tube.nextReadyCreatedAt) / 1000)),
    deadLetterAfter: tube.deadLetterAfter,
    ownDeadLetterAfter: tube.ownSettings?.deadLetterAfter ?? null,
    policy: tubePolicyDto(tube.policy, tube.ready, now),
  };
}

/** A tube's policy at work, for the dashboard; `ready`: the tube's ready jobs. */
export function tubePolicyDto(state: TubePolicyState | null, ready: number, now: number): TubePolicyDto | null {
  if (state === null) return null;
  const { policy, capHeld, rateHeld, capFullSince, refusedPuts, backoffs } = state;
  const capFullSeconds = capFullSince === 0 ? 0 : Math.max(0, Math.floor((now - capFullSince) / 1000));
  return { policy, capHeld, rateHeld, capFullSeconds, heldReady: capHeld || rateHeld ? ready : 0, refusedPuts, backoffs };
}

export function jobStatsDto(job: JobView, now: number): JobStatsDto {
  const { age, timeLeft } = jobTimes(job, now);
  return {
    id: job.id,
    tube: job.tube,
    state: job.state,
    priority: job.priority,
    ageSeconds: age,
    delaySeconds: seconds(job.delayMs),
    ttrSeconds: seconds(job.ttrMs),
    timeLeftSeconds: timeLeft,
    file: job.file,
    reserves: job.reserves,
    timeouts: job.timeouts,
    releases: job.releases,
    buries: job.buries,
    kicks: job.kicks,
    reservedBy: job.reservedBy === 0 ? null : job.reservedBy,
    reservedByNode: job.holderNode === 0 ? null : job.holderNode,
    strikes: job.strikes,
    buryCause: job.buryCause,
    bodyBytes: job.bodyLength,
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Text when the bytes are valid UTF-8, else base64: binary bodies cross JSON intact. */
export function bodyDto(body: Buffer, limit = BODY_PREVIEW_BYTES): BodyDto {
  const truncated = body.length > limit;
  let part = truncated ? body.subarray(0, limit) : body;
  try {
    // A preview cut in the middle of a character is still text: drop the partial character.
    if (truncated) part = part.subarray(0, utf8Boundary(part));
    return { encoding: 'utf8', text: utf8.decode(part), bytes: body.length, truncated };
  } catch {
    return { encoding: 'base64', base64: part.toString('base64'), bytes: body.length, truncated };
  }
}

/** The length of `buf` without a trailing incomplete UTF-8 sequence. */
function utf8Boundary(buf: Buffer): number {
  let i = buf.length - 1;
  let back = 0;
  while (i >= 0 && back < 3 && (buf[i]! & 0xc0) === 0x80) {
    i--;
    back++;
  }
  if (i < 0) return buf.length;
  const lead = buf[i]!;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return i + need > buf.length ? i : buf.length;
}

export function jobDto(job: JobSnapshot, now: number): JobDto {
  return { ...jobStatsDto(job, now), body: bodyDto(job.body) };
}

const PREVIEW_CHARS = 120;

export function jobSummaryDto(job: JobSnapshot, now: number): JobSummaryDto {
  const head = job.body.subarray(0, PREVIEW_CHARS * 4);
  return { ...jobStatsDto(job, now), preview: head.toString('utf8').slice(0, PREVIEW_CHARS) };
}

export function connectionDto(session: SessionView, now: number): ConnectionDto {
  return {
    ageSeconds: Math.max(0, Math.floor((now - session.openedAt) / 1000)),
    idleSeconds: Math.max(0, Math.floor((now - session.lastCommandAt) / 1000)),
    lastCommand: session.lastCommand,
    holding: session.holding.map((h) => ({
      id: h.id,
      tube: h.tube,
      timeLeftSeconds: h.deadlineAt === Number.POSITIVE_INFINITY ? null : Math.max(0, Math.ceil((h.deadlineAt - now) / 1000)),
    })),
    id: session.id,
    address: session.peer,
    identity: session.identity,
    producer: session.producer,
    worker: session.worker,
    waiting: session.waiting,
    using: session.using,
    watching: session.watching,
    reserved: session.reserved,
  };
}

/** A Gearman job as the dashboard shows it: its data and unique id made safe for JSON like a body. */
/** `now`: epoch ms, the clock the jobs' creation times were read from. */
export function gearmanJobDto(job: GearmanJobRecord, now: number): GearmanJobDto {
  const unique = bodyDto(job.unique);
  return {
    handle: job.handle,
    function: job.function,
    unique: unique.encoding === 'utf8' ? unique.text : `base64:${unique.base64}`,
    state: job.state,
    priority: job.priority,
    runAt: job.runAt,
    ageSeconds: Math.max(0, seconds(now - job.createdAt)),
    grabs: job.grabs,
    status: job.status,
    body: bodyDto(job.data),
  };
}
