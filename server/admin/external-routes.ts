import express, { type Request, type Response, type Router } from 'express';
import type { Access } from './access.js';
import { bodyOnly, externalThing } from './audit-targets.js';
import { guardedRouter } from './guarded-router.js';
import { z } from 'zod';
import { API } from '../../shared/api.js';
import type { ExternalJobDto, ExternalServerDto } from '../../shared/dto.js';
import { MAX_TUBE_NAME_LENGTH, MAX_U32, isValidTubeName } from '../../shared/limits.js';
import { bodyDto } from './dto.js';
import { ApiError } from './errors.js';
import type { ExternalJob, ExternalServer, ExternalServers } from './external.js';
import { parseOrThrow as parse } from './validation.js';

const serverId = z.coerce.number().int().min(1).max(1_000_000);
const jobId = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
const tubeName = z.string().max(MAX_TUBE_NAME_LENGTH).refine(isValidTubeName, 'not a valid tube name');
const u32 = z.number().int().min(0).max(MAX_U32);
const addSchema = z.strictObject({ address: z.string().min(3).max(300) });
const peekQuery = z.object({ state: z.enum(['ready', 'delayed', 'buried']) });
const kickSchema = z.strictObject({ bound: u32 });
const pauseSchema = z.strictObject({ seconds: u32 });
/** A put on an external server: text only (its bodies are what the protocol carries), durations in seconds. */
const putSchema = z.strictObject({ body: z.string().max(1024 * 1024), priority: u32.default(0), delay: u32.default(0), ttr: u32.default(60) });

function serverDto(s: ExternalServer): ExternalServerDto {
  return { id: s.id, address: s.address, source: s.source, status: s.status, error: s.error, version: s.version };
}

function jobDto(job: ExternalJob): ExternalJobDto {
  return { id: job.id, body: bodyDto(job.body), stats: job.stats };
}

/**
 * Other beanstalkd servers, through the beanstalkd protocol (external.ts): the list (each one
 * probed with a short deadline), adding and removing one, and what the protocol allows on each.
 * Read-only mode and the token apply as to the rest of /api; adding needs both, since it makes
 * this server open connections.
 */
export function externalRoutes(servers: ExternalServers, access: Access): Router {
  const r = guardedRouter(access);
  const json = express.json({ limit: '2mb', strict: true });
  const route = (fn: (req: Request, res: Response) => unknown) => fn;
  const server = (req: Request): ExternalServer => servers.get(parse(serverId, req.params.id));
  // An action on one job of an external server: 204, or 404 with `missing` when the server says no.
  const jobAction = (act: (s: ExternalServer, id: number) => Promise<boolean>, missing: string) =>
    route(async (req, res) => {
      if (!(await act(server(req), parse(jobId, req.params.jid)))) throw new ApiError(404, 'NOT_FOUND', missing);
      res.status(204).end();
    });
  const tube = (req: Request): string => parse(tubeName, String(req.params.name));
  // A change to one tube of an external server, as the JSON body (checked by `schema`) asks.
  const tubeChange = <T>(schema: z.ZodType<T>, act: (s: ExternalServer, tube: string, body: T, res: Response) => Promise<void>) =>
    route(async (req, res) => {
      const body = parse(schema, req.body);
      await act(server(req), tube(req), body, res);
    });

  r.get(
    API.external,
    'viewer',
    route(async (_req, res) => {
      const all = servers.list();
      await Promise.all(all.map((s) => s.probe()));
      res.json(all.map(serverDto));
    }),
  );
  r.post(
    API.external,
    { role: 'admin', audit: { action: 'server.attach', target: bodyOnly(['address']) } },
    json,
    route((req, res) => {
      const { address } = parse(addSchema, req.body);
      res.status(201).json(serverDto(servers.add(address, 'dashboard')));
    }),
  );
  r.delete(
    '/api/external/:id',
    { role: 'admin', audit: { action: 'server.detach', target: externalThing } },
    route((req, res) => {
      servers.remove(parse(serverId, req.params.id));
      res.status(204).end();
    }),
  );
  r.get(
    '/api/external/:id/stats',
    'viewer',
    route(async (req, res) => res.json(await server(req).stats())),
  );
  r.get(
    '/api/external/:id/tubes',
    'viewer',
    route(async (req, res) => res.json(await server(req).tubes())),
  );
  r.get(
    '/api/external/:id/tubes/:name/peek',
    'viewer',
    route(async (req, res) => {
      const { state } = parse(peekQuery, req.query);
      const job = await server(req).peek(tube(req), state);
      res.json(job === null ? null : jobDto(job));
    }),
  );
  r.post(
    '/api/external/:id/tubes/:name/jobs',
    { role: 'operator', audit: { action: 'external.put', target: externalThing } },
    json,
    tubeChange(putSchema, async (s, name, r, res) => {
      res.status(201).json({ id: await s.put(name, r.body, r.priority, r.delay, r.ttr) });
    }),
  );
  r.post(
    '/api/external/:id/tubes/:name/kick',
    { role: 'operator', audit: { action: 'external.kick', target: externalThing } },
    json,
    tubeChange(kickSchema, async (s, name, { bound }, res) => {
      res.json({ count: await s.kick(name, bound) });
    }),
  );
  r.post(
    '/api/external/:id/tubes/:name/pause',
    { role: 'operator', audit: { action: 'external.pause', target: externalThing } },
    json,
    tubeChange(pauseSchema, async (s, name, { seconds }, res) => {
      if (!(await s.pause(name, seconds))) throw new ApiError(404, 'NOT_FOUND', 'no such tube there');
      res.status(204).end();
    }),
  );
  r.get(
    '/api/external/:id/jobs/:jid',
    'viewer',
    route(async (req, res) => {
      const job = await server(req).job(parse(jobId, req.params.jid));
      if (job === null) throw new ApiError(404, 'NOT_FOUND', 'no such job there');
      res.json(jobDto(job));
    }),
  );
  r.delete(
    '/api/external/:id/jobs/:jid',
    { role: 'operator', audit: { action: 'external.job-delete', target: externalThing } },
    // beanstalkd deletes only jobs no other client holds: a reserved one is NOT_FOUND.
    jobAction((s, id) => s.deleteJob(id), 'no such job there, or a worker holds it'),
  );
  r.post(
    '/api/external/:id/jobs/:jid/kick',
    { role: 'operator', audit: { action: 'external.job-kick', target: externalThing } },
    jobAction((s, id) => s.kickJob(id), 'no such buried or delayed job there'),
  );
  return r.router;
}
