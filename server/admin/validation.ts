import type { Response } from 'express';
import { z } from 'zod';
import { ApiError } from './errors.js';

/**
 * A page cursor as the operations make them (engine/job-pages.ts); anything else is a client
 * error, not a silent restart from the first page.
 */
export const pageCursor = z
  .string()
  .max(64)
  .regex(/^\d+(?:\.\d+)?(?:_\d+)?$/, 'not a cursor from an earlier page')
  .optional();

/** A yes/no query parameter: true, false, 1 or 0. */
export const queryFlag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** Aborted when the client goes away before its answer is sent (a long search then stops). */
export function abandonedSignal(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableEnded) abort.abort();
  });
  return abort.signal;
}

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
