/**
 * The dashboard's pages and their URLs (history API paths; the server serves index.html for them).
 * Routes are parsed from paths without the base path; the links made here carry it.
 */

import { GEARMAN_JOB_STATES, JOB_STATES, type GearmanJobState, type JobState } from '../../shared/dto.js';
import type { SearchSpec } from '../../shared/api.js';
import { DEFAULT_TUBE } from '../../shared/limits.js';
import { withBase } from './base.js';

export type Route =
  | { page: 'overview' }
  | { page: 'tubes' }
  | { page: 'tube'; name: string; state: JobState }
  | { page: 'job'; id: number }
  | { page: 'put'; tube: string }
  | { page: 'connections' }
  | { page: 'search'; spec: SearchSpec }
  | { page: 'servers' }
  | { page: 'nodes' }
  | { page: 'audit' }
  | { page: 'server'; id: number; tube: string | null }
  | { page: 'gearman' }
  | { page: 'gearman-function'; name: string; state: GearmanJobState }
  | { page: 'schedules' }
  | { page: 'alerts' }
  | { page: 'not-found'; path: string };

/** Largest job id the URL accepts (ids are u64 in beanstalkd; JSON numbers are exact up to 2^53). */
const MAX_JOB_ID = Number.MAX_SAFE_INTEGER;

function isJobState(value: string | null): value is JobState {
  return value !== null && (JOB_STATES as readonly string[]).includes(value);
}

/** A job id typed by a person: digits only, 1..2^53-1; null otherwise. */
export function parseJobId(text: string): number | null {
  const trimmed = text.trim().replace(/^#/, '');
  if (!/^\d{1,16}$/.test(trimmed)) return null;
  const id = Number(trimmed);
  return id >= 1 && id <= MAX_JOB_ID ? id : null;
}

function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** Maps a location to a page. Tube names may contain '/', so everything after /tubes/ is the name. */
export function parseRoute(pathname: string, search: string): Route {
  const query = new URLSearchParams(search);
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  if (path === '/' || path === '') return { page: 'overview' };
  if (path === '/tubes') return { page: 'tubes' };
  if (path === '/connections') return { page: 'connections' };
  if (path === '/search') return { page: 'search', spec: searchSpecOf(query) };
  if (path === '/servers') return { page: 'servers' };
  if (path === '/nodes') return { page: 'nodes' };
  if (path === '/audit') return { page: 'audit' };
  if (path === '/schedules') return { page: 'schedules' };
  if (path === '/alerts') return { page: 'alerts' };
  if (path.startsWith('/servers/')) {
    const id = Number(path.slice('/servers/'.length));
    if (Number.isInteger(id) && id >= 1 && id <= 1_000_000) return { page: 'server', id, tube: query.get('tube') || null };
  }
  if (path === '/gearman') return { page: 'gearman' };
  if (path.startsWith('/gearman/functions/')) {
    // A function name may be empty or hold '/': everything after the prefix is the name.
    const name = decodeSegment(path.slice('/gearman/functions/'.length));
    if (name === null) return { page: 'not-found', path };
    const state = query.get('state');
    return { page: 'gearman-function', name, state: (GEARMAN_JOB_STATES as readonly (string | null)[]).includes(state) ? (state as GearmanJobState) : 'queued' };
  }
  if (path === '/put') return { page: 'put', tube: query.get('tube') ?? DEFAULT_TUBE };
  if (path.startsWith('/tubes/')) {
    const name = decodeSegment(path.slice('/tubes/'.length));
    if (name === null || name === '') return { page: 'not-found', path };
    const state = query.get('state');
    return { page: 'tube', name, state: isJobState(state) ? state : 'ready' };
  }
  if (path.startsWith('/jobs/')) {
    const id = parseJobId(decodeSegment(path.slice('/jobs/'.length)) ?? '');
    if (id !== null) return { page: 'job', id };
  }
  return { page: 'not-found', path };
}

/** URL of a tube's page (the name is one encoded path segment, '/' included). */
export function tubeHref(name: string, state?: JobState): string {
  const base = withBase(`/tubes/${encodeURIComponent(name)}`);
  return state === undefined || state === 'ready' ? base : `${base}?state=${state}`;
}

export function gearmanFunctionHref(name: string, state?: GearmanJobState): string {
  const base = withBase(`/gearman/functions/${encodeURIComponent(name)}`);
  return state === undefined || state === 'queued' ? base : `${base}?state=${state}`;
}

/** A search as the URL carries it (`/search?q=…&regex=1&word=1&tube=…&state=…`). */
function searchSpecOf(query: URLSearchParams): SearchSpec {
  const spec: SearchSpec = { q: query.get('q') ?? '', regex: query.get('regex') === '1' };
  if (query.get('word') === '1') spec.wholeWord = true;
  const tube = query.get('tube');
  const state = query.get('state');
  if (tube !== null && tube !== '') spec.tube = tube;
  if (isJobState(state)) spec.state = state;
  return spec;
}

export function searchHref(spec: SearchSpec): string {
  const query = new URLSearchParams();
  if (spec.q !== undefined && spec.q !== '') query.set('q', spec.q);
  if (spec.regex === true) query.set('regex', '1');
  if (spec.wholeWord === true) query.set('word', '1');
  if (spec.tube !== undefined) query.set('tube', spec.tube);
  if (spec.state !== undefined) query.set('state', spec.state);
  const text = query.toString();
  return withBase(text === '' ? '/search' : `/search?${text}`);
}

/** URL of an attached server's page, with one of its tubes chosen (`?tube=`). */
export function serverHref(id: number, tube?: string | null): string {
  const base = withBase(`/servers/${id}`);
  return tube === undefined || tube === null ? base : `${base}?tube=${encodeURIComponent(tube)}`;
}

export function jobHref(id: number): string {
  return withBase(`/jobs/${id}`);
}

export function putHref(tube?: string): string {
  return withBase(tube === undefined ? '/put' : `/put?tube=${encodeURIComponent(tube)}`);
}

/** A short title for the browser tab. */
export function routeTitle(route: Route): string {
  switch (route.page) {
    case 'overview':
      return 'Overview';
    case 'tubes':
      return 'Tubes';
    case 'tube':
      return `Tube ${route.name}`;
    case 'job':
      return `Job ${route.id}`;
    case 'put':
      return 'Put a job';
    case 'connections':
      return 'Connections';
    case 'search':
      return route.spec.q === '' ? 'Search' : `Search ${route.spec.q}`;
    case 'servers':
      return 'Other servers';
    case 'nodes':
      return 'Cluster nodes';
    case 'audit':
      return 'Audit log';
    case 'server':
      return route.tube === null ? `Server ${route.id}` : `Server ${route.id} ${route.tube}`;
    case 'gearman':
      return 'Gearman';
    case 'gearman-function':
      return `Gearman ${route.name}`;
    case 'schedules':
      return 'Schedules';
    case 'alerts':
      return 'Alerts';
    case 'not-found':
      return 'Not found';
  }
}

/** Identity of the page: navigation between two locations with the same key keeps the page's state. */
export function routeKey(route: Route): string {
  switch (route.page) {
    case 'tube':
      return `tube:${route.name}`;
    case 'job':
      return `job:${route.id}`;
    case 'gearman-function':
      // A tab is a page of its own: its paging starts afresh.
      return `gearman-function:${route.name}:${route.state}`;
    case 'server':
      return `server:${route.id}`;
    case 'search':
      // Each search is a page of its own: it runs afresh, with no selection carried over.
      return searchHref(route.spec);
    default:
      return route.page;
  }
}
