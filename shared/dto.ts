/** JSON shapes the admin API and socket.io send; the dashboard reads exactly these. */
import type { TubePolicy } from './policy.js';
import type { BuryCause } from './bury-cause.js';
import type { Role } from './roles.js';

export type { BuryCause };

export type JobState = 'ready' | 'reserved' | 'delayed' | 'buried';
export const JOB_STATES: readonly JobState[] = ['ready', 'reserved', 'delayed', 'buried'];

/** `stats` as JSON: beanstalkd's keys (kebab-case, in its order), numbers as numbers. */
export type ServerStatsDto = Record<string, number | string | boolean>;

export interface TubeDto {
  name: string;
  urgent: number;
  ready: number;
  reserved: number;
  delayed: number;
  buried: number;
  totalJobs: number;
  using: number;
  watching: number;
  waiting: number;
  cmdDelete: number;
  cmdPauseTube: number;
  /** Length of the current pause in seconds (0: not paused). */
  pauseSeconds: number;
  pauseTimeLeftSeconds: number;
  /** Paused with no end: until someone unpauses it (a pause of MAX_PAUSE_SECONDS). */
  pausedUntilResumed: boolean;
  /** How long the ready job a worker would get next has waited, in seconds (0: none ready). */
  nextReadyAgeSeconds: number;
  /** The dead-letter limit in force (0: off): the tube's own, or the server's `--dead-letter-after`. */
  deadLetterAfter: number;
  /** The tube's own limit; null when the server's applies. */
  ownDeadLetterAfter: number | null;
  /** The tube's policy and what it does now; null: none. */
  policy: TubePolicyDto | null;
}

/** A tube's policy at work (TubeDto.policy, TubePolicyViewDto.state). */
export interface TubePolicyDto {
  policy: TubePolicy;
  /** Reserves pass the tube by: its concurrency cap is full, or its rate is spent. */
  capHeld: boolean;
  rateHeld: boolean;
  /** How long the cap has been full, in seconds (0: it is not). */
  capFullSeconds: number;
  /** Ready jobs that wait only for the cap or the rate (0 while neither holds). */
  heldReady: number;
  /** Puts refused by the queue cap, and timed-out jobs sent back delayed by the backoff. */
  refusedPuts: number;
  backoffs: number;
}

/** GET and PUT /api/tubes/:name/policy: a tube's policy, which outlives the tube (kept in the binlog). */
export interface TubePolicyViewDto {
  tube: string;
  policy: TubePolicy | null;
  /** Null when the tube has no policy or does not exist now. */
  state: TubePolicyDto | null;
  /** Set by the --policies file: a restart or SIGHUP sets it again from the file. */
  fromFile: boolean;
}

/** GET /api/tube-health: what a tube's counts do not say, for the attention list (tubes with nothing to say are left out). */
export interface TubeHealthDto {
  tube: string;
  /** How long the oldest ready job has existed, in seconds (0: none ready). */
  oldestReadyAgeSeconds: number;
  /** Reserved jobs with less than a fifth of their TTR left. */
  reservedNearTtr: number;
  /** Ready jobs gained over the last five minutes while more came in than went out each minute (0: not rising). */
  backlogRise: number;
}

/** GET and PUT /api/tubes/:name/settings: a tube's settings, which outlive the tube (kept in the binlog). */
export interface TubeSettingsDto {
  tube: string;
  /** In force: `own` when set, else `serverDefault` (0: off). */
  deadLetterAfter: number;
  own: { deadLetterAfter: number } | null;
  serverDefault: { deadLetterAfter: number };
}

/** A job's body made safe for JSON: text when it is valid UTF-8, else base64. */
export type BodyDto =
  | { encoding: 'utf8'; text: string; bytes: number; truncated: boolean }
  | { encoding: 'base64'; base64: string; bytes: number; truncated: boolean };

/** What stats-job shows, plus the body size. */
export interface JobStatsDto {
  id: number;
  tube: string;
  state: JobState;
  priority: number;
  ageSeconds: number;
  delaySeconds: number;
  ttrSeconds: number;
  timeLeftSeconds: number;
  file: number;
  reserves: number;
  timeouts: number;
  releases: number;
  buries: number;
  kicks: number;
  /** The connection holding it while reserved (see /api/connections), else null. */
  reservedBy: number | null;
  /** Cluster mode: the node whose client holds it while reserved (see /api/cluster/nodes), else null. */
  reservedByNode: number | null;
  /** Releases plus timeouts since the job was put or last kicked: what the dead-letter rule counts. */
  strikes: number;
  /** Why a buried job was buried: a worker's bury, or the dead-letter rule on a release or a timeout. */
  buryCause: BuryCause;
  bodyBytes: number;
}

/** GET /api/jobs/:id: the stats and the body (the first BODY_PREVIEW_BYTES; the rest via /body). */
export interface JobDto extends JobStatsDto {
  body: BodyDto;
}

/** One row of a job list: the stats and a short text preview of the body. */
export interface JobSummaryDto extends JobStatsDto {
  preview: string;
}

/** GET /api/search: a page of matches; `next` continues the search (null: every job was looked at). */
/** Where a search matched a job's body: the matched text and up to 60 characters each side ("…" where cut). */
export interface SearchMatchDto {
  before: string;
  text: string;
  after: string;
}

/** A job a search found, with where it matched (null when the search had no text). */
export interface SearchHitDto extends JobSummaryDto {
  match: SearchMatchDto | null;
}

export interface SearchPageDto {
  jobs: SearchHitDto[];
  next: string | null;
  /** Jobs looked at and matched so far, over every page. */
  scanned: number;
  matched: number;
  /** Every job has been looked at: `matched` is the final count, though pages may be left to fetch. */
  complete: boolean;
}

/** GET /api/gearman/search: as SearchPageDto, with Gearman jobs. */
export interface GearmanSearchPageDto {
  jobs: GearmanJobDto[];
  next: string | null;
  scanned: number;
  matched: number;
  complete: boolean;
}

/** An attached beanstalkd server (external: not this one). */
export interface ExternalServerDto {
  id: number;
  address: string;
  /** Attached with --admin-attach, or from the dashboard. */
  source: 'flag' | 'dashboard';
  status: 'unknown' | 'up' | 'down';
  /** Why it is down. */
  error: string | null;
  /** Its `stats` version. */
  version: string | null;
}

/** A job of an external server: what peek and stats-job say (stats as beanstalkd names them). */
export interface ExternalJobDto {
  id: number;
  body: BodyDto;
  stats: Record<string, string | number>;
}

/** GET /api/jobs/:id/next: the job after this one in its tube's list for its state (null: it is the last). */
export interface NextJobDto {
  id: number | null;
  tube: string;
  state: JobState;
}

/** One minute of the server (GET /api/history): rates per second over the minute, and counts at its end. */
export interface MinuteSampleDto {
  /** Epoch ms at the end of the minute. */
  at: number;
  put: number;
  reserve: number;
  delete: number;
  bury: number;
  timeouts: number;
  ready: number;
  reserved: number;
  delayed: number;
  buried: number;
}

/** One minute of a tube (GET /api/tubes/:name/history): counts at its end, jobs in and out during it. */
export interface TubeMinuteDto {
  at: number;
  ready: number;
  buried: number;
  /** Jobs put into the tube, and deleted from it, during the minute. */
  in: number;
  out: number;
}

export interface JobPageDto {
  jobs: JobSummaryDto[];
  /** Cursor for the next page, or null at the end. */
  next: string | null;
}

export interface ConnectionDto {
  id: number;
  /** Peer address (`ip:port`, or `unix`). */
  address: string;
  /** The subject CN of the client certificate it presented over mutual TLS (--tls-ca); null: none. */
  identity: string | null;
  producer: boolean;
  worker: boolean;
  waiting: boolean;
  using: string;
  watching: string[];
  reserved: number[];
  /** Seconds since it connected, and since its last command (which `lastCommand` names). */
  ageSeconds: number;
  idleSeconds: number;
  lastCommand: string;
  /** The jobs it holds, with the seconds each has left (null: held without a TTR, a Gearman worker). */
  holding: { id: number; tube: string; timeLeftSeconds: number | null }[];
}

export interface AdminConfigDto {
  version: string;
  readOnly: boolean;
  /** True when the API wants a token (the dashboard then asks for it). */
  tokenRequired: boolean;
  maxJobSize: number;
  binlog: boolean;
  /** Cluster mode: this node's id; null for a server with jobs of its own. */
  clusterNode: number | null;
}

/**
 * GET /api/me: who the request is from. `user` is a name from --admin-users, `--admin-token` for
 * the admin token, or null when the dashboard needs no token. `role` is what this user may do here
 * (viewer in --admin-read-only mode, whatever the user's own role).
 */
export interface SignedInDto {
  user: string | null;
  role: Role;
}

/** What an audited change was done to. Absent fields do not apply. */
export interface AuditTargetDto {
  tube?: string;
  /** The job ids named (the first 100 of a bulk action's), and how many there were. */
  jobIds?: number[];
  jobCount?: number;
  /** The search that selected the jobs (a bulk action by search), as its fields. */
  search?: Record<string, string | boolean>;
  /** Anything else: the tube a move went to, an attached server's address, a connection id. */
  detail?: string;
}

/** One change made through the dashboard or the API. */
export interface AuditEntryDto {
  /** Increases with every entry (its order); the page cursor. */
  seq: number;
  /** Epoch ms. */
  at: number;
  /** As GET /api/me says it. */
  user: string | null;
  role: Role;
  /** What was done: `job.delete`, `tube.kick`, `bulk.move`, ... */
  action: string;
  target: AuditTargetDto;
  /** The HTTP status answered, the error code when it failed, and how many jobs or tubes it changed when it says. */
  result: { status: number; error?: string; count?: number };
  /** Cluster mode: the node that served it. */
  node?: number;
}

/** GET /api/audit: newest first; `next` is the `before` of the following page (null: no more). */
export interface AuditPageDto {
  entries: AuditEntryDto[];
  next: number | null;
}

/** GET /api/cluster/nodes: one node of the cluster. Times are epoch ms. */
export interface ClusterNodeDto {
  id: number;
  address: string;
  version: string;
  startedAt: number;
  heartbeatAt: number;
  leaseUntil: number;
  connections: number;
  /** When it left or its lease ran out; null while it is a member. */
  goneAt: number | null;
  /** up: heartbeats on time; late: a heartbeat missed, lease not yet out; gone. */
  health: 'up' | 'late' | 'gone';
  /** The node serving this dashboard. */
  self: boolean;
}

/** Per-second rates over the last tick. */
export interface RatesDto {
  put: number;
  reserve: number;
  delete: number;
  release: number;
  bury: number;
  kick: number;
  timeouts: number;
}

export interface StatsTickDto {
  /** Epoch ms of the sample. */
  at: number;
  stats: ServerStatsDto;
  rates: RatesDto;
}

export interface SnapshotDto {
  config: AdminConfigDto;
  stats: ServerStatsDto;
  tubes: TubeDto[];
  /** Recent ticks (up to 15 minutes), oldest first, so a chart starts filled. */
  history: StatsTickDto[];
}

/** One Gearman function, as gearmand's `status` counts it. */
export interface GearmanFunctionDto {
  name: string;
  /** Jobs waiting for a worker (delayed ones included). */
  queued: number;
  /** Jobs a worker holds. */
  running: number;
  /** Connected workers that registered the function, busy or idle. */
  workers: number;
}

/** One Gearman connection, as gearmand's `workers` lists it. */
export interface GearmanWorkerDto {
  /** A number for this connection (gearmand shows its file descriptor). */
  id: number;
  address: string;
  /** What SET_CLIENT_ID said, or `-`. */
  clientId: string;
  functions: string[];
}

/** The Gearman section's live picture (pushed as `gearman:updated`). */
export interface GearmanSnapshotDto {
  functions: GearmanFunctionDto[];
  workers: GearmanWorkerDto[];
}

export type GearmanJobState = 'queued' | 'scheduled' | 'running';
export const GEARMAN_JOB_STATES: readonly GearmanJobState[] = ['queued', 'scheduled', 'running'];

/** A Gearman job (background, or foreground while its client waits). */
export interface GearmanJobDto {
  handle: string;
  function: string;
  /** The client's unique id (text when UTF-8, as the body), empty when none. */
  unique: string;
  state: GearmanJobState;
  priority: 'high' | 'normal' | 'low';
  /** When a scheduled job runs (epoch ms), else null. */
  runAt: number | null;
  ageSeconds: number;
  /** Times a worker took it (a requeue after a worker left or timed out makes it more than 1). */
  grabs: number;
  /** The last WORK_STATUS, as the worker sent it; null before any. */
  status: { numerator: string; denominator: string } | null;
  /** The job's data (what the worker receives). */
  body: BodyDto;
}

export interface GearmanJobPageDto {
  jobs: GearmanJobDto[];
  next: string | null;
}

/** Error body of every 4xx/5xx answer. */
export interface ApiErrorDto {
  error: string;
  message: string;
}

/** What a schedule does with slots that passed while no node was running: see README "Schedules". */
export type MissedSlotPolicy = 'skip' | 'catch-up-once';

/** GET /api/schedules, /api/schedules/:id: a job put on a cron expression. Durations in seconds, as a put's. */
export interface ScheduleDto {
  id: number;
  name: string;
  /** 5 fields (minute precision) or 6 (with seconds first), as the cron parser (croner) reads them. */
  cron: string;
  /** IANA time zone the expression is read in ('UTC', 'Europe/Berlin'). */
  timeZone: string;
  tube: string;
  /** The job's body as text (utf8) or base64. */
  body: string;
  encoding: 'utf8' | 'base64';
  priority: number;
  delaySeconds: number;
  ttrSeconds: number;
  paused: boolean;
  missed: MissedSlotPolicy;
  createdAt: number;
  updatedAt: number;
  /** The next slots (epoch ms), none while paused. */
  nextRuns: number[];
  /** The latest runs, newest first. */
  lastRuns: ScheduleRunDto[];
}

/** One run of a schedule: a slot (or a run-now) and the job it made. */
export interface ScheduleRunDto {
  /** The slot it was for (epoch ms); for a run-now, when it was asked for. */
  slotAt: number;
  firedAt: number;
  /** `slot`: on time; `catch-up`: the one run for slots missed while down; `run-now`: by hand. */
  kind: 'slot' | 'catch-up' | 'run-now';
  /** The job made (null: the put failed, see `error`, or the node stopped between claim and put). */
  jobId: number | null;
  /** The job's state now (null: gone, or no job). */
  jobState: JobState | null;
  error: string | null;
  /** Cluster mode: the node that fired it (0 on a single server). */
  node: number;
}

/** The attention conditions an alert rule can watch (see README "Alerts"): the one list of them. */
export const ALERT_CONDITIONS = ['buried', 'oldest-ready', 'unwatched', 'backlog-rising', 'cap-saturated'] as const;
export type AlertCondition = (typeof ALERT_CONDITIONS)[number];

/** GET /api/alerts: a rule posting a webhook when its condition starts and when it clears, per tube. */
export interface AlertRuleDto {
  id: number;
  name: string;
  condition: AlertCondition;
  /** buried: more than this many jobs; oldest-ready: seconds; backlog-rising: jobs above the low; unwatched, cap-saturated: unused (0). */
  threshold: number;
  /** The condition must hold this long before the rule fires (seconds). */
  forSeconds: number;
  /** Tube name or glob (`*`, `?`); `*` is every tube. */
  tubes: string;
  webhookUrl: string;
  /** `json`: the full event; `slack`: {"text": ...} for Slack-compatible incoming webhooks. */
  format: 'json' | 'slack';
  /** No second notification for the same rule and tube within this many seconds. */
  minIntervalSeconds: number;
  enabled: boolean;
  createdAt: number;
  /** Tubes the rule is firing for now. */
  activeTubes: string[];
}

/** One entry of a rule's history: it fired or cleared for a tube, and how the webhook went. */
export interface AlertEventDto {
  id: number;
  ruleId: number;
  ruleName: string;
  tube: string;
  kind: 'fired' | 'cleared';
  at: number;
  /** What was measured (jobs, or seconds for oldest-ready). */
  value: number;
  /** pending, delivered, failed (retries spent), dropped (queue full), suppressed (min interval). */
  delivery: 'pending' | 'delivered' | 'failed' | 'dropped' | 'suppressed';
  attempts: number;
  lastError: string | null;
  node: number;
}

/** The JSON a rule posts (format `json`); format `slack` posts {"text": message}. */
export interface AlertWebhookPayload {
  event: 'fired' | 'cleared';
  rule: { id: number; name: string; condition: AlertCondition; threshold: number; forSeconds: number };
  tube: string;
  value: number;
  /** ISO 8601. */
  at: string;
  message: string;
  server: string;
}
