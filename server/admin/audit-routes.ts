/** Who is signed in (GET /api/me) and what has been changed through the API (GET /api/audit). */
import type { Router } from 'express';
import { z } from 'zod';
import { API } from '../../shared/api.js';
import type { SignedInDto } from '../../shared/dto.js';
import { MAX_AUDIT_PAGE, type AuditLog } from '../common/audit-log.js';
import { principalOf, type Access } from './access.js';
import { guardedRouter } from './guarded-router.js';
import { parseOrThrow } from './validation.js';

const auditQuery = z.object({
  limit: z.coerce.number().int().min(1).max(MAX_AUDIT_PAGE).default(50),
  before: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
});

export function auditRoutes(audit: AuditLog, access: Access): Router {
  const r = guardedRouter(access);
  r.get(API.me, 'viewer', (req, res) => {
    const principal = principalOf(req)!;
    res.json({ user: principal.user, role: access.effectiveRole(principal) } satisfies SignedInDto);
  });
  r.get(API.audit, 'viewer', async (req, res) => {
    const q = parseOrThrow(auditQuery, req.query);
    res.json(await audit.page(q.before ?? null, q.limit));
  });
  return r.router;
}
