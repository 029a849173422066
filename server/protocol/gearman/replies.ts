import { encodePacket, PACKET } from './packets.js';

/**
 * ERROR packets: gearmand's codes and texts (checked against gearmand 1.1.20), encoded once.
 */
export const ERRORS = {
  /** A response packet sent as a request, or a type the server does not know. */
  INVALID_COMMAND: ['INVALID_COMMAND', 'Command not expected'],
  /** `\0RES` from a client. */
  INVALID_MAGIC: ['INVALID_MAGIC', 'Request magic expected'],
  /** A request whose arguments are not all there. */
  INVALID_PACKET: ['INVALID_PACKET', 'Invalid packet'],
  /** WORK_STATUS, WORK_COMPLETE, WORK_FAIL, WORK_EXCEPTION for a job this worker does not hold. */
  JOB_NOT_FOUND: ['JOB_NOT_FOUND', 'Job given in work result not found'],
  /** WORK_DATA, WORK_WARNING for a job this worker does not hold (gearmand words it differently). */
  NO_SUCH_JOB: ['JOB_NOT_FOUND', 'Job does not exist on server'],
  /** OPTION_REQ with an option other than "exceptions". */
  UNKNOWN_OPTION: ['UNKNOWN_OPTION', 'Server does not recognize given option'],
  /** A submit beyond `maxqueue` (gearmand 1.1.20's code for it). */
  QUEUE_FULL: ['QUEUE_ERROR', 'Job queue is full'],
  /** Job data over `--gearman-max-size`, or a packet over that and room for its other arguments. */
  TOO_LARGE: ['ARGUMENT_TOO_LARGE', 'Packet is larger than the server accepts'],
  /** A function name that is empty or longer than the server takes. */
  BAD_FUNCTION: ['INVALID_FUNCTION_NAME', 'Function name is empty or longer than 255 bytes'],
  /** A unique id over 64 bytes. */
  BAD_UNIQUE: ['INVALID_ARGUMENT', 'Unique id is longer than 64 bytes'],
  /** SUBMIT_JOB_EPOCH or SUBMIT_JOB_SCHED with a time that does not parse. */
  BAD_TIME: ['INVALID_ARGUMENT', 'Run time is not valid'],
  /** The server drains, or its memory budget is full. */
  DRAINING: ['SHUTDOWN', 'Server is shutting down'],
  NO_MEMORY: ['MEMORY_ALLOCATION_FAILURE', 'Server is out of memory for jobs'],
  INTERNAL: ['UNKNOWN_STATE', 'Internal error'],
  /** --acl: a submit or CAN_DO of a function this client's identity may not use (Beanpole's own code). */
  PERMISSION_DENIED: ['PERMISSION_DENIED', 'Not allowed for this client identity'],
  /** CAN_DO beyond MAX_FUNCTIONS_PER_WORKER. */
  TOO_MANY_FUNCTIONS: ['TOO_MANY_ARGS', 'Too many functions registered on this connection'],
} as const;

export type GearmanError = keyof typeof ERRORS;

const ENCODED = new Map<GearmanError, Buffer>(
  (Object.keys(ERRORS) as GearmanError[]).map((k) => [k, encodePacket(PACKET.ERROR, ERRORS[k])]),
);

export function errorPacket(error: GearmanError): Buffer {
  return ENCODED.get(error)!;
}

export const NOOP = encodePacket(PACKET.NOOP, []);
export const NO_JOB = encodePacket(PACKET.NO_JOB, []);
export const OPTION_EXCEPTIONS = encodePacket(PACKET.OPTION_RES, ['exceptions']);
