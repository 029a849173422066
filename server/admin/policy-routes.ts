import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import type { TubePolicyViewDto } from '../../shared/dto.js';
import { policyOrNull, tubePolicySchema } from '../common/policy-schema.js';
import { afterChange } from '../operations/after-change.js';
import type { Operations, TubePolicyView } from '../operations/operations.js';
import type { PolicyOrigin } from '../policies/file-policies.js';
import type { Access } from './access.js';
import { oneTube } from './audit-targets.js';
import { tubePolicyDto } from './dto.js';
import { valueOf } from './errors.js';
import { guardedRouter } from './guarded-router.js';
import { tubeName } from './routes.js';
import { parseOrThrow as parse } from './validation.js';

/** Gearman function names are bytes; the API takes them as text, as the dashboard shows them. */
const functionName = z.string().min(1).max(512);
const POLICY_FIELDS = ['concurrency', 'rate', 'queueCap', 'timeoutBackoff'];

/**
 * A tube's policy (and a Gearman function's): read by any role, set and cleared by admins, as
 * the dead-letter setting is. A policy with no limit in it is no policy. The answer says whether
 * the --policies file set it (the file sets it again at its next apply).
 */
export function policyRoutes(tubes: Operations, functions: Operations | null, origin: PolicyOrigin | null, access: Access): Router {
  const r = guardedRouter(access);
  const json = express.json({ limit: 16 * 1024, strict: true });
  const realms = [
    { ops: tubes, realm: 'tubes' as const, path: '/api/tubes/:name/policy', name: tubeName, audit: 'tube.policy' },
    ...(functions === null ? [] : [{ ops: functions, realm: 'functions' as const, path: '/api/gearman/functions/:name/policy', name: functionName, audit: 'gearman.function.policy' }]),
  ];
  for (const { ops, realm, path, name, audit } of realms) {
    const nameOf = (req: Request): string => parse(name, String(req.params.name));
    const send = async (res: Response, view: TubePolicyView): Promise<void> => {
      const counts = view.state === null ? undefined : await ops.tube(view.tube);
      const dto: TubePolicyViewDto = {
        tube: view.tube,
        policy: view.policy,
        state: tubePolicyDto(view.state, counts?.ready ?? 0, ops.now()),
        fromFile: origin?.fromFile(realm, view.tube) ?? false,
      };
      res.json(dto);
    };
    r.get(path, 'viewer', async (req, res) => send(res, await ops.tubePolicy(nameOf(req))));
    r.put(path, { role: 'admin', audit: { action: audit, target: oneTube(POLICY_FIELDS) } }, json, async (req, res) => {
      const policy = policyOrNull(parse(tubePolicySchema, req.body));
      const view = valueOf(await ops.setTubePolicy(nameOf(req), policy));
      await afterChange(ops);
      await send(res, view);
    });
    r.delete(path, { role: 'admin', audit: { action: `${audit}.clear`, target: oneTube() } }, async (req, res) => {
      const view = valueOf(await ops.setTubePolicy(nameOf(req), null));
      await afterChange(ops);
      await send(res, view);
    });
  }
  return r.router;
}
