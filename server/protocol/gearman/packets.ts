/**
 * Gearman packet types (the protocol document's table, plus GRAB_JOB_ALL and JOB_ASSIGN_ALL,
 * which libgearman and the stock `gearman` worker use) and how many NUL-separated arguments
 * each request carries: the last one is raw bytes and may contain NULs.
 */
/** Packet names by type (for the dashboard's "last command"). */
export function packetName(type: number): string {
  return (type < PACKET_NAMES.length ? PACKET_NAMES[type] : undefined) ?? 'UNKNOWN';
}

export const PACKET = {
  CAN_DO: 1,
  CANT_DO: 2,
  RESET_ABILITIES: 3,
  PRE_SLEEP: 4,
  NOOP: 6,
  SUBMIT_JOB: 7,
  JOB_CREATED: 8,
  GRAB_JOB: 9,
  NO_JOB: 10,
  JOB_ASSIGN: 11,
  WORK_STATUS: 12,
  WORK_COMPLETE: 13,
  WORK_FAIL: 14,
  GET_STATUS: 15,
  ECHO_REQ: 16,
  ECHO_RES: 17,
  SUBMIT_JOB_BG: 18,
  ERROR: 19,
  STATUS_RES: 20,
  SUBMIT_JOB_HIGH: 21,
  SET_CLIENT_ID: 22,
  CAN_DO_TIMEOUT: 23,
  ALL_YOURS: 24,
  WORK_EXCEPTION: 25,
  OPTION_REQ: 26,
  OPTION_RES: 27,
  WORK_DATA: 28,
  WORK_WARNING: 29,
  GRAB_JOB_UNIQ: 30,
  JOB_ASSIGN_UNIQ: 31,
  SUBMIT_JOB_HIGH_BG: 32,
  SUBMIT_JOB_LOW: 33,
  SUBMIT_JOB_LOW_BG: 34,
  SUBMIT_JOB_SCHED: 35,
  SUBMIT_JOB_EPOCH: 36,
  SUBMIT_REDUCE_JOB: 37,
  SUBMIT_REDUCE_JOB_BACKGROUND: 38,
  GRAB_JOB_ALL: 39,
  JOB_ASSIGN_ALL: 40,
  GET_STATUS_UNIQUE: 41,
  STATUS_RES_UNIQUE: 42,
} as const;

/**
 * A table keyed by packet type as an array indexed by it: read once or more per packet, and an
 * array is faster to index than a Map or an object with number keys (the largest type is small).
 */
export function byType<T>(table: Readonly<Record<number, T>>): (T | undefined)[] {
  const out: (T | undefined)[] = Array.from({ length: Math.max(...Object.keys(table).map(Number)) + 1 }, () => undefined);
  for (const [type, value] of Object.entries(table)) out[Number(type)] = value;
  return out;
}

/** Names indexed by type. */
const PACKET_NAMES: readonly (string | undefined)[] = byType(Object.fromEntries(Object.entries(PACKET).map(([name, type]) => [type, name])));

export type PacketName = keyof typeof PACKET;

/** Arguments of each request type a client or worker may send (the last takes the rest). */
const REQUEST_ARG_COUNTS: Readonly<Record<number, number>> = {
  [PACKET.CAN_DO]: 1,
  [PACKET.CANT_DO]: 1,
  [PACKET.RESET_ABILITIES]: 0,
  [PACKET.PRE_SLEEP]: 0,
  [PACKET.SUBMIT_JOB]: 3,
  [PACKET.SUBMIT_JOB_BG]: 3,
  [PACKET.SUBMIT_JOB_HIGH]: 3,
  [PACKET.SUBMIT_JOB_HIGH_BG]: 3,
  [PACKET.SUBMIT_JOB_LOW]: 3,
  [PACKET.SUBMIT_JOB_LOW_BG]: 3,
  [PACKET.SUBMIT_JOB_SCHED]: 8,
  [PACKET.SUBMIT_JOB_EPOCH]: 4,
  // function, unique, reducer, aggregator, data
  [PACKET.SUBMIT_REDUCE_JOB]: 5,
  [PACKET.SUBMIT_REDUCE_JOB_BACKGROUND]: 5,
  [PACKET.GRAB_JOB]: 0,
  [PACKET.GRAB_JOB_UNIQ]: 0,
  [PACKET.GRAB_JOB_ALL]: 0,
  [PACKET.WORK_STATUS]: 3,
  [PACKET.WORK_COMPLETE]: 2,
  [PACKET.WORK_FAIL]: 1,
  [PACKET.WORK_EXCEPTION]: 2,
  [PACKET.WORK_DATA]: 2,
  [PACKET.WORK_WARNING]: 2,
  [PACKET.GET_STATUS]: 1,
  [PACKET.GET_STATUS_UNIQUE]: 1,
  [PACKET.ECHO_REQ]: 1,
  [PACKET.SET_CLIENT_ID]: 1,
  [PACKET.CAN_DO_TIMEOUT]: 2,
  [PACKET.ALL_YOURS]: 0,
  [PACKET.OPTION_REQ]: 1,
};

/** Arguments of each request type, by packet type; -1: not a request a client may send. */
export const REQUEST_ARGS: readonly number[] = Array.from(byType(REQUEST_ARG_COUNTS), (n) => n ?? -1);

/**
 * Splits a packet's data into `count` arguments (views of `data`): the first count-1 end at a
 * NUL, the last is the rest. Null when a separator is missing.
 */
export function splitArgs(data: Buffer, count: number): readonly Buffer[] | null {
  if (count === 0) return NO_ARGS; // GRAB_JOB, PRE_SLEEP: no array per packet
  const args: Buffer[] = [];
  let at = 0;
  for (let i = 0; i < count - 1; i++) {
    const nul = data.indexOf(0, at);
    if (nul < 0) return null;
    args.push(data.subarray(at, nul));
    at = nul + 1;
  }
  args.push(data.subarray(at));
  return args;
}

const NO_ARGS: readonly Buffer[] = [];

const RES_MAGIC = Buffer.from('\0RES');
const REQ_MAGIC = Buffer.from('\0REQ');

/**
 * A packet: `\0RES` (a response; `\0REQ` for a request, as clients and the load generator
 * send), type, size, then the arguments joined by NULs.
 */
export function encodePacket(type: number, args: readonly (Buffer | string)[], magic: 'RES' | 'REQ' = 'RES'): Buffer {
  const parts = args.map((a) => (typeof a === 'string' ? Buffer.from(a, 'latin1') : a));
  let size = parts.length > 0 ? parts.length - 1 : 0;
  for (const p of parts) size += p.length;
  const out = Buffer.allocUnsafe(12 + size);
  (magic === 'RES' ? RES_MAGIC : REQ_MAGIC).copy(out, 0);
  out.writeUInt32BE(type, 4);
  out.writeUInt32BE(size, 8);
  let at = 12;
  parts.forEach((p, i) => {
    if (i > 0) out[at++] = 0;
    p.copy(out, at);
    at += p.length;
  });
  return out;
}
