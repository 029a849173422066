/** The admin REST API: the only module that calls fetch. */

import {
  API,
  TOKEN_HEADER,
  type CountResponse,
  type EditJobRequest,
  type KickTubeRequest,
  type MoveJobsRequest,
  type PauseTubeRequest,
  type PutJobRequest,
  type TubeSettingsRequest,
  type TubePolicyRequest,
  type BulkRequest,
  type GearmanBulkRequest,
  type GearmanSearchSpec,
  type BulkResponse,
  type SearchSpec,
  type ScheduleRequest,
  type CronPreviewDto,
  type AlertRuleRequest,
} from '../../shared/api.js';
import { withBase } from './base.js';
import type {
  AdminConfigDto,
  ClusterNodeDto,
  ApiErrorDto,
  ConnectionDto,
  GearmanJobPageDto,
  GearmanSearchPageDto,
  GearmanJobState,
  GearmanSnapshotDto,
  JobDto,
  JobPageDto,
  JobState,
  ServerStatsDto,
  TubeDto,
  TubeSettingsDto,
  TubePolicyViewDto,
  SearchPageDto,
  NextJobDto,
  MinuteSampleDto,
  TubeHealthDto,
  TubeMinuteDto,
  ExternalJobDto,
  ExternalServerDto,
  AuditPageDto,
  SignedInDto,
  ScheduleDto,
  ScheduleRunDto,
  AlertRuleDto,
  AlertEventDto,
} from '../../shared/dto.js';
import type { JobHistoryDto } from '../../shared/history.js';

/** A failed request: `status` is the HTTP status, 0 when the server could not be reached. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

interface ApiHooks {
  getToken(): string | null;
  /** Called on every 401 answer, before the request's promise rejects. */
  onUnauthorized(): void;
}

let hooks: ApiHooks = { getToken: () => null, onUnauthorized: () => {} };

/** Wires the token store in (done once, by the session). */
export function configureApi(next: ApiHooks): void {
  hooks = next;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

function isApiErrorDto(value: unknown): value is ApiErrorDto {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Record<string, unknown>).error === 'string' &&
    typeof (value as Record<string, unknown>).message === 'string'
  );
}

async function send(method: Method, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = hooks.getToken();
  if (token !== null && token !== '') headers[TOKEN_HEADER] = `Bearer ${token}`;
  const init: RequestInit = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (signal !== undefined) init.signal = signal;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response: Response;
  try {
    response = await fetch(withBase(path), init);
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError(0, 'UNREACHABLE', 'The server cannot be reached.');
  }
  if (response.ok) return response;
  let code = `HTTP_${response.status}`;
  let message = response.statusText || `Request failed (${response.status})`;
  try {
    const parsed: unknown = await response.json();
    if (isApiErrorDto(parsed)) {
      code = parsed.error;
      message = parsed.message;
    }
  } catch {
    // Not JSON (a proxy's error page): keep the status line.
  }
  if (response.status === 401) hooks.onUnauthorized();
  throw new ApiError(response.status, code, message);
}

async function json<T>(method: Method, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const response = await send(method, path, body, signal);
  const parsed: unknown = await response.json();
  return parsed as T;
}

/** For mutations whose answer the UI does not need (live events bring the new state). */
async function discard(method: Method, path: string, body?: unknown): Promise<void> {
  const response = await send(method, path, body);
  await response.arrayBuffer();
}

/** A search's query string: `regex`, `ignoreCase` and `wholeWord` as the API's flags. */
function searchQuery(spec: SearchSpec, limit: number): Record<string, string | number | undefined> {
  return {
    q: spec.q,
    regex: spec.regex === true ? 'true' : undefined,
    ignoreCase: spec.ignoreCase === undefined ? undefined : String(spec.ignoreCase),
    wholeWord: spec.wholeWord === true ? 'true' : undefined,
    tube: spec.tube,
    state: spec.state,
    limit,
  };
}

function withQuery(path: string, params: Record<string, string | number | null | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined) query.set(key, String(value));
  }
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}

/** Whose policy: a beanstalkd tube's or a Gearman function's. */
export type PolicyRealm = 'tubes' | 'functions';

function policyPath(realm: PolicyRealm, name: string): string {
  return realm === 'tubes' ? API.tubePolicy(name) : API.gearmanFunctionPolicy(name);
}

export const api = {
  config: (signal?: AbortSignal) => json<AdminConfigDto>('GET', API.config, undefined, signal),
  stats: (signal?: AbortSignal) => json<ServerStatsDto>('GET', API.stats, undefined, signal),
  tubes: (signal?: AbortSignal) => json<TubeDto[]>('GET', API.tubes, undefined, signal),
  tube: (name: string, signal?: AbortSignal) => json<TubeDto>('GET', API.tube(name), undefined, signal),
  tubeJobs: (
    name: string,
    query: { state: JobState; limit: number; cursor: string | null },
    signal?: AbortSignal,
  ) => json<JobPageDto>('GET', withQuery(API.tubeJobs(name), query), undefined, signal),
  job: (id: number, signal?: AbortSignal) => json<JobDto>('GET', API.job(id), undefined, signal),
  nextJob: (id: number) => json<NextJobDto>('GET', API.jobNext(id)),
  jobHistory: (id: number, signal?: AbortSignal) => json<JobHistoryDto>('GET', API.jobHistory(id), undefined, signal),
  gearmanJobHistory: (handle: string, signal?: AbortSignal) =>
    json<JobHistoryDto>('GET', API.gearmanJobHistory(handle), undefined, signal),
  /** The whole body as bytes (GET /api/jobs/:id/body). */
  jobBody: async (id: number, signal?: AbortSignal): Promise<Uint8Array<ArrayBuffer>> => {
    const response = await send('GET', API.jobBody(id), undefined, signal);
    return new Uint8Array(await response.arrayBuffer());
  },
  putJob: (tube: string, request: PutJobRequest) => json<JobDto>('POST', API.tubeJobs(tube), request),
  deleteJob: (id: number) => discard('DELETE', API.job(id)),
  kickJob: (id: number) => discard('POST', API.jobKick(id)),
  editJob: (id: number, request: EditJobRequest) => json<JobDto>('PATCH', API.job(id), request),
  kickAllTubes: (bound: number) => json<CountResponse>('POST', API.allTubesKick, { bound }),
  pauseAllTubes: (seconds: number) => json<CountResponse>('POST', API.allTubesPause, { seconds }),
  kickTube: (name: string, request: KickTubeRequest) => json<CountResponse>('POST', API.tubeKick(name), request),
  pauseTube: (name: string, request: PauseTubeRequest) => discard('POST', API.tubePause(name), request),
  tubeSettings: (name: string, signal?: AbortSignal) => json<TubeSettingsDto>('GET', API.tubeSettings(name), undefined, signal),
  setTubeSettings: (name: string, request: TubeSettingsRequest) => json<TubeSettingsDto>('PUT', API.tubeSettings(name), request),
  /** A tube's policy, or a Gearman function's (`realm`). */
  policy: (realm: PolicyRealm, name: string, signal?: AbortSignal) => json<TubePolicyViewDto>('GET', policyPath(realm, name), undefined, signal),
  setPolicy: (realm: PolicyRealm, name: string, request: TubePolicyRequest) => json<TubePolicyViewDto>('PUT', policyPath(realm, name), request),
  clearPolicy: (realm: PolicyRealm, name: string) => json<TubePolicyViewDto>('DELETE', policyPath(realm, name)),
  clearTubeState: (name: string, state: JobState) =>
    json<CountResponse>('DELETE', withQuery(API.tubeJobs(name), { state })),
  moveJobs: (name: string, request: MoveJobsRequest) => json<CountResponse>('POST', API.tubeMove(name), request),
  search: (spec: SearchSpec, limit: number, signal?: AbortSignal) =>
    json<SearchPageDto>('GET', withQuery(API.search, searchQuery(spec, limit)), undefined, signal),
  searchNext: (token: string, limit: number, signal?: AbortSignal) =>
    json<SearchPageDto>('GET', withQuery(API.search, { next: token, limit }), undefined, signal),
  bulk: (request: BulkRequest) => json<BulkResponse>('POST', API.bulk, request),
  gearmanSearch: (spec: GearmanSearchSpec, limit: number, signal?: AbortSignal) =>
    json<GearmanSearchPageDto>(
      'GET',
      withQuery(API.gearmanSearch, { q: spec.q, regex: spec.regex === true ? 'true' : undefined, function: spec.function, state: spec.state, limit }),
      undefined,
      signal,
    ),
  gearmanSearchNext: (token: string, limit: number, signal?: AbortSignal) =>
    json<GearmanSearchPageDto>('GET', withQuery(API.gearmanSearch, { next: token, limit }), undefined, signal),
  gearmanBulk: (request: GearmanBulkRequest) => json<BulkResponse>('POST', API.gearmanBulk, request),
  externalServers: (signal?: AbortSignal) => json<ExternalServerDto[]>('GET', API.external, undefined, signal),
  attachServer: (address: string) => json<ExternalServerDto>('POST', API.external, { address }),
  detachServer: (id: number) => discard('DELETE', API.externalServer(id)),
  externalStats: (id: number, signal?: AbortSignal) => json<Record<string, string | number>>('GET', API.externalStats(id), undefined, signal),
  externalTubes: (id: number, signal?: AbortSignal) => json<Record<string, string | number>[]>('GET', API.externalTubes(id), undefined, signal),
  externalPeek: (id: number, tube: string, state: 'ready' | 'delayed' | 'buried') =>
    json<ExternalJobDto | null>('GET', withQuery(API.externalPeek(id, tube), { state })),
  externalPut: (id: number, tube: string, request: { body: string; priority: number; delay: number; ttr: number }) =>
    json<{ id: number }>('POST', API.externalPut(id, tube), request),
  externalKick: (id: number, tube: string, bound: number) => json<CountResponse>('POST', API.externalKick(id, tube), { bound }),
  externalPause: (id: number, tube: string, seconds: number) => discard('POST', API.externalPause(id, tube), { seconds }),
  externalDeleteJob: (id: number, job: number) => discard('DELETE', API.externalJob(id, job)),
  externalKickJob: (id: number, job: number) => discard('POST', API.externalJobKick(id, job)),
  closeConnection: (id: number) => discard('DELETE', `${API.connections}/${id}`),
  history: (minutes: number, signal?: AbortSignal) => json<MinuteSampleDto[]>('GET', withQuery(API.history, { minutes }), undefined, signal),
  clusterNodes: (signal?: AbortSignal) => json<ClusterNodeDto[]>('GET', API.clusterNodes, undefined, signal),
  tubeHealth: (signal?: AbortSignal) => json<TubeHealthDto[]>('GET', API.tubeHealth, undefined, signal),
  tubeHistory: (name: string, signal?: AbortSignal) => json<TubeMinuteDto[]>('GET', API.tubeHistory(name), undefined, signal),
  connections: (signal?: AbortSignal) => json<ConnectionDto[]>('GET', API.connections, undefined, signal),
  gearman: (signal?: AbortSignal) => json<GearmanSnapshotDto>('GET', API.gearman, undefined, signal),
  gearmanJobs: (fn: string, query: { state: GearmanJobState; limit: number; cursor: string | null }, signal?: AbortSignal) =>
    json<GearmanJobPageDto>('GET', withQuery(API.gearmanJobs, { function: fn, ...query }), undefined, signal),
  cancelGearmanJob: (handle: string) => discard('DELETE', API.gearmanJob(handle)),
  me: (signal?: AbortSignal) => json<SignedInDto>('GET', API.me, undefined, signal),
  audit: (before: number | null, limit: number, signal?: AbortSignal) =>
    json<AuditPageDto>('GET', withQuery(API.audit, { before, limit }), undefined, signal),
  schedules: (signal?: AbortSignal) => json<ScheduleDto[]>('GET', API.schedules, undefined, signal),
  createSchedule: (request: ScheduleRequest) => json<ScheduleDto>('POST', API.schedules, request),
  editSchedule: (id: number, request: Partial<ScheduleRequest>) => json<ScheduleDto>('PATCH', API.schedule(id), request),
  deleteSchedule: (id: number) => discard('DELETE', API.schedule(id)),
  runSchedule: (id: number) => json<ScheduleRunDto>('POST', API.scheduleRun(id)),
  cronPreview: (cron: string, timeZone: string, signal?: AbortSignal) =>
    json<CronPreviewDto>('GET', withQuery(API.cronPreview, { cron, timeZone }), undefined, signal),
  alertRules: (signal?: AbortSignal) => json<AlertRuleDto[]>('GET', API.alerts, undefined, signal),
  createAlertRule: (request: AlertRuleRequest) => json<AlertRuleDto>('POST', API.alerts, request),
  editAlertRule: (id: number, request: Partial<AlertRuleRequest>) => json<AlertRuleDto>('PATCH', API.alert(id), request),
  deleteAlertRule: (id: number) => discard('DELETE', API.alert(id)),
  alertHistory: (signal?: AbortSignal) => json<AlertEventDto[]>('GET', withQuery(API.alertHistory, { limit: 100 }), undefined, signal),
};

/** A message for the person: the server's explanation when there is one. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}
