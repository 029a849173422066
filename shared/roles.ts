/**
 * Dashboard roles, weakest first. Each role may do what the ones before it may:
 * - viewer: reads only;
 * - operator: job and tube actions (put, kick, delete, move, edit, pause, clear, bulk);
 * - admin: everything else (a tube's dead-letter setting, attached servers, closing connections).
 * The server's route table says which role each route needs (server/admin/guarded-router.ts);
 * the dashboard asks `roleAllows` only to hide what would be refused anyway.
 */
export const ROLES = ['viewer', 'operator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** True when `role` may do what `needed` may. */
export function roleAllows(role: Role, needed: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

/** True for one of ROLES (a users file is read from JSON). */
export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}
