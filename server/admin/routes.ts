import { actorOf } from './actor.js';
import { afterChange } from '../operations/after-change.js';
import express, { type Request, type Response, type Router } from 'express';
import type { Access } from './access.js';
import { allTubes, bulkSelection, oneJob, oneTube, namedInPath } from './audit-targets.js';
import { guardedRouter } from './guarded-router.js';
import { z } from 'zod';
import { API, type CountResponse } from '../../shared/api.js';
import type { AdminConfigDto, NextJobDto, SearchPageDto } from '../../shared/dto.js';
import { MAX_PAUSE_SECONDS, MAX_TUBE_NAME_LENGTH, MAX_U32, isValidTubeName } from '../../shared/limits.js';
import type { JobSnapshot, Operations, Result, TubeCounts } from '../operations/operations.js';
import type { ServerInfo } from '../server-info.js';
import { connectionDto, jobDto, jobSummaryDto, statsDto, tubeDto } from './dto.js';
import { ApiError, engineError, valueOf } from './errors.js';
import { SERVER_MINUTES, type MinuteHistory } from './minute-history.js';
import { TubeHealth } from './tube-health.js';
import { MAX_BULK, MAX_PATTERN_LENGTH, Searches, actOnEach, type SearchFilter } from './search.js';
import { abandonedSignal as abandoned, pageCursor, parseOrThrow as parse, queryFlag } from './validation.js';

export interface RoutesContext {
  ops: Operations;
  info: ServerInfo;
  config: AdminConfigDto;
  /** The minute samples of the long charts. */
  minutes: MinuteHistory;
  access: Access;
}

const MAX_PAGE = 500;
/** Most jobs one bulk action takes (ids given, or matches of a search). */
/** TTR of a job put without one (the usual client default), ms. */
export const DEFAULT_TTR_MS = 60_000;

export const u32 = z.number().int().min(0).max(MAX_U32);
export const tubeName = z
  .string()
  .max(MAX_TUBE_NAME_LENGTH)
  .refine(isValidTubeName, 'not a valid tube name (1-200 of A-Z a-z 0-9 - + / ; . $ _ ( ), not starting with -)');
const bodyFields = {
  body: z.string(),
  encoding: z.enum(['utf8', 'base64']).default('utf8'),
};
/**
 * The one place the REST API's aliases are resolved: durations are in seconds, as on the
 * protocol, and `ttr` and `delay` (the protocol's words) are accepted as well as `ttrSeconds`
 * and `delaySeconds`, but not both at once. What comes out is in milliseconds, as every
 * operation takes it (`ttrMs`, `delayMs`; undefined when not given).
 */
function toMilliseconds<T extends { ttr?: number; ttrSeconds?: number; delay?: number; delaySeconds?: number }>(
  value: T,
  ctx: z.RefinementCtx,
): Omit<T, 'ttr' | 'delay' | 'ttrSeconds' | 'delaySeconds'> & { ttrMs?: number; delayMs?: number } {
  const { ttr, delay, ttrSeconds, delaySeconds, ...rest } = value;
  if (ttr !== undefined && ttrSeconds !== undefined) ctx.addIssue({ code: 'custom', message: 'give ttr or ttrSeconds, not both' });
  if (delay !== undefined && delaySeconds !== undefined) {
    ctx.addIssue({ code: 'custom', message: 'give delay or delaySeconds, not both' });
  }
  const ttrSec = ttrSeconds ?? ttr;
  const delaySec = delaySeconds ?? delay;
  return { ...rest, ttrMs: ttrSec === undefined ? undefined : ttrSec * 1000, delayMs: delaySec === undefined ? undefined : delaySec * 1000 };
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
  .transform(toMilliseconds);
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
  .transform(toMilliseconds);
/** The fields of a job edit its audit entry names. */
const EDIT_FIELDS = ['priority', 'ttr', 'ttrSeconds', 'delay', 'delaySeconds', 'tube', 'kick'] as const;
const kickSchema = z.strictObject({ bound: z.number().int().min(0).max(MAX_U32) });
const pauseSchema = z.union([z.strictObject({ seconds: u32 }), z.strictObject({ untilResumed: z.literal(true) })]);

/** A pause request's length in ms: "until resumed" is the longest pause the protocol allows. */
function pauseMsOf(request: z.infer<typeof pauseSchema>): number {
  return ('untilResumed' in request ? MAX_PAUSE_SECONDS : request.seconds) * 1000;
}
const settingsSchema = z.strictObject({ deadLetterAfter: u32.nullable() });
const moveSchema = z.strictObject({
  to: tubeName,
  state: z.enum(['ready', 'delayed', 'buried']),
  limit: z.number().int().min(1).max(MAX_U32),
});
const listQuery = z.object({
  state: z.enum(['ready', 'delayed', 'buried', 'reserved']),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  cursor: pageCursor,
});
const clearQuery = z.object({ state: z.enum(['ready', 'delayed', 'buried']) });
const historyQuery = z.object({ minutes: z.coerce.number().int().min(1).max(SERVER_MINUTES).default(SERVER_MINUTES) });
const jobStates = z.enum(['ready', 'delayed', 'buried', 'reserved']);
/** What a search or a bulk action selects: body text or pattern, tube, state. */
const searchFields = {
  q: z.string().max(MAX_PATTERN_LENGTH).default(''),
  tube: tubeName.optional(),
  state: jobStates.optional(),
};
const searchQuery = z.object({
  ...searchFields,
  regex: queryFlag.default(false),
  /** Plain text ignores case unless told; a pattern respects it unless told ((?i) works too). */
  ignoreCase: queryFlag.optional(),
  wholeWord: queryFlag.default(false),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  next: z.string().max(32).optional(),
});
const bulkSchema = z
  .strictObject({
    action: z.enum(['kick', 'delete', 'move']),
    to: tubeName.optional(),
    ids: z.array(z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)).min(1).max(MAX_BULK).optional(),
    search: z.strictObject({ ...searchFields, regex: z.boolean().default(false), ignoreCase: z.boolean().optional(), wholeWord: z.boolean().optional() }).optional(),
  })
  .refine((b) => (b.ids === undefined) !== (b.search === undefined), 'give ids or search, not both')
  .refine((b) => (b.action === 'move') === (b.to !== undefined), 'to: a move needs it, and only a move takes it');
/**
 * Base64 in whole groups, the last one padded or not. Node's decoder silently drops what does
 * not make a whole byte ('A' decodes to nothing), so a stray length is refused here. (A regex of
 * 4-character groups would be neater but overflows the regex stack on bodies of tens of MB.)
 */
export const isBase64 = (text: string): boolean =>
  /^[A-Za-z0-9+/]*={0,2}$/.test(text) && (text.endsWith('=') ? text.length % 4 === 0 : text.length % 4 !== 1);
const jobId = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/** A search's filter from the request: plain text ignores case unless asked not to. */
function searchFilter(q: { q: string; regex: boolean; ignoreCase?: boolean; wholeWord?: boolean; tube?: string; state?: SearchFilter['state'] }): SearchFilter {
  return { text: q.q, regex: q.regex, ignoreCase: q.ignoreCase ?? !q.regex, wholeWord: q.wholeWord ?? false, tube: q.tube ?? null, state: q.state ?? null };
}


/**
 * The REST API: each route validates its input, calls one operation and maps the answer to
 * JSON. Changes are answered only once their binlog record is durable.
 */
export function apiRoutes(ctx: RoutesContext): Router {
  const { ops, info } = ctx;
  const r = guardedRouter(ctx.access);
  const json = express.json({ limit: Math.ceil(ops.maxJobSize * 1.4) + 64 * 1024, strict: true });

  const changed = (): Promise<void> => afterChange(ops);
  const tubeParam = (req: Request): string => parse(tubeName, String(req.params.name));
  const noTube = (name: string): ApiError => new ApiError(404, 'NOT_FOUND', `no tube named ${name}`);
  /** The tube named in the path as it is now, which must exist (checked before the rest of the request). */
  const existingTube = async (req: Request): Promise<TubeCounts> => {
    const name = tubeParam(req);
    const tube = await ops.tube(name);
    if (tube === undefined) throw noTube(name);
    return tube;
  };
  const decodeBody = (text: string, encoding: 'utf8' | 'base64'): Buffer => {
    if (encoding === 'base64' && !isBase64(text)) throw new ApiError(400, 'BAD_REQUEST', 'body: not base64');
    const body = Buffer.from(text, encoding);
    if (ops.isTooBig(body.length)) {
      throw new ApiError(413, 'JOB_TOO_BIG', `body: ${body.length} bytes is over the maximum job size (${ops.maxJobSize})`);
    }
    return body;
  };
  // Express 5 passes a rejected promise to the error handler.
  // The job the path's :id names, or 404.
  const existingJob = async (req: Request): Promise<JobSnapshot> => {
    const job = await ops.job(parse(jobId, req.params.id));
    if (job === undefined) throw engineError('NOT_FOUND');
    return job;
  };
  const route = (fn: (req: Request, res: Response) => unknown) => fn;
  // A change to a tube's jobs that answers how many it changed (kick, clear, move): `act` reads
  // its own request and calls the store.
  const countedChange = (act: (name: string, req: Request) => Promise<Result<number>>) =>
    route(async (req, res) => {
      const count = valueOf(await act((await existingTube(req)).name, req));
      await changed();
      res.json({ count } satisfies CountResponse);
    });

  r.get(
    API.stats,
    'viewer',
    route(async (_req, res) => res.json(statsDto(await ops.serverCounts(), info, ops.now()))),
  );
  r.get(
    API.tubes,
    'viewer',
    route(async (_req, res) => {
      const tubes = await ops.tubes();
      const now = ops.now();
      res.json(tubes.map((t) => tubeDto(t, now)));
    }),
  );
  r.get(
    '/api/tubes/:name',
    'viewer',
    route(async (req, res) => res.json(tubeDto(await existingTube(req), ops.now()))),
  );

  r.get(
    '/api/tubes/:name/jobs',
    'viewer',
    route(async (req, res) => {
      const { name } = await existingTube(req);
      const q = parse(listQuery, req.query);
      const page = await ops.listJobs(name, q.state, q.limit, q.cursor ?? null);
      if (page === undefined) throw noTube(name);
      const now = ops.now();
      res.json({ jobs: page.jobs.map((j) => jobSummaryDto(j, now)), next: page.next });
    }),
  );

  r.post(
    '/api/tubes/:name/jobs',
    { role: 'operator', audit: { action: 'job.put', target: oneTube(['priority', 'delay', 'delaySeconds', 'ttr', 'ttrSeconds']) } },
    json,
    route(async (req, res) => {
      const name = tubeParam(req);
      const r = parse(putSchema, req.body);
      const body = decodeBody(r.body, r.encoding);
      const job = valueOf(
        await ops.put(name, { priority: r.priority, delayMs: r.delayMs ?? 0, ttrMs: r.ttrMs ?? DEFAULT_TTR_MS, body }),
      );
      await changed();
      res.status(201).json(jobDto(job, ops.now()));
    }),
  );

  r.get(
    '/api/jobs/:id',
    'viewer',
    route(async (req, res) => {
      const job = await existingJob(req);
      res.json(jobDto(job, ops.now()));
    }),
  );

  r.get(
    '/api/jobs/:id/next',
    'viewer',
    route(async (req, res) => {
      const job = await existingJob(req);
      res.json({ id: await ops.nextInList(job.id), tube: job.tube, state: job.state } satisfies NextJobDto);
    }),
  );

  r.get(
    '/api/jobs/:id/history',
    'viewer',
    route(async (req, res) => res.json(await ops.jobHistory(parse(jobId, req.params.id)))),
  );

  r.get(
    '/api/jobs/:id/body',
    'viewer',
    route(async (req, res) => {
      const job = await existingJob(req);
      res.type('application/octet-stream').set('Content-Disposition', `attachment; filename="job-${job.id}.bin"`).send(job.body);
    }),
  );

  r.delete(
    '/api/jobs/:id',
    { role: 'operator', audit: { action: 'job.delete', target: oneJob() } },
    route(async (req, res) => {
      valueOf(await ops.delete(parse(jobId, req.params.id), actorOf(req)));
      await changed();
      res.status(204).end();
    }),
  );

  r.post(
    '/api/jobs/:id/kick',
    { role: 'operator', audit: { action: 'job.kick', target: oneJob() } },
    route(async (req, res) => {
      const job = valueOf(await ops.kickJob(parse(jobId, req.params.id), actorOf(req)));
      await changed();
      res.json(jobDto(job, ops.now()));
    }),
  );

  r.patch(
    '/api/jobs/:id',
    { role: 'operator', audit: { action: 'job.edit', target: oneJob(EDIT_FIELDS) } },
    json,
    route(async (req, res) => {
      const id = parse(jobId, req.params.id);
      const r = parse(editSchema, req.body);
      const job = valueOf(
        await ops.editJob(id, {
          body: r.body === undefined ? undefined : decodeBody(r.body, r.encoding),
          priority: r.priority,
          ttrMs: r.ttrMs,
          delayMs: r.delayMs,
          tube: r.tube,
          kick: r.kick,
        }, actorOf(req)),
      );
      await changed();
      res.json(jobDto(job, ops.now()));
    }),
  );

  r.post(
    '/api/tubes/:name/kick',
    { role: 'operator', audit: { action: 'tube.kick', target: oneTube(['bound']) } },
    json,
    countedChange(async (name, req) => ops.kick(name, parse(kickSchema, req.body).bound, actorOf(req))),
  );

  r.post(
    '/api/tubes/:name/pause',
    { role: 'operator', audit: { action: 'tube.pause', target: oneTube(['seconds', 'untilResumed']) } },
    json,
    route(async (req, res) => {
      const name = tubeParam(req);
      const tube = valueOf(await ops.pauseTube(name, pauseMsOf(parse(pauseSchema, req.body))));
      await changed();
      res.json(tubeDto(tube, ops.now()));
    }),
  );

  r.get(
    '/api/tubes/:name/settings',
    'viewer',
    route(async (req, res) => res.json(await ops.tubeSettings(tubeParam(req)))),
  );

  r.put(
    '/api/tubes/:name/settings',
    { role: 'admin', audit: { action: 'tube.settings', target: oneTube(['deadLetterAfter']) } },
    json,
    route(async (req, res) => {
      const name = tubeParam(req);
      const { deadLetterAfter } = parse(settingsSchema, req.body);
      const settings = valueOf(await ops.setTubeSettings(name, deadLetterAfter === null ? null : { deadLetterAfter }));
      await changed();
      res.json(settings);
    }),
  );

  r.post(
    API.allTubesKick,
    { role: 'operator', audit: { action: 'tubes.kick', target: allTubes(['bound']) } },
    json,
    route(async (req, res) => {
      const { bound } = parse(kickSchema, req.body);
      let count = 0;
      // Tube by tube, each in slices as a kick is: other clients are served all along.
      for (const name of await ops.tubeNames()) {
        const r = await ops.kick(name, bound, actorOf(req));
        if (r.ok) count += r.value;
      }
      await changed();
      res.json({ count } satisfies CountResponse);
    }),
  );

  r.post(
    API.allTubesPause,
    { role: 'operator', audit: { action: 'tubes.pause', target: allTubes(['seconds', 'untilResumed']) } },
    json,
    route(async (req, res) => {
      const pauseMs = pauseMsOf(parse(pauseSchema, req.body));
      let count = 0;
      for (const name of await ops.tubeNames()) if ((await ops.pauseTube(name, pauseMs)).ok) count++;
      await changed();
      res.json({ count } satisfies CountResponse);
    }),
  );

  r.delete(
    '/api/tubes/:name/jobs',
    { role: 'operator', audit: { action: 'tube.clear', target: oneTube(['state']) } },
    countedChange(async (name, req) => ops.clear(name, parse(clearQuery, req.query).state, actorOf(req))),
  );

  r.post(
    '/api/tubes/:name/move',
    { role: 'operator', audit: { action: 'tube.move', target: oneTube(['state', 'to', 'limit']) } },
    json,
    countedChange(async (name, req) => {
      const r = parse(moveSchema, req.body);
      if (r.to === name) throw new ApiError(400, 'BAD_REQUEST', 'to: the same tube');
      return ops.move(name, r.state, r.to, r.limit, actorOf(req));
    }),
  );

  const searches = new Searches(ops);

  r.get(
    API.search,
    'viewer',
    searches.handler(searchQuery, searchFilter, (page) => {
      const now = ops.now();
      const { matches, ...rest } = page;
      return { ...rest, jobs: page.jobs.map((j, i) => ({ ...jobSummaryDto(j, now), match: matches[i] ?? null })) } satisfies SearchPageDto;
    }),
  );

  r.delete(
    '/api/search/:token',
    'viewer',
    route((req, res) => {
      searches.cancel(String(req.params.token));
      res.status(204).end();
    }),
  );

  r.post(
    API.bulk,
    { role: 'operator', audit: { action: 'bulk', target: bulkSelection } },
    json,
    searches.bulkHandler(bulkSchema, (r, req, res) => {
      const by = actorOf(req);
      const act =
        r.action === 'kick'
          ? (id: number) => ops.kickJob(id, by)
          : r.action === 'delete'
            ? (id: number) => ops.delete(id, by)
            : (id: number) => ops.editJob(id, { tube: r.to! }, by);
      // A job already in the target tube is left alone (as one edited or moved since a search found it).
      const actOn = async (id: number): Promise<boolean> => !(r.action === 'move' && (await ops.job(id))?.tube === r.to) && (await act(id)).ok;
      return r.search === undefined ? actOnEach(r.ids!, actOn) : searches.actOnMatches(searchFilter(r.search), abandoned(res), actOn);
    }),
  );

  r.get(
    API.history,
    'viewer',
    route((req, res) => {
      const { minutes } = parse(historyQuery, req.query);
      res.json(ctx.minutes.serverHistory(minutes));
    }),
  );

  const health = new TubeHealth(ops, (name, minutes) => ctx.minutes.tubeHistory(name, minutes));
  r.get(
    API.tubeHealth,
    'viewer',
    route(async (_req, res) => res.json(await health.report())),
  );

  r.get(
    '/api/tubes/:name/history',
    'viewer',
    route((req, res) => res.json(ctx.minutes.tubeHistory(tubeParam(req)))),
  );

  r.get(
    API.connections,
    'viewer',
    route(async (_req, res) => {
      const now = ops.now();
      res.json((await ops.sessions()).map((s) => connectionDto(s, now)));
    }),
  );

  r.delete(
    '/api/connections/:id',
    { role: 'admin', audit: { action: 'connection.close', target: namedInPath('connection', 'id') } },
    route(async (req, res) => {
      valueOf(await ops.closeConnection(parse(jobId, req.params.id)));
      res.status(204).end();
    }),
  );

  // Signed in first: a caller without a token learns nothing of which paths exist.
  r.router.use('/api', ctx.access.guard({ role: 'viewer' }), (_req, _res, next) => next(new ApiError(404, 'NOT_FOUND', 'no such API path')));
  return r.router;
}
