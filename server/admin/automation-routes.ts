import express, { type Request, type Router } from 'express';
import { z } from 'zod';
import { API, type CronPreviewDto } from '../../shared/api.js';
import { ALERT_CONDITIONS, type AlertEventDto, type AlertRuleDto, type ScheduleDto, type ScheduleRunDto } from '../../shared/dto.js';
import type { AlertEvent, AlertRule, AlertRuleFields } from '../alerts/rule.js';
import { TUBE_GLOB } from '../common/tube-glob.js';
import type { Automation } from '../automation/automation.js';
import type { Operations } from '../operations/operations.js';
import { MAX_CRON_LENGTH, parseCron } from '../schedules/cron.js';
import type { Schedule, ScheduleFields, ScheduleRun } from '../schedules/schedule.js';
import type { Access } from './access.js';
import { bodyOnly, namedInPath } from './audit-targets.js';
import { ApiError } from './errors.js';
import { guardedRouter } from './guarded-router.js';
import { DEFAULT_TTR_MS, isBase64, tubeName, u32 } from './routes.js';
import { parseOrThrow as parse } from './validation.js';

const id = z.coerce.number().int().min(1).max(2 ** 31 - 1);
const name = z.string().trim().min(1).max(100);
const timeZone = z.string().min(1).max(64);
const cron = z.string().trim().min(1).max(MAX_CRON_LENGTH);
const scheduleFields = {
  name,
  cron,
  timeZone: timeZone.default('UTC'),
  tube: tubeName,
  body: z.string(),
  encoding: z.enum(['utf8', 'base64']).default('utf8'),
  priority: u32.default(0),
  delaySeconds: u32.default(0),
  ttrSeconds: u32.default(DEFAULT_TTR_MS / 1000),
  paused: z.boolean().default(false),
  missed: z.enum(['skip', 'catch-up-once']).default('skip'),
};
const scheduleSchema = z.strictObject(scheduleFields);
const schedulePatch = z.strictObject({
  name: name.optional(),
  cron: cron.optional(),
  timeZone: timeZone.optional(),
  tube: tubeName.optional(),
  body: z.string().optional(),
  encoding: z.enum(['utf8', 'base64']).optional(),
  priority: u32.optional(),
  delaySeconds: u32.optional(),
  ttrSeconds: u32.optional(),
  paused: z.boolean().optional(),
  missed: z.enum(['skip', 'catch-up-once']).optional(),
});
const previewQuery = z.object({ cron, timeZone: timeZone.default('UTC') });

const webhookUrl = z
  .string()
  .max(2000)
  .refine((text) => {
    try {
      const url = new URL(text);
      return url.protocol === 'http:' || url.protocol === 'https:';
    } catch {
      return false;
    }
  }, 'not an http:// or https:// URL');
const alertFields = {
  name,
  condition: z.enum(ALERT_CONDITIONS),
  threshold: u32.default(0),
  forSeconds: u32.default(0),
  tubes: z.string().regex(TUBE_GLOB, 'a tube name or glob (* and ?)').default('*'),
  webhookUrl,
  format: z.enum(['json', 'slack']).default('json'),
  minIntervalSeconds: u32.default(300),
  enabled: z.boolean().default(true),
};
const alertSchema = z.strictObject(alertFields);
const alertPatch = z.strictObject({
  name: alertFields.name.optional(),
  condition: alertFields.condition.optional(),
  threshold: u32.optional(),
  forSeconds: u32.optional(),
  tubes: z.string().regex(TUBE_GLOB, 'a tube name or glob (* and ?)').optional(),
  webhookUrl: webhookUrl.optional(),
  format: alertFields.format.optional(),
  minIntervalSeconds: u32.optional(),
  enabled: z.boolean().optional(),
});
const historyQuery = z.object({ rule: id.optional(), limit: z.coerce.number().int().min(1).max(500).default(100) });

type ScheduleInput = z.infer<typeof scheduleSchema>;
type AlertInput = z.infer<typeof alertSchema>;

/** The wire's shape of a schedule (seconds, text or base64) from the stored one (ms, bytes). */
function scheduleInput(s: Schedule): ScheduleInput {
  return {
    name: s.name,
    cron: s.cron,
    timeZone: s.timeZone,
    tube: s.tube,
    body: s.body.toString(s.encoding),
    encoding: s.encoding,
    priority: s.priority,
    delaySeconds: s.delayMs / 1000,
    ttrSeconds: s.ttrMs / 1000,
    paused: s.paused,
    missed: s.missed,
  };
}

function alertInput(r: AlertRule): AlertInput {
  return {
    name: r.name,
    condition: r.condition,
    threshold: r.threshold,
    forSeconds: r.forMs / 1000,
    tubes: r.tubes,
    webhookUrl: r.webhookUrl,
    format: r.format,
    minIntervalSeconds: r.minIntervalMs / 1000,
    enabled: r.enabled,
  };
}

const alertRuleFields = (a: AlertInput): AlertRuleFields => ({
  name: a.name,
  condition: a.condition,
  threshold: a.threshold,
  forMs: a.forSeconds * 1000,
  tubes: a.tubes,
  webhookUrl: a.webhookUrl,
  format: a.format,
  minIntervalMs: a.minIntervalSeconds * 1000,
  enabled: a.enabled,
});

function eventDto(e: AlertEvent): AlertEventDto {
  return { ...e };
}

/**
 * /api/schedules and /api/alerts: each route validates its input, calls the schedules' or the
 * alerts' service and maps the answer to JSON. A schedule's job fields are a put's (the same
 * limits: tube name, u32 priority, seconds, the maximum job size).
 */
export function automationRoutes(ops: Operations, automation: Automation, access: Access): Router {
  const { schedules, alerts } = automation;
  const r = guardedRouter(access);
  const json = express.json({ limit: Math.ceil(ops.maxJobSize * 1.4) + 64 * 1024, strict: true });
  const noSchedule = (): ApiError => new ApiError(404, 'NOT_FOUND', 'no such schedule');
  const noRule = (): ApiError => new ApiError(404, 'NOT_FOUND', 'no such alert rule');

  const scheduleFieldsOf = (s: ScheduleInput): ScheduleFields => {
    if (s.encoding === 'base64' && !isBase64(s.body)) throw new ApiError(400, 'BAD_REQUEST', 'body: not base64');
    const body = Buffer.from(s.body, s.encoding);
    if (ops.isTooBig(body.length)) {
      throw new ApiError(413, 'JOB_TOO_BIG', `body: ${body.length} bytes is over the maximum job size (${ops.maxJobSize})`);
    }
    const { delaySeconds, ttrSeconds, ...rest } = s;
    return { ...rest, body, delayMs: delaySeconds * 1000, ttrMs: ttrSeconds * 1000 };
  };
  const runDto = async (r: ScheduleRun): Promise<ScheduleRunDto> => ({
    slotAt: r.slotAt,
    firedAt: r.firedAt,
    kind: r.kind,
    jobId: r.jobId,
    jobState: r.jobId === null ? null : ((await ops.job(r.jobId))?.state ?? null),
    error: r.error,
    node: r.node,
  });
  const scheduleDto = async (s: Schedule): Promise<ScheduleDto> => ({
    id: s.id,
    ...scheduleInput(s),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    nextRuns: schedules.nextRuns(s, automation.now()),
    lastRuns: await Promise.all((await schedules.runs(s.id)).map(runDto)),
  });
  const ruleDto = (r: AlertRule, active: readonly { ruleId: number; tube: string }[]): AlertRuleDto => ({
    id: r.id,
    ...alertInput(r),
    createdAt: r.createdAt,
    activeTubes: active.filter((a) => a.ruleId === r.id).map((a) => a.tube),
  });
  const badCron = (message: string): ApiError => new ApiError(400, 'BAD_REQUEST', message);

  r.get(API.schedules, 'viewer', async (_req, res) => {
    res.json(await Promise.all((await schedules.list()).map(scheduleDto)));
  });
  r.post(API.schedules, { role: 'admin', audit: { action: 'schedule.create', target: bodyOnly(['name', 'tube', 'cron', 'timeZone']) } }, json, async (req, res) => {
    const r = await schedules.create(scheduleFieldsOf(parse(scheduleSchema, req.body)), automation.now());
    if (!r.ok) throw badCron(r.message);
    res.status(201).json(await scheduleDto(r.value));
  });
  r.get(API.cronPreview, 'viewer', (req, res) => {
    const q = parse(previewQuery, req.query);
    const r = parseCron(q.cron, q.timeZone);
    res.json((r.ok ? { ok: true, nextRuns: r.value.next(5, automation.now()) } : { ok: false, message: r.message }) satisfies CronPreviewDto);
  });
  const scheduleId = (req: Request): number => parse(id, req.params.id);
  r.get('/api/schedules/:id', 'viewer', async (req, res) => {
    const s = await schedules.get(scheduleId(req));
    if (s === undefined) throw noSchedule();
    res.json(await scheduleDto(s));
  });
  r.patch('/api/schedules/:id', { role: 'admin', audit: { action: 'schedule.edit', target: namedInPath('schedule', 'id', ['name', 'tube', 'cron', 'timeZone', 'paused', 'missed']) } }, json, async (req, res) => {
    const sid = scheduleId(req);
    const patch = parse(schedulePatch, req.body);
    const old = await schedules.get(sid);
    if (old === undefined) throw noSchedule();
    // An encoding says how `body` is written: alone it would re-read the old bytes' text.
    if (patch.encoding !== undefined && patch.body === undefined) throw new ApiError(400, 'BAD_REQUEST', 'encoding: give it with a body');
    const merged = parse(scheduleSchema, { ...scheduleInput(old), ...patch });
    const r = await schedules.update(sid, scheduleFieldsOf(merged), automation.now());
    if (!r.ok) throw badCron(r.message);
    if (r.value === undefined) throw noSchedule();
    res.json(await scheduleDto(r.value));
  });
  r.delete('/api/schedules/:id', { role: 'admin', audit: { action: 'schedule.delete', target: namedInPath('schedule', 'id') } }, async (req, res) => {
    if (!(await schedules.remove(scheduleId(req)))) throw noSchedule();
    res.status(204).end();
  });
  r.post('/api/schedules/:id/run', { role: 'operator', audit: { action: 'schedule.run', target: namedInPath('schedule', 'id') } }, async (req, res) => {
    const run = await schedules.runNow(scheduleId(req), automation.now());
    if (run === undefined) throw noSchedule();
    res.status(201).json(await runDto(run));
  });

  r.get(API.alerts, 'viewer', async (_req, res) => {
    const active = await alerts.active();
    res.json((await alerts.rules()).map((r) => ruleDto(r, active)));
  });
  r.post(API.alerts, { role: 'admin', audit: { action: 'alert.create', target: bodyOnly(['name', 'condition', 'tubes']) } }, json, async (req, res) => {
    const rule = await alerts.create(alertRuleFields(parse(alertSchema, req.body)), automation.now());
    res.status(201).json(ruleDto(rule, []));
  });
  r.get(API.alertHistory, 'viewer', async (req, res) => {
    const q = parse(historyQuery, req.query);
    res.json((await alerts.events(q.rule ?? null, q.limit)).map(eventDto));
  });
  const ruleId = (req: Request): number => parse(id, req.params.id);
  r.get('/api/alerts/:id', 'viewer', async (req, res) => {
    const rule = await alerts.rule(ruleId(req));
    if (rule === undefined) throw noRule();
    res.json(ruleDto(rule, await alerts.active()));
  });
  r.patch('/api/alerts/:id', { role: 'admin', audit: { action: 'alert.edit', target: namedInPath('alert rule', 'id', ['name', 'condition', 'tubes', 'enabled']) } }, json, async (req, res) => {
    const rid = ruleId(req);
    const patch = parse(alertPatch, req.body);
    const old = await alerts.rule(rid);
    if (old === undefined) throw noRule();
    const rule = await alerts.update(rid, alertRuleFields(parse(alertSchema, { ...alertInput(old), ...patch })));
    if (rule === undefined) throw noRule();
    res.json(ruleDto(rule, await alerts.active()));
  });
  r.delete('/api/alerts/:id', { role: 'admin', audit: { action: 'alert.delete', target: namedInPath('alert rule', 'id') } }, async (req, res) => {
    if (!(await alerts.remove(ruleId(req)))) throw noRule();
    res.status(204).end();
  });
  return r.router;
}
