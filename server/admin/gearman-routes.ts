import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { API } from '../../shared/api.js';
import { GEARMAN_JOB_STATES } from '../../shared/dto.js';
import type { GearmanView } from '../protocol/gearman/view.js';
import { gearmanJobDto } from './dto.js';
import { ApiError, engineError } from './errors.js';
import { pageCursor, parseOrThrow } from './validation.js';

const MAX_PAGE = 500;
const listQuery = z.object({
  function: z.string().max(255),
  state: z.enum(GEARMAN_JOB_STATES as unknown as ['queued', 'scheduled', 'running']).default('queued'),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  cursor: pageCursor,
});
/** Gearman handles and function names are bytes; the API takes them as Latin-1 text, as the wire does. */
const handleParam = z.string().min(1).max(63);

/**
 * The dashboard's Gearman section: functions and workers, a function's jobs by state, one job by
 * handle, and cancelling a queued job. Read-only mode and the token apply as to the rest of /api.
 */
export function gearmanRoutes(view: GearmanView, onActivity: () => void): Router {
  const router = express.Router();
  const route = (fn: (req: Request, res: Response) => unknown) => fn;

  router.get(
    API.gearman,
    route(async (_req, res) => res.json(await view.snapshot())),
  );

  router.get(
    API.gearmanJobs,
    route(async (req, res) => {
      const q = parseOrThrow(listQuery, req.query);
      const page = await view.jobs(q.function, q.state, q.limit, q.cursor ?? null);
      if (page === undefined) throw new ApiError(404, 'NOT_FOUND', `no Gearman function named ${q.function}`);
      res.json({ jobs: page.jobs.map(gearmanJobDto), next: page.next });
    }),
  );

  router.get(
    '/api/gearman/jobs/:handle',
    route(async (req, res) => {
      const job = await view.job(parseOrThrow(handleParam, String(req.params.handle)));
      if (job === undefined) throw new ApiError(404, 'NOT_FOUND', 'no such Gearman job');
      res.json(gearmanJobDto(job));
    }),
  );

  router.get(
    '/api/gearman/jobs/:handle/history',
    route(async (req, res) => {
      const history = await view.history(parseOrThrow(handleParam, String(req.params.handle)));
      if (history === undefined) throw new ApiError(404, 'NOT_FOUND', 'no such Gearman job handle');
      res.json(history);
    }),
  );

  router.delete(
    '/api/gearman/jobs/:handle',
    route(async (req, res) => {
      const result = await view.cancel(parseOrThrow(handleParam, String(req.params.handle)));
      if (!result.ok) {
        if (result.code === 'JOB_RESERVED') throw new ApiError(409, 'JOB_RUNNING', 'a worker is running this job; it can be cancelled only while queued');
        throw engineError(result.code);
      }
      onActivity();
      res.status(204).end();
    }),
  );
  return router;
}
