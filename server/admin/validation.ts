import type { z } from 'zod';
import { ApiError } from './errors.js';

/** The value `schema` makes of `value`, or a 400 naming the first problem. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw new ApiError(400, 'BAD_REQUEST', `${where}${issue.message}`);
  }
  return r.data;
}
