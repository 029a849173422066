import type { ErrorRequestHandler, Response } from 'express';
import type { ApiErrorDto } from '../../shared/dto.js';
import type { FailureCode, Result } from '../operations/operations.js';

/** An answer other than success, with its HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const STATUS: Record<FailureCode, number> = {
  NOT_FOUND: 404,
  JOB_RESERVED: 409,
  DRAINING: 503,
  OUT_OF_MEMORY: 507,
  INTERNAL_ERROR: 500,
  NOT_IGNORED: 409,
  JOB_TOO_BIG: 413,
  QUEUE_FULL: 429,
};

const MESSAGE: Record<FailureCode, string> = {
  NOT_FOUND: 'no such job or tube',
  JOB_RESERVED: 'a worker holds this job; it can be changed once it is released, buried or deleted',
  DRAINING: 'the server is draining and takes no new jobs',
  OUT_OF_MEMORY: 'no room: the memory budget or the binlog is full',
  INTERNAL_ERROR: 'the change could not be recorded',
  NOT_IGNORED: 'not possible',
  JOB_TOO_BIG: 'the body is over the maximum job size',
  QUEUE_FULL: 'the queue holds as many jobs as its limit allows',
};

/** The HTTP error for an engine failure code. */
export function engineError(code: FailureCode): ApiError {
  return new ApiError(STATUS[code], code, MESSAGE[code]);
}

/** The value of a successful result, or the HTTP error for its failure. */
export function valueOf<T>(result: Result<T>): T {
  if (!result.ok) throw engineError(result.code);
  return result.value;
}

export function sendError(res: Response, err: ApiError): void {
  const body: ApiErrorDto = { error: err.code, message: err.message };
  res.status(err.status).json(body);
}

/** Last handler: ApiErrors and body-parser errors become JSON 4xx; anything else is a 500. */
export function errorHandler(log: { error: (obj: object, msg: string) => void }): ErrorRequestHandler {
  return (err: unknown, _req, res, _next) => {
    if (err instanceof ApiError) return sendError(res, err);
    const status = (err as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return sendError(res, new ApiError(status, 'BAD_REQUEST', (err as Error).message));
    }
    log.error({ err }, 'admin API: unexpected error');
    sendError(res, new ApiError(500, 'INTERNAL_ERROR', 'unexpected error'));
  };
}
