/** JSON shapes the admin API and socket.io send; the dashboard reads exactly these. */
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
