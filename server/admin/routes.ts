import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { API, type CountResponse } from '../../shared/api.js';
import type { AdminConfigDto } from '../../shared/dto.js';
import { MAX_TUBE_NAME_LENGTH, MAX_U32, MIN_TTR_MS, isValidTubeName } from '../../shared/limits.js';
import type { Engine, Tube } from '../engine/engine.js';
import { listJobs } from '../engine/job-pages.js';
import type { Durability } from '../engine/journal.js';
import type { ServerInfo } from '../server-info.js';
import { connectionDto, jobDto, jobSummaryDto, statsDto, tubeDto } from './dto.js';
import { ApiError, engineError } from './errors.js';

export interface RoutesContext {
  engine: Engine;
  info: ServerInfo;
  durability: Durability;
  config: AdminConfigDto;
  /** Called after a change, so the scheduler re-arms for new deadlines. */
  onActivity: () => void;
}

/** Jobs moved per turn of the event loop by a kick, clear or move, as on the protocol side. */
const SLICE = 1024;
const MAX_PAGE = 500;
/** TTR of a job put without one (the usual client default). */
const DEFAULT_TTR_SECONDS = 60;

const u32 = z.number().int().min(0).max(MAX_U32);
const tubeName = z
  .string()
  .max(MAX_TUBE_NAME_LENGTH)
  .refine(isValidTubeName, 'not a valid tube name (1-200 of A-Z a-z 0-9 - + / ; . $ _ ( ), not starting with -)');
const bodyFields = {
  body: z.string(),
  encoding: z.enum(['utf8', 'base64']).default('utf8'),
};
/**
 * Durations are in seconds, as on the protocol; `ttr` and `delay` (the protocol's words) are
 * accepted as well as `ttrSeconds` and `delaySeconds`, but not both at once.
 */
function secondsAliases<T extends { ttr?: number; ttrSeconds?: number; delay?: number; delaySeconds?: number }>(
  value: T,
  ctx: z.RefinementCtx,
): Omit<T, 'ttr' | 'delay'> {
  const { ttr, delay, ...rest } = value;
  if (ttr !== undefined && value.ttrSeconds !== undefined) ctx.addIssue({ code: 'custom', message: 'give ttr or ttrSeconds, not both' });
  if (delay !== undefined && value.delaySeconds !== undefined) {
    ctx.addIssue({ code: 'custom', message: 'give delay or delaySeconds, not both' });
  }
  return { ...rest, ttrSeconds: value.ttrSeconds ?? ttr, delaySeconds: value.delaySeconds ?? delay };
}
const putSchema = z
  .strictObject({
    ...bodyFields,
    priority: u32.default(0),
    delaySeconds: u32.optional(),
    delay: u32.optional(),
    ttrSeconds: u32.optional(),
    ttr: u32.optional(),
  })
  .transform(secondsAliases);
const editSchema = z
  .strictObject({
    body: z.string().optional(),
    encoding: z.enum(['utf8', 'base64']).default('utf8'),
    priority: u32.optional(),
    ttrSeconds: u32.optional(),
    ttr: u32.optional(),
    delaySeconds: u32.optional(),
    delay: u32.optional(),
    tube: tubeName.optional(),
    kick: z.boolean().default(false),
  })
  .transform(secondsAliases);
const kickSchema = z.strictObject({ bound: z.number().int().min(0).max(MAX_U32) });
const pauseSchema = z.strictObject({ seconds: u32 });
const moveSchema = z.strictObject({
  to: tubeName,
  state: z.enum(['ready', 'delayed', 'buried']),
  limit: z.number().int().min(1).max(MAX_U32),
});
const listQuery = z.object({
  state: z.enum(['ready', 'delayed', 'buried', 'reserved']),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  // The shape listJobs' cursors have (engine/job-pages.ts); anything else is a client error,
  // not a silent restart from the first page.
  cursor: z
    .string()
    .max(64)
    .regex(/^\d+(?:\.\d+)?(?:_\d+)?$/, 'not a cursor from an earlier page')
    .optional(),
});
const clearQuery = z.object({ state: z.enum(['ready', 'delayed', 'buried']) });
/**
 * Base64 in whole groups, the last one padded or not. Node's decoder silently drops what does
 * not make a whole byte ('A' decodes to nothing), so a stray length is refused here. (A regex of
 * 4-character groups would be neater but overflows the regex stack on bodies of tens of MB.)
 */
const isBase64 = (text: string): boolean =>
  /^[A-Za-z0-9+/]*={0,2}$/.test(text) && (text.endsWith('=') ? text.length % 4 === 0 : text.length % 4 !== 1);
const jobId = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw new ApiError(400, 'BAD_REQUEST', `${where}${issue.message}`);
  }
  return r.data;
}

/** Waits one turn, so a large kick, clear or move never holds up other clients. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The REST API. Every change goes through the same engine operation, counters and events as
 * the beanstalkd protocol, and is answered only once its binlog record is durable.
 */
export function apiRoutes(ctx: RoutesContext): Router {
  const { engine, info } = ctx;
  const router = express.Router();
  const json = express.json({ limit: Math.ceil(info.maxJobSize * 1.4) + 64 * 1024, strict: true });

  const durable = (): Promise<void> =>
    new Promise((resolve) => ctx.durability.whenDurable(ctx.durability.appendedSeq, resolve));
  const changed = async (): Promise<void> => {
    ctx.onActivity();
    await durable();
  };
  const tubeOr404 = (name: string): Tube => {
    const tube = engine.tube(parse(tubeName, name));
    if (tube === undefined) throw new ApiError(404, 'NOT_FOUND', `no tube named ${name}`);
    return tube;
  };
  const decodeBody = (text: string, encoding: 'utf8' | 'base64'): Buffer => {
    if (encoding === 'base64' && !isBase64(text)) throw new ApiError(400, 'BAD_REQUEST', 'body: not base64');
    const body = Buffer.from(text, encoding);
    if (body.length > info.maxJobSize) {
      throw new ApiError(413, 'JOB_TOO_BIG', `body: ${body.length} bytes is over the maximum job size (${info.maxJobSize})`);
    }
    return body;
  };
  // Express 5 passes a rejected promise to the error handler.
  const route = (fn: (req: Request, res: Response) => unknown) => fn;

  router.get(API.stats, route((_req, res) => res.json(statsDto(engine, info, engine.now()))));
  router.get(API.tubes, route((_req, res) => res.json(engine.tubes().map((t) => tubeDto(t, engine.now())))));
  router.get('/api/tubes/:name', route((req, res) => res.json(tubeDto(tubeOr404(String(req.params.name)), engine.now()))));

  router.get(
    '/api/tubes/:name/jobs',
    route((req, res) => {
      const tube = tubeOr404(String(req.params.name));
      const q = parse(listQuery, req.query);
      const page = listJobs(engine, tube, q.state, q.limit, q.cursor ?? null);
      const now = engine.now();
      res.json({ jobs: page.jobs.map((j) => jobSummaryDto(j, now)), next: page.next });
    }),
  );

  router.post(
    '/api/tubes/:name/jobs',
    json,
    route(async (req, res) => {
      const name = parse(tubeName, String(req.params.name));
      const r = parse(putSchema, req.body);
      const body = decodeBody(r.body, r.encoding);
      engine.count('put');
      const tube = engine.findOrCreateTube(name);
      const result = engine.put({
        tube,
        priority: r.priority,
        delayMs: (r.delaySeconds ?? 0) * 1000,
        ttrMs: Math.max((r.ttrSeconds ?? DEFAULT_TTR_SECONDS) * 1000, MIN_TTR_MS),
        body,
      });
      if (!result.ok) {
        engine.dropTubeIfUnused(tube);
        throw engineError(result.code);
      }
      await changed();
      res.status(201).json(jobDto(result.value, engine.now()));
    }),
  );

  router.get(
    '/api/jobs/:id',
    route((req, res) => {
      const job = engine.job(parse(jobId, req.params.id));
      if (job === undefined) throw engineError('NOT_FOUND');
      res.json(jobDto(job, engine.now()));
    }),
  );

  router.get(
    '/api/jobs/:id/body',
    route((req, res) => {
      const job = engine.job(parse(jobId, req.params.id));
      if (job === undefined) throw engineError('NOT_FOUND');
      res.type('application/octet-stream').set('Content-Disposition', `attachment; filename="job-${job.id}.bin"`).send(job.body);
    }),
  );

  router.delete(
    '/api/jobs/:id',
    route(async (req, res) => {
      const id = parse(jobId, req.params.id);
      if (engine.job(id)?.state === 'reserved') throw engineError('JOB_RESERVED');
      engine.count('delete');
      const result = engine.delete(null, id);
      if (!result.ok) throw engineError(result.code);
      await changed();
      res.status(204).end();
    }),
  );

  router.post(
    '/api/jobs/:id/kick',
    route(async (req, res) => {
      engine.count('kick-job');
      const result = engine.kickJob(parse(jobId, req.params.id));
      if (!result.ok) throw engineError(result.code);
      await changed();
      res.json(jobDto(result.value, engine.now()));
    }),
  );

  router.patch(
    '/api/jobs/:id',
    json,
    route(async (req, res) => {
      const id = parse(jobId, req.params.id);
      const r = parse(editSchema, req.body);
      const result = engine.editJob(id, {
        body: r.body === undefined ? undefined : decodeBody(r.body, r.encoding),
        priority: r.priority,
        ttrMs: r.ttrSeconds === undefined ? undefined : Math.max(r.ttrSeconds * 1000, MIN_TTR_MS),
        delayMs: r.delaySeconds === undefined ? undefined : r.delaySeconds * 1000,
        tube: r.tube,
      });
      if (!result.ok) throw engineError(result.code);
      if (r.kick && (result.value.state === 'buried' || result.value.state === 'delayed')) {
        engine.count('kick-job');
        const kicked = engine.kickJob(id);
        if (!kicked.ok) throw engineError(kicked.code);
      }
      await changed();
      res.json(jobDto(result.value, engine.now()));
    }),
  );

  router.post(
    '/api/tubes/:name/kick',
    json,
    route(async (req, res) => {
      const tube = tubeOr404(String(req.params.name));
      const { bound } = parse(kickSchema, req.body);
      engine.count('kick');
      const kind = engine.kickKind(tube);
      let count = 0;
      for (;;) {
        const want = Math.min(SLICE, bound - count);
        const moved = engine.kickSome(tube, kind, want);
        count += moved;
        if (moved < want || count >= bound) break;
        await nextTurn();
      }
      await changed();
      res.json({ count } satisfies CountResponse);
    }),
  );

  router.post(
    '/api/tubes/:name/pause',
    json,
    route(async (req, res) => {
      const name = parse(tubeName, String(req.params.name));
      const { seconds } = parse(pauseSchema, req.body);
      engine.count('pause-tube');
      const result = engine.pauseTube(name, seconds * 1000);
      if (!result.ok) throw engineError(result.code);
      await changed();
      res.json(tubeDto(result.value, engine.now()));
    }),
  );

  router.delete(
    '/api/tubes/:name/jobs',
    route(async (req, res) => {
      const tube = tubeOr404(String(req.params.name));
      const { state } = parse(clearQuery, req.query);
      let count = 0;
      for (;;) {
        const n = engine.clearSome(tube, state, SLICE);
        engine.count('delete', n);
        count += n;
        if (n < SLICE) break;
        await nextTurn();
      }
      await changed();
      res.json({ count } satisfies CountResponse);
    }),
  );

  router.post(
    '/api/tubes/:name/move',
    json,
    route(async (req, res) => {
      const from = tubeOr404(String(req.params.name));
      const r = parse(moveSchema, req.body);
      if (r.to === from.name) throw new ApiError(400, 'BAD_REQUEST', 'to: the same tube');
      let count = 0;
      while (count < r.limit) {
        const job = r.state === 'ready' ? from.ready.peek() : r.state === 'delayed' ? from.delayed.peek() : from.firstBuried();
        if (job === undefined) break;
        const moved = engine.editJob(job.id, { tube: r.to });
        if (!moved.ok) {
          if (count === 0) throw engineError(moved.code);
          break;
        }
        if (++count % SLICE === 0) await nextTurn();
      }
      await changed();
      res.json({ count } satisfies CountResponse);
    }),
  );

  router.get(API.connections, route((_req, res) => res.json([...engine.allSessions()].map(connectionDto))));

  router.use('/api', (_req, _res, next) => next(new ApiError(404, 'NOT_FOUND', 'no such API path')));
  return router;
}
