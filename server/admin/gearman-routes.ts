import { actorOf } from './actor.js';
import express, { type Request, type Response, type Router } from 'express';
import type { Access } from './access.js';
import { bulkSelection, namedInPath } from './audit-targets.js';
import { guardedRouter } from './guarded-router.js';
import { z } from 'zod';
import { API } from '../../shared/api.js';
import { GEARMAN_JOB_STATES, type GearmanJobState, type GearmanSearchPageDto } from '../../shared/dto.js';
import type { JobState, Operations } from '../operations/operations.js';
import { dataOf } from '../gearman/job-body.js';
import type { GearmanView } from '../gearman/view.js';
import { gearmanJobDto } from './dto.js';
import { ApiError, engineError } from './errors.js';
import { MAX_PATTERN_LENGTH, Searches, actOnEach, type SearchFilter } from './search.js';
import { abandonedSignal as abandoned, pageCursor, parseOrThrow, queryFlag } from './validation.js';

const MAX_PAGE = 500;
const listQuery = z.object({
  function: z.string().max(255),
  state: z.enum(GEARMAN_JOB_STATES as unknown as ['queued', 'scheduled', 'running']).default('queued'),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  cursor: pageCursor,
});
/** Gearman handles and function names are bytes; the API takes them as Latin-1 text, as the wire does. */
const handleParam = z.string().min(1).max(63);
const gearmanState = z.enum(GEARMAN_JOB_STATES as unknown as ['queued', 'scheduled', 'running']);
const selection = {
  q: z.string().max(MAX_PATTERN_LENGTH).default(''),
  function: z.string().max(255).optional(),
  state: gearmanState.optional(),
};
const searchQuery = z.object({
  ...selection,
  regex: queryFlag.default(false),
  ignoreCase: queryFlag.optional(),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  next: z.string().max(32).optional(),
});
const bulkSchema = z
  .strictObject({
    action: z.literal('delete'),
    handles: z.array(handleParam).min(1).max(10_000).optional(),
    search: z.strictObject({ ...selection, regex: z.boolean().default(false), ignoreCase: z.boolean().optional() }).optional(),
  })
  .refine((b) => (b.handles === undefined) !== (b.search === undefined), 'give handles or search, not both');

/** A Gearman search's filter: a function is a tube, and queued / scheduled / running are ready / delayed / reserved. */
function gearmanFilter(q: { q: string; regex: boolean; ignoreCase?: boolean; function?: string; state?: GearmanJobState }): SearchFilter {
  return {
    text: q.q,
    regex: q.regex,
    ignoreCase: q.ignoreCase ?? !q.regex,
    wholeWord: false,
    tube: q.function ?? null,
    state: q.state === undefined ? null : ENGINE_STATES[q.state],
  };
}

const ENGINE_STATES: Readonly<Record<GearmanJobState, JobState>> = { queued: 'ready', scheduled: 'delayed', running: 'reserved' };


/**
 * The dashboard's Gearman section: functions and workers, a function's jobs by state, one job by
 * handle, and cancelling a queued job. Read-only mode and the token apply as to the rest of /api.
 */
export function gearmanRoutes(view: GearmanView, ops: Operations, access: Access): Router {
  const r = guardedRouter(access);
  const route = (fn: (req: Request, res: Response) => unknown) => fn;
  // Searches read a job's data, not the unique id kept in front of it.
  const searches = new Searches(ops, dataOf);
  const json = express.json({ limit: '1mb', strict: true });
  // A job's record or history, by the handle in the path; 404 with `missing` when there is none.
  const byHandle = <T>(read: (handle: string) => Promise<T | undefined>, missing: string, reply: (found: T) => unknown) =>
    route(async (req, res) => {
      const found = await read(parseOrThrow(handleParam, String(req.params.handle)));
      if (found === undefined) throw new ApiError(404, 'NOT_FOUND', missing);
      res.json(reply(found));
    });

  r.get(
    API.gearmanSearch,
    'viewer',
    searches.handler(searchQuery, gearmanFilter, async (page) => {
      const now = ops.now();
      const { matches: _matches, ...rest } = page;
      return { ...rest, jobs: (await view.records(page.jobs)).map((j) => gearmanJobDto(j, now)) } satisfies GearmanSearchPageDto;
    }),
  );

  r.post(
    API.gearmanBulk,
    { role: 'operator', audit: { action: 'gearman.bulk', target: bulkSelection } },
    json,
    // A running job is refused by the store (JOB_RESERVED) and counted as skipped.
    searches.bulkHandler(bulkSchema, (r, req, res) =>
      r.handles !== undefined
        ? actOnEach(r.handles, async (handle) => (await view.cancel(handle, actorOf(req))).ok)
        : searches.actOnMatches(gearmanFilter(r.search!), abandoned(res), async (id) => (await ops.delete(id, actorOf(req))).ok),
    ),
  );

  r.get(
    API.gearman,
    'viewer',
    route(async (_req, res) => res.json(await view.snapshot())),
  );

  r.get(
    API.gearmanJobs,
    'viewer',
    route(async (req, res) => {
      const q = parseOrThrow(listQuery, req.query);
      const page = await view.jobs(q.function, q.state, q.limit, q.cursor ?? null);
      if (page === undefined) throw new ApiError(404, 'NOT_FOUND', `no Gearman function named ${q.function}`);
      const now = ops.now();
      res.json({ jobs: page.jobs.map((j) => gearmanJobDto(j, now)), next: page.next });
    }),
  );

  r.get(
    '/api/gearman/jobs/:handle',
    'viewer',
    byHandle((handle) => view.job(handle), 'no such Gearman job', (job) => gearmanJobDto(job, ops.now())),
  );

  r.get(
    '/api/gearman/jobs/:handle/history',
    'viewer',
    byHandle((handle) => view.history(handle), 'no such Gearman job handle', (history) => history),
  );

  r.delete(
    '/api/gearman/jobs/:handle',
    { role: 'operator', audit: { action: 'gearman.cancel', target: namedInPath('handle', 'handle') } },
    route(async (req, res) => {
      const result = await view.cancel(parseOrThrow(handleParam, String(req.params.handle)), actorOf(req));
      if (!result.ok) {
        if (result.code === 'JOB_RESERVED') throw new ApiError(409, 'JOB_RUNNING', 'a worker is running this job; it can be cancelled only while queued');
        throw engineError(result.code);
      }
      ops.onActivity();
      res.status(204).end();
    }),
  );
  return r.router;
}
