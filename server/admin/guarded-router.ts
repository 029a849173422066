/**
 * The only way admin routes are registered: each names the role it needs (and, for a change,
 * its audit action), and the guard for that comes first on the route (access.ts). A route added
 * with express's own `router.get` has no guard, and the route-table test fails.
 */
import express, { type RequestHandler, type Router } from 'express';
import type { Access, AuditSpec, RouteRole } from './access.js';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Register = (path: string | RegExp, spec: RouteRole | { role: RouteRole; audit: AuditSpec }, ...handlers: RequestHandler[]) => void;

export type GuardedRouter = Record<Method, Register> & { readonly router: Router };

export function guardedRouter(access: Access): GuardedRouter {
  const router = express.Router();
  const register =
    (method: Method): Register =>
    (path, spec, ...handlers) => {
      router[method](path, access.guard(typeof spec === 'string' ? { role: spec } : spec), ...handlers);
    };
  return { router, get: register('get'), post: register('post'), put: register('put'), patch: register('patch'), delete: register('delete') };
}
