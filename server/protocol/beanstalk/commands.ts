import { MAX_U32, TUBE_NAME_CHARS, isValidTubeName } from '../../../shared/limits.js';

/**
 * One command line, parsed as beanstalkd 1.12 parses it. Numbers are wire values (seconds).
 * Job ids above 2^53 cannot exist here and are carried as -1, which is never found.
 */
export type Command =
  | { op: 'put'; pri: number; delay: number; ttr: number; bytes: number; trailingGarbage: boolean }
  | { op: 'peek' | 'reserve-job' | 'delete' | 'kick-job' | 'touch' | 'stats-job'; id: number }
  | { op: 'peek-ready' | 'peek-delayed' | 'peek-buried' | 'reserve' | 'stats' }
  | { op: 'list-tubes' | 'list-tube-used' | 'list-tubes-watched' | 'quit' }
  | { op: 'reserve-with-timeout'; timeout: number }
  | { op: 'release'; id: number; pri: number; delay: number }
  | { op: 'bury'; id: number; pri: number }
  | { op: 'kick'; bound: number }
  | { op: 'stats-tube' | 'use' | 'watch' | 'ignore'; tube: string }
  | { op: 'pause-tube'; tube: string; delay: number }
  /** `countPauseTube`: beanstalkd counts cmd-pause-tube before it validates the tube name. */
  | { op: 'bad-format'; countPauseTube?: boolean }
  | { op: 'unknown' };

const BAD_FORMAT: Command = { op: 'bad-format' };
const UNKNOWN: Command = { op: 'unknown' };
const U64_MAX = 18446744073709551615n;
const NAME_CHAR_SET = new Set(TUBE_NAME_CHARS);

/** Parses a command line (without CRLF): line[start, end). */
export function parseCommand(line: Buffer, start = 0, end = line.length): Command {
  const s = line.toString('latin1', start, end);
  // protocol: a NUL anywhere in the line is BAD_FORMAT, before the command is even identified.
  if (s.indexOf('\0') >= 0) return BAD_FORMAT;
  // protocol: commands are matched by prefix, in beanstalkd's order; the prefix decides
  // BAD_FORMAT (a known prefix with bad arguments) versus UNKNOWN_COMMAND. Prefixes with
  // different first letters cannot both match, so the first letter picks the group to try.
  switch (s.charCodeAt(0)) {
    case 0x70: // p
      if (s.startsWith('put ')) return parsePut(s);
      if (s.startsWith('peek ')) return withId('peek', s, 5);
      if (s.startsWith('peek-ready')) return exact(s, 'peek-ready');
      if (s.startsWith('peek-delayed')) return exact(s, 'peek-delayed');
      if (s.startsWith('peek-buried')) return exact(s, 'peek-buried');
      if (s.startsWith('pause-tube')) return parsePauseTube(s);
      return UNKNOWN;
    case 0x72: // r
      if (s.startsWith('reserve-with-timeout ')) return parseReserveTimeout(s);
      if (s.startsWith('reserve-job ')) return withId('reserve-job', s, 12);
      if (s.startsWith('reserve')) return exact(s, 'reserve');
      if (s.startsWith('release ')) return parseRelease(s);
      return UNKNOWN;
    case 0x64: // d
      return s.startsWith('delete ') ? withId('delete', s, 7) : UNKNOWN;
    case 0x62: // b
      return s.startsWith('bury ') ? parseBury(s) : UNKNOWN;
    case 0x6b: // k
      if (s.startsWith('kick ')) return parseKick(s);
      if (s.startsWith('kick-job ')) return withId('kick-job', s, 9);
      return UNKNOWN;
    case 0x74: // t
      return s.startsWith('touch ') ? withId('touch', s, 6) : UNKNOWN;
    case 0x73: // s
      if (s.startsWith('stats-job ')) return withId('stats-job', s, 10);
      if (s.startsWith('stats-tube ')) return withTube('stats-tube', s, 11);
      if (s.startsWith('stats')) return exact(s, 'stats');
      return UNKNOWN;
    case 0x75: // u
      return s.startsWith('use ') ? withTube('use', s, 4) : UNKNOWN;
    case 0x77: // w
      return s.startsWith('watch ') ? withTube('watch', s, 6) : UNKNOWN;
    case 0x69: // i
      return s.startsWith('ignore ') ? withTube('ignore', s, 7) : UNKNOWN;
    case 0x6c: // l
      if (s.startsWith('list-tubes-watched')) return exact(s, 'list-tubes-watched');
      if (s.startsWith('list-tube-used')) return exact(s, 'list-tube-used');
      if (s.startsWith('list-tubes')) return exact(s, 'list-tubes');
      return UNKNOWN;
    case 0x71: // q
      return s.startsWith('quit') ? { op: 'quit' } : UNKNOWN;
    default:
      return UNKNOWN;
  }
}

type NoArgOp = 'peek-ready' | 'peek-delayed' | 'peek-buried' | 'reserve' | 'stats' | 'list-tubes' | 'list-tube-used' | 'list-tubes-watched';

function exact(s: string, op: NoArgOp): Command {
  return s.length === op.length ? { op } : BAD_FORMAT;
}

function withId(op: 'peek' | 'reserve-job' | 'delete' | 'kick-job' | 'touch' | 'stats-job', s: string, at: number): Command {
  const id = readU64(s, at);
  return id !== null && readEnd === s.length ? { op, id } : BAD_FORMAT;
}

function withTube(op: 'stats-tube' | 'use' | 'watch' | 'ignore', s: string, at: number): Command {
  // protocol: the name must fill the rest of the line exactly: no space skipping, no extra words.
  const tube = s.slice(at);
  return isValidTubeName(tube) ? { op, tube } : BAD_FORMAT;
}

function parsePut(s: string): Command {
  const pri = readU32(s, 4);
  if (pri === null) return BAD_FORMAT;
  const delay = readU32(s, readEnd);
  if (delay === null) return BAD_FORMAT;
  const ttr = readU32(s, readEnd);
  if (ttr === null) return BAD_FORMAT;
  const bytes = readU32(s, readEnd);
  if (bytes === null) return BAD_FORMAT;
  return { op: 'put', pri, delay, ttr, bytes, trailingGarbage: readEnd !== s.length };
}

function parseRelease(s: string): Command {
  const id = readU64(s, 8);
  if (id === null) return BAD_FORMAT;
  const pri = readU32(s, readEnd);
  if (pri === null) return BAD_FORMAT;
  const delay = readU32(s, readEnd);
  if (delay === null || readEnd !== s.length) return BAD_FORMAT;
  return { op: 'release', id, pri, delay };
}

function parseBury(s: string): Command {
  const id = readU64(s, 5);
  if (id === null) return BAD_FORMAT;
  const pri = readU32(s, readEnd);
  if (pri === null || readEnd !== s.length) return BAD_FORMAT;
  return { op: 'bury', id, pri };
}

function parsePauseTube(s: string): Command {
  let i = 10;
  while (s.charCodeAt(i) === 32) i++;
  const start = i;
  while (i < s.length && NAME_CHAR_SET.has(s[i]!)) i++;
  if (i === start) return BAD_FORMAT;
  const delay = readU32(s, i);
  if (delay === null || readEnd !== s.length) return BAD_FORMAT;
  const tube = s.slice(start, i);
  // protocol: once name and delay parse, cmd-pause-tube is counted; only then is the name held to
  // the usual rules (no leading '-', at most 200 bytes), so a bad name counts and gets BAD_FORMAT.
  if (!isValidTubeName(tube)) return { op: 'bad-format', countPauseTube: true };
  return { op: 'pause-tube', tube, delay };
}

/** protocol (1.12): strtol with only an errno check: no digits is 0, trailing text is ignored, and the long is truncated to an int; negative waits forever. */
function parseReserveTimeout(s: string): Command {
  const r = readCInteger(s, 21);
  if (r === null) return { op: 'reserve-with-timeout', timeout: 0 };
  const [negative, magnitude] = r;
  const value = negative ? -magnitude : magnitude;
  if (value > 9223372036854775807n || value < -9223372036854775808n) return BAD_FORMAT;
  return { op: 'reserve-with-timeout', timeout: Number(BigInt.asIntN(32, value)) };
}

/** protocol: kick reads its bound with strtoul: whitespace and a sign are accepted, trailing text ignored, and the result is truncated to 32 bits. */
function parseKick(s: string): Command {
  const r = readCInteger(s, 5);
  if (r === null) return BAD_FORMAT;
  const [negative, magnitude] = r;
  if (magnitude > U64_MAX) return BAD_FORMAT;
  const wrapped = negative ? BigInt.asUintN(64, -magnitude) : magnitude;
  return { op: 'kick', bound: Number(BigInt.asUintN(32, wrapped)) };
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** Where the last successful readU32/readU64 stopped: the number readers return plain numbers, no objects. */
let readEnd = 0;

/** beanstalkd's read_u32: spaces, then at least one digit; no sign; null above 2^32-1. */
function readU32(s: string, at: number): number | null {
  let i = at;
  while (s.charCodeAt(i) === 32) i++;
  const start = i;
  let value = 0;
  for (let c = s.charCodeAt(i); isDigit(c); c = s.charCodeAt(++i)) value = value * 10 + (c - 48);
  if (i === start || value > MAX_U32) return null;
  readEnd = i;
  return value;
}

/** beanstalkd's read_u64; ids beyond JavaScript's safe integers come back as -1 (never a job). */
function readU64(s: string, at: number): number | null {
  let i = at;
  while (s.charCodeAt(i) === 32) i++;
  const start = i;
  let value = 0;
  for (let c = s.charCodeAt(i); isDigit(c); c = s.charCodeAt(++i)) value = value * 10 + (c - 48);
  if (i === start) return null;
  readEnd = i;
  // Up to 15 digits the running value is exact; longer ones go through BigInt.
  if (i - start <= 15) return value;
  const big = BigInt(s.slice(start, i));
  if (big > U64_MAX) return null;
  return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : -1;
}

/** C's strtol/strtoul prefix: whitespace, an optional sign, digits. Null when there are no digits. */
function readCInteger(s: string, at: number): [boolean, bigint] | null {
  let i = at;
  while (i < s.length && ' \t\n\v\f\r'.includes(s[i]!)) i++;
  let negative = false;
  if (s[i] === '+' || s[i] === '-') {
    negative = s[i] === '-';
    i++;
  }
  const start = i;
  while (isDigit(s.charCodeAt(i))) i++;
  if (i === start) return null;
  return [negative, BigInt(s.slice(start, i))];
}
