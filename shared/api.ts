/** REST paths and request bodies of the admin API (all JSON, under /api). */
import type { AlertCondition } from './dto.js';

export const API = {
  config: '/api/config',
  stats: '/api/stats',
  tubes: '/api/tubes',
  tube: (name: string) => `/api/tubes/${encodeURIComponent(name)}`,
  tubeJobs: (name: string) => `/api/tubes/${encodeURIComponent(name)}/jobs`,
  tubeKick: (name: string) => `/api/tubes/${encodeURIComponent(name)}/kick`,
  tubePause: (name: string) => `/api/tubes/${encodeURIComponent(name)}/pause`,
  /** POST {bound}: kicks up to `bound` jobs in every tube; answers {count} of jobs kicked. */
  allTubesKick: '/api/all-tubes/kick',
  /** POST {seconds}: pauses every tube (0 unpauses); answers {count} of tubes. */
  allTubesPause: '/api/all-tubes/pause',
  tubeMove: (name: string) => `/api/tubes/${encodeURIComponent(name)}/move`,
  /** GET a tube's settings; PUT TubeSettingsRequest (the tube need not exist). */
  tubeSettings: (name: string) => `/api/tubes/${encodeURIComponent(name)}/settings`,
  /** GET a tube's policy; PUT TubePolicyRequest (the tube need not exist); DELETE clears it. */
  tubePolicy: (name: string) => `/api/tubes/${encodeURIComponent(name)}/policy`,
  job: (id: number) => `/api/jobs/${id}`,
  jobBody: (id: number) => `/api/jobs/${id}/body`,
  jobKick: (id: number) => `/api/jobs/${id}/kick`,
  jobHistory: (id: number) => `/api/jobs/${id}/history`,
  jobNext: (id: number) => `/api/jobs/${id}/next`,
  connections: '/api/connections',
  /** GET ?minutes=N (default and most 10080, 7 days): the server's minute samples. */
  history: '/api/history',
  /** GET: ClusterNodeDto[] (cluster mode only; 404 otherwise). */
  clusterNodes: '/api/cluster/nodes',
  /** GET: TubeHealthDto[] (oldest ready job, reservations near their TTR, rising backlog). */
  tubeHealth: '/api/tube-health',
  tubeHistory: (name: string) => `/api/tubes/${encodeURIComponent(name)}/history`,
  /** Other beanstalkd servers (--admin-attach, or POST {address}); /api/external/:id/... for each. */
  external: '/api/external',
  externalServer: (id: number) => `/api/external/${id}`,
  externalStats: (id: number) => `/api/external/${id}/stats`,
  externalTubes: (id: number) => `/api/external/${id}/tubes`,
  externalPeek: (id: number, tube: string) => `/api/external/${id}/tubes/${encodeURIComponent(tube)}/peek`,
  externalPut: (id: number, tube: string) => `/api/external/${id}/tubes/${encodeURIComponent(tube)}/jobs`,
  externalKick: (id: number, tube: string) => `/api/external/${id}/tubes/${encodeURIComponent(tube)}/kick`,
  externalPause: (id: number, tube: string) => `/api/external/${id}/tubes/${encodeURIComponent(tube)}/pause`,
  externalJob: (id: number, job: number) => `/api/external/${id}/jobs/${job}`,
  externalJobKick: (id: number, job: number) => `/api/external/${id}/jobs/${job}/kick`,
  /**
   * GET: `q` (text, or a pattern with `regex=true`), `tube`, `state`, `ignoreCase`, `wholeWord`, `limit`;
   * the next page with `next=TOKEN`. DELETE /api/search/TOKEN ends a search early.
   */
  search: '/api/search',
  /** POST BulkRequest: kick, delete or move many jobs. */
  bulk: '/api/bulk',
  gearman: '/api/gearman',
  /** A function's jobs: GET with `function` (any name, the empty one too), `state`, `limit`, `cursor`. */
  gearmanJobs: '/api/gearman/jobs',
  gearmanJob: (handle: string) => `/api/gearman/jobs/${encodeURIComponent(handle)}`,
  /** GET: as /api/search, with `function` and `state` queued | scheduled | running; matched against the job's data. */
  gearmanSearch: '/api/gearman/search',
  /** POST {action: 'delete', handles? | search?}: cancels many queued jobs (running ones are skipped). */
  gearmanBulk: '/api/gearman/bulk',
  gearmanJobHistory: (handle: string) => `/api/gearman/jobs/${encodeURIComponent(handle)}/history`,
  /** GET a Gearman function's policy; PUT TubePolicyRequest; DELETE clears it. */
  gearmanFunctionPolicy: (name: string) => `/api/gearman/functions/${encodeURIComponent(name)}/policy`,
  /** GET: SignedInDto, who this request's token is and what it may do. */
  me: '/api/me',
  /** GET ?limit=N&before=SEQ: AuditPageDto, the changes made through the API, newest first. */
  audit: '/api/audit',
  /** GET: ScheduleDto[]; POST ScheduleRequest: a new schedule (201). */
  schedules: '/api/schedules',
  /** GET a ScheduleDto; PATCH part of a ScheduleRequest; DELETE. */
  schedule: (id: number) => `/api/schedules/${id}`,
  /** POST: puts the schedule's job now (paused or not); answers the ScheduleRunDto. */
  scheduleRun: (id: number) => `/api/schedules/${id}/run`,
  /** GET ?cron=&timeZone=: whether the expression parses, and its next runs (CronPreviewDto). */
  cronPreview: '/api/schedules/preview',
  /** GET: AlertRuleDto[]; POST AlertRuleRequest (201). */
  alerts: '/api/alerts',
  /** GET an AlertRuleDto; PATCH part of an AlertRuleRequest; DELETE. */
  alert: (id: number) => `/api/alerts/${id}`,
  /** GET: AlertEventDto[], newest first (?rule=ID for one rule's). */
  alertHistory: '/api/alerts/history',
} as const;

/** Bodies longer than this come with GET /api/jobs/:id only in part; the rest is fetched on demand. */
export const BODY_PREVIEW_BYTES = 64 * 1024;

/** The header (or socket.io auth field `token`) that carries --admin-token. */
export const TOKEN_HEADER = 'authorization';

/**
 * POST /api/tubes/:name/jobs. `body` is text, or base64 with encoding 'base64'. Durations are in
 * seconds; `delay` and `ttr` (the protocol's words) are accepted for `delaySeconds` and `ttrSeconds`.
 */
export interface PutJobRequest {
  body: string;
  encoding?: 'utf8' | 'base64';
  priority?: number;
  delaySeconds?: number;
  ttrSeconds?: number;
}

/** PATCH /api/jobs/:id: any subset (`delay` and `ttr` as for a put). A buried job stays buried until kicked. */
export interface EditJobRequest {
  body?: string;
  encoding?: 'utf8' | 'base64';
  priority?: number;
  ttrSeconds?: number;
  delaySeconds?: number;
  tube?: string;
  /** Kick the job (buried or delayed) after saving, in the same request. */
  kick?: boolean;
}

/** PUT /api/tubes/:name/settings. `deadLetterAfter`: 0 turns the rule off here, null goes back to the server's. */
export interface TubeSettingsRequest {
  deadLetterAfter: number | null;
}

/**
 * PUT /api/tubes/:name/policy: the limits to set, each absent or null for none (a policy with
 * none is cleared). `rate.burst` absent: one second's worth.
 */
export interface TubePolicyRequest {
  concurrency?: number | null;
  rate?: { perSecond: number; burst?: number } | null;
  queueCap?: number | null;
  timeoutBackoff?: { baseMs: number; factor?: number; maxMs: number; jitter?: number } | null;
}

/** What a search or a bulk action selects: body `q` (a pattern with `regex`), `tube`, `state`. */
export interface SearchSpec {
  q?: string;
  regex?: boolean;
  /** Default: true for plain text, false for a pattern. */
  ignoreCase?: boolean;
  /** Only whole words: "4711" does not match in "47117" (default false). */
  wholeWord?: boolean;
  tube?: string;
  state?: 'ready' | 'delayed' | 'buried' | 'reserved';
}

/** POST /api/bulk: the jobs by id, or every match of a search; `to` for a move. */
export interface BulkRequest {
  action: 'kick' | 'delete' | 'move';
  to?: string;
  ids?: number[];
  search?: SearchSpec;
}

/** A search of Gearman jobs: data matched as SearchSpec's bodies, in one function and state. */
export interface GearmanSearchSpec {
  q?: string;
  regex?: boolean;
  ignoreCase?: boolean;
  function?: string;
  state?: 'queued' | 'scheduled' | 'running';
}

/** POST /api/gearman/bulk: cancels queued or scheduled jobs by handle, or every match of a search. */
export interface GearmanBulkRequest {
  action: 'delete';
  handles?: string[];
  search?: GearmanSearchSpec;
}

/** What a bulk action did: jobs changed, and jobs it could not act on (gone, held by a worker, not kickable). */
export interface BulkResponse {
  count: number;
  skipped: number;
  /** False when the selection was cut short (over a million matches, or the request was abandoned). */
  complete: boolean;
}

export interface KickTubeRequest {
  bound: number;
}

/** A pause for `seconds` (0 unpauses), or until an unpause (a pause of MAX_PAUSE_SECONDS). */
export type PauseTubeRequest = { seconds: number } | { untilResumed: true };

export interface MoveJobsRequest {
  to: string;
  state: 'ready' | 'delayed' | 'buried';
  limit: number;
}

export interface CountResponse {
  count: number;
}

/**
 * POST /api/schedules (PATCH takes any subset). The job's fields are a put's (PutJobRequest):
 * seconds for durations, `body` as text or base64.
 */
export interface ScheduleRequest {
  name: string;
  cron: string;
  /** IANA zone; default UTC. */
  timeZone?: string;
  tube: string;
  body: string;
  encoding?: 'utf8' | 'base64';
  priority?: number;
  delaySeconds?: number;
  ttrSeconds?: number;
  paused?: boolean;
  /** Default 'skip'. */
  missed?: 'skip' | 'catch-up-once';
}

/** POST /api/schedules/preview's answer: the next runs of an expression, or why it does not parse. */
export type CronPreviewDto = { ok: true; nextRuns: number[] } | { ok: false; message: string };

/** POST /api/alerts (PATCH takes any subset). Durations in seconds. */
export interface AlertRuleRequest {
  name: string;
  condition: AlertCondition;
  threshold?: number;
  forSeconds?: number;
  /** Tube name or glob; default '*'. */
  tubes?: string;
  webhookUrl: string;
  format?: 'json' | 'slack';
  minIntervalSeconds?: number;
  enabled?: boolean;
}
