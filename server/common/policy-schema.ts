import { z } from 'zod';
import { MAX_U32 } from '../../shared/limits.js';
import { isEmptyPolicy, type TubePolicy } from '../../shared/policy.js';

/** The most jobs per second a rate may allow (beyond it a rate limits nothing a node can serve). */
export const MAX_RATE_PER_SECOND = 1_000_000;

const count = z.number().int().min(0).max(MAX_U32);

/**
 * A tube policy as the API, the policies file and the binlog give it: every limit optional (null
 * or absent: none). The one check of a policy's shape and ranges, so each of those places
 * accepts exactly the same policies.
 */
export const tubePolicySchema = z
  .object({
    concurrency: count.min(1).nullable().default(null),
    rate: z
      .object({
        perSecond: z.number().positive().max(MAX_RATE_PER_SECOND),
        /** Absent: one second's worth (at least 1). */
        burst: count.min(1).optional(),
      })
      .strict()
      .transform((r) => ({ perSecond: r.perSecond, burst: r.burst ?? Math.max(1, Math.ceil(r.perSecond)) }))
      .nullable()
      .default(null),
    queueCap: count.nullable().default(null),
    timeoutBackoff: z
      .object({
        baseMs: count.min(1),
        factor: z.number().min(1).max(100).default(2),
        maxMs: count.min(1),
        jitter: z.number().min(0).max(1).default(0),
      })
      .strict()
      .refine((b) => b.maxMs >= b.baseMs, { message: 'maxMs is below baseMs' })
      .nullable()
      .default(null),
  })
  .strict();

/** A parsed policy, or null for one that limits nothing (stored as no policy). */
export function policyOrNull(policy: TubePolicy): TubePolicy | null {
  return isEmptyPolicy(policy) ? null : policy;
}

/** The policy in `value`, or a message saying what is wrong with it. */
export function parsePolicy(value: unknown): { ok: true; policy: TubePolicy } | { ok: false; problem: string } {
  const r = tubePolicySchema.safeParse(value);
  if (r.success) return { ok: true, policy: r.data };
  const issue = r.error.issues[0]!;
  return { ok: false, problem: `${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}` };
}
