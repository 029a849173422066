/**
 * The one check in front of every admin route: who the request is from (its bearer token), whether
 * their role may use the route, and, for a change, an audit entry once it is answered. Routes
 * register through guarded-router.ts, which puts this check first on each; a test walks Express's
 * route table to see that no route lacks it.
 */
import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import type { AuditTargetDto } from '../../shared/dto.js';
import { roleAllows, type Role } from '../../shared/roles.js';
import type { AuditLog } from '../common/audit-log.js';
import { ApiError } from './errors.js';
import { bearer } from './security.js';
import type { AdminUsers, Principal } from './users.js';

/** Who may use a route: a role, or anyone at all (the config, /healthz, the dashboard's files). */
export type RouteRole = Role | 'public';

/** A change worth an audit entry: its name, and what it was done to (read once it is answered). */
export interface AuditSpec {
  action: string;
  target: (req: Request) => AuditTargetDto;
}

export interface RouteSpec {
  role: RouteRole;
  /** Set on every route that changes something; a read has none. */
  audit?: AuditSpec;
}

const principals = new WeakMap<IncomingMessage, Principal>();
/** The specs of the guards this module made: what the route-table test reads. */
const guards = new WeakMap<object, RouteSpec>();

/** The spec of `handler` when it is a route guard, else undefined. */
export function guardSpec(handler: unknown): RouteSpec | undefined {
  return typeof handler === 'function' ? guards.get(handler) : undefined;
}

/** Who sent `req` (set by the route's guard; undefined on a public route). */
export function principalOf(req: IncomingMessage): Principal | undefined {
  return principals.get(req);
}

export class Access {
  constructor(
    readonly users: AdminUsers,
    /** --admin-read-only: every role acts as a viewer. */
    readonly readOnly: boolean,
    private readonly audit: AuditLog,
    private readonly now: () => number = Date.now,
  ) {}

  /** What `principal` may do here: their role, or viewer in read-only mode. */
  effectiveRole(principal: Principal): Role {
    return this.readOnly ? 'viewer' : principal.role;
  }

  /** The guard of a route with `spec`: signs the request in, checks its role, audits a change. */
  guard(spec: RouteSpec): RequestHandler {
    const handler: RequestHandler = (req, res, next) => {
      if (spec.role === 'public') return next();
      const principal = this.users.identify(bearer(req.headers.authorization));
      if (principal === null) return next(new ApiError(401, 'UNAUTHORIZED', 'this API needs a token (Authorization: Bearer ...)'));
      principals.set(req, principal);
      if (spec.audit !== undefined) this.auditWhenAnswered(req, res, principal, spec.audit);
      if (roleAllows(this.effectiveRole(principal), spec.role)) return next();
      if (this.readOnly && roleAllows(principal.role, spec.role)) {
        return next(new ApiError(403, 'READ_ONLY', 'this dashboard is read-only (--admin-read-only)'));
      }
      next(new ApiError(403, 'FORBIDDEN', `this needs the ${spec.role} role; ${principal.user ?? 'this token'} is ${principal.role}`));
    };
    guards.set(handler, spec);
    return handler;
  }

  /** Records the change once its answer is sent (or the client went away first). */
  private auditWhenAnswered(req: Request, res: Response, principal: Principal, spec: AuditSpec): void {
    let answer: unknown;
    // Express puts the parent's params back when a route passes an error on: keep the route's.
    const params = { ...req.params };
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      answer = body;
      return json(body);
    };
    res.once('close', () => {
      const sent = answer as { error?: unknown; count?: unknown } | undefined;
      const status = res.writableFinished ? res.statusCode : 499;
      let target: AuditTargetDto;
      req.params = params;
      try {
        target = spec.target(req);
      } catch {
        target = {}; // a request too malformed to say what it was aimed at
      }
      this.audit.append({
        at: this.now(),
        user: principal.user,
        role: principal.role,
        action: spec.action,
        target,
        result: {
          status,
          ...(status === 499 ? { error: 'ABANDONED' } : typeof sent?.error === 'string' ? { error: sent.error } : {}),
          ...(typeof sent?.count === 'number' ? { count: sent.count } : {}),
        },
      });
    });
  }
}
