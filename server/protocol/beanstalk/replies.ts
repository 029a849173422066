import type { FailureCode } from '../../operations/operations.js';

/** Fixed replies, encoded once. */
export const REPLY = {
  BAD_FORMAT: Buffer.from('BAD_FORMAT\r\n'),
  UNKNOWN_COMMAND: Buffer.from('UNKNOWN_COMMAND\r\n'),
  EXPECTED_CRLF: Buffer.from('EXPECTED_CRLF\r\n'),
  JOB_TOO_BIG: Buffer.from('JOB_TOO_BIG\r\n'),
  DRAINING: Buffer.from('DRAINING\r\n'),
  OUT_OF_MEMORY: Buffer.from('OUT_OF_MEMORY\r\n'),
  INTERNAL_ERROR: Buffer.from('INTERNAL_ERROR\r\n'),
  NOT_FOUND: Buffer.from('NOT_FOUND\r\n'),
  NOT_IGNORED: Buffer.from('NOT_IGNORED\r\n'),
  DELETED: Buffer.from('DELETED\r\n'),
  RELEASED: Buffer.from('RELEASED\r\n'),
  BURIED: Buffer.from('BURIED\r\n'),
  TOUCHED: Buffer.from('TOUCHED\r\n'),
  KICKED: Buffer.from('KICKED\r\n'),
  PAUSED: Buffer.from('PAUSED\r\n'),
  TIMED_OUT: Buffer.from('TIMED_OUT\r\n'),
  DEADLINE_SOON: Buffer.from('DEADLINE_SOON\r\n'),
  /** --acl: the identity may not run this command, or not on this tube (not a beanstalkd word: Beanpole's own). */
  FORBIDDEN: Buffer.from('FORBIDDEN\r\n'),
} as const;

export const CRLF = Buffer.from('\r\n');

/** The first word (and its space) of replies that carry values. */
export const WORD = {
  INSERTED: Buffer.from('INSERTED '),
  RESERVED: Buffer.from('RESERVED '),
  FOUND: Buffer.from('FOUND '),
  KICKED: Buffer.from('KICKED '),
  USING: Buffer.from('USING '),
  WATCHING: Buffer.from('WATCHING '),
  OK: Buffer.from('OK '),
} as const;

/**
 * The protocol word for each engine failure: a table, so that a new FailureCode does not compile
 * until it has its word.
 */
const FAILURE_REPLY: Readonly<Record<FailureCode, Buffer>> = {
  NOT_FOUND: REPLY.NOT_FOUND,
  DRAINING: REPLY.DRAINING,
  OUT_OF_MEMORY: REPLY.OUT_OF_MEMORY,
  NOT_IGNORED: REPLY.NOT_IGNORED,
  INTERNAL_ERROR: REPLY.INTERNAL_ERROR,
  JOB_TOO_BIG: REPLY.JOB_TOO_BIG,
  // No protocol command edits a job; to a client a held job is not found, as for delete.
  JOB_RESERVED: REPLY.NOT_FOUND,
  // beanstalkd's own word for "cannot take it now" (no beanstalkd put has a queue limit yet).
  QUEUE_FULL: REPLY.OUT_OF_MEMORY,
};

/** The protocol word for an engine failure. */
export function failureReply(code: FailureCode): Buffer {
  return FAILURE_REPLY[code];
}
