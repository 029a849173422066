/** JSON shapes the admin API and socket.io send; the dashboard reads exactly these. */

export type JobStateName = 'ready' | 'reserved' | 'delayed' | 'buried';
export const JOB_STATES: readonly JobStateName[] = ['ready', 'reserved', 'delayed', 'buried'];

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
}

/** A job's body made safe for JSON: text when it is valid UTF-8, else base64. */
export type BodyDto =
  | { encoding: 'utf8'; text: string; bytes: number; truncated: boolean }
  | { encoding: 'base64'; base64: string; bytes: number; truncated: boolean };

/** What stats-job shows, plus the body size. */
export interface JobStatsDto {
  id: number;
  tube: string;
  state: JobStateName;
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

export interface JobPageDto {
  jobs: JobSummaryDto[];
  /** Cursor for the next page, or null at the end. */
  next: string | null;
}

export interface ConnectionDto {
  id: number;
  /** Peer address (`ip:port`, or `unix`). */
  address: string;
  producer: boolean;
  worker: boolean;
  waiting: boolean;
  using: string;
  watching: string[];
  reserved: number[];
}

export interface AdminConfigDto {
  version: string;
  readOnly: boolean;
  /** True when the API wants a token (the dashboard then asks for it). */
  tokenRequired: boolean;
  maxJobSize: number;
  binlog: boolean;
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

/** Error body of every 4xx/5xx answer. */
export interface ApiErrorDto {
  error: string;
  message: string;
}
