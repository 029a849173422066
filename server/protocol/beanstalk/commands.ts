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
/** NAME_BYTE[c] is 1 for a byte allowed in a tube name. */
const NAME_BYTE = new Uint8Array(256);
for (let i = 0; i < TUBE_NAME_CHARS.length; i++) NAME_BYTE[TUBE_NAME_CHARS.charCodeAt(i)] = 1;

/*
 * The line being parsed: bytes [lineAt, lineAt + lineLength) of `line`. Positions below are
 * offsets into the line. Read straight from the bytes, with no string per command (a string is
 * made only for a tube name and for numbers too long for a double): Latin-1 maps each byte to
 * one character, so these are the rules beanstalkd applies to its C string. (`line` keeps the
 * last command's read buffer referenced until the next command: one buffer at most.)
 */
let line: Buffer = Buffer.alloc(0);
let lineAt = 0;
let lineLength = 0;

/** The byte at offset i of the line, or -1 past its end. */
function byteAt(i: number): number {
  return i < lineLength ? line[lineAt + i]! : -1;
}

function startsWith(prefix: string): boolean {
  if (lineLength < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[lineAt + i] !== prefix.charCodeAt(i)) return false;
  return true;
}

function text(from: number, to: number): string {
  return line.toString('latin1', lineAt + from, lineAt + to);
}

/** Parses a command line (without CRLF): bytes[start, end). */
export function parseCommand(bytes: Buffer, start = 0, end = bytes.length): Command {
  line = bytes;
  lineAt = start;
  lineLength = end - start;
  // protocol: a NUL anywhere in the line is BAD_FORMAT, before the command is even identified.
  for (let i = start; i < end; i++) if (bytes[i] === 0) return BAD_FORMAT;
  // protocol: commands are matched by prefix, in beanstalkd's order; the prefix decides
  // BAD_FORMAT (a known prefix with bad arguments) versus UNKNOWN_COMMAND. Prefixes with
  // different first letters cannot both match, so the first letter picks the group to try.
  switch (byteAt(0)) {
    case 0x70: // p
      if (startsWith('put ')) return parsePut();
      if (startsWith('peek ')) return withId('peek', 5);
      if (startsWith('peek-ready')) return exact('peek-ready');
      if (startsWith('peek-delayed')) return exact('peek-delayed');
      if (startsWith('peek-buried')) return exact('peek-buried');
      if (startsWith('pause-tube')) return parsePauseTube();
      return UNKNOWN;
    case 0x72: // r
      if (startsWith('reserve-with-timeout ')) return parseReserveTimeout();
      if (startsWith('reserve-job ')) return withId('reserve-job', 12);
      if (startsWith('reserve')) return exact('reserve');
      if (startsWith('release ')) return parseRelease();
      return UNKNOWN;
    case 0x64: // d
      return startsWith('delete ') ? withId('delete', 7) : UNKNOWN;
    case 0x62: // b
      return startsWith('bury ') ? parseBury() : UNKNOWN;
    case 0x6b: // k
      if (startsWith('kick ')) return parseKick();
      if (startsWith('kick-job ')) return withId('kick-job', 9);
      return UNKNOWN;
    case 0x74: // t
      return startsWith('touch ') ? withId('touch', 6) : UNKNOWN;
    case 0x73: // s
      if (startsWith('stats-job ')) return withId('stats-job', 10);
      if (startsWith('stats-tube ')) return withTube('stats-tube', 11);
      if (startsWith('stats')) return exact('stats');
      return UNKNOWN;
    case 0x75: // u
      return startsWith('use ') ? withTube('use', 4) : UNKNOWN;
    case 0x77: // w
      return startsWith('watch ') ? withTube('watch', 6) : UNKNOWN;
    case 0x69: // i
      return startsWith('ignore ') ? withTube('ignore', 7) : UNKNOWN;
    case 0x6c: // l
      if (startsWith('list-tubes-watched')) return exact('list-tubes-watched');
      if (startsWith('list-tube-used')) return exact('list-tube-used');
      if (startsWith('list-tubes')) return exact('list-tubes');
      return UNKNOWN;
    case 0x71: // q
      return startsWith('quit') ? { op: 'quit' } : UNKNOWN;
    default:
      return UNKNOWN;
  }
}

type NoArgOp = 'peek-ready' | 'peek-delayed' | 'peek-buried' | 'reserve' | 'stats' | 'list-tubes' | 'list-tube-used' | 'list-tubes-watched';

function exact(op: NoArgOp): Command {
  return lineLength === op.length ? { op } : BAD_FORMAT;
}

function withId(op: 'peek' | 'reserve-job' | 'delete' | 'kick-job' | 'touch' | 'stats-job', at: number): Command {
  readFrom(at);
  const id = nextU64();
  return !badNumber && readEnd === lineLength ? { op, id } : BAD_FORMAT;
}

function withTube(op: 'stats-tube' | 'use' | 'watch' | 'ignore', at: number): Command {
  // protocol: the name must fill the rest of the line exactly: no space skipping, no extra words.
  const tube = text(at, lineLength);
  return isValidTubeName(tube) ? { op, tube } : BAD_FORMAT;
}

// The numbers of a put, release or bury line, read in order (an object literal's values are
// evaluated left to right); any that does not parse makes the line BAD_FORMAT.

function parsePut(): Command {
  readFrom(4);
  const put: Command = { op: 'put', pri: nextU32(), delay: nextU32(), ttr: nextU32(), bytes: nextU32(), trailingGarbage: false };
  if (badNumber) return BAD_FORMAT;
  put.trailingGarbage = readEnd !== lineLength;
  return put;
}

function parseRelease(): Command {
  readFrom(8);
  const release: Command = { op: 'release', id: nextU64(), pri: nextU32(), delay: nextU32() };
  return badNumber || readEnd !== lineLength ? BAD_FORMAT : release;
}

function parseBury(): Command {
  readFrom(5);
  const bury: Command = { op: 'bury', id: nextU64(), pri: nextU32() };
  return badNumber || readEnd !== lineLength ? BAD_FORMAT : bury;
}

function parsePauseTube(): Command {
  let i = 10;
  while (byteAt(i) === 32) i++;
  const start = i;
  while (i < lineLength && NAME_BYTE[byteAt(i)] === 1) i++;
  if (i === start) return BAD_FORMAT;
  readFrom(i);
  const delay = nextU32();
  if (badNumber || readEnd !== lineLength) return BAD_FORMAT;
  const tube = text(start, i);
  // protocol: once name and delay parse, cmd-pause-tube is counted; only then is the name held to
  // the usual rules (no leading '-', at most 200 bytes), so a bad name counts and gets BAD_FORMAT.
  if (!isValidTubeName(tube)) return { op: 'bad-format', countPauseTube: true };
  return { op: 'pause-tube', tube, delay };
}

/** protocol (1.12): strtol with only an errno check: no digits is 0, trailing text is ignored, and the long is truncated to an int; negative waits forever. */
function parseReserveTimeout(): Command {
  if (!readCInteger(21)) return { op: 'reserve-with-timeout', timeout: 0 };
  // Up to 9 digits the value is an int already (the usual case): no BigInt.
  if (digitsEnd - digitsStart <= 9) {
    const magnitude = smallDigits();
    return { op: 'reserve-with-timeout', timeout: negative ? 0 - magnitude : magnitude }; // 0 - 0 is +0
  }
  const magnitude = BigInt(text(digitsStart, digitsEnd));
  const value = negative ? -magnitude : magnitude;
  if (value > 9223372036854775807n || value < -9223372036854775808n) return BAD_FORMAT;
  return { op: 'reserve-with-timeout', timeout: Number(BigInt.asIntN(32, value)) };
}

/** protocol: kick reads its bound with strtoul: whitespace and a sign are accepted, trailing text ignored, and the result is truncated to 32 bits. */
function parseKick(): Command {
  if (!readCInteger(5)) return BAD_FORMAT;
  if (!negative && digitsEnd - digitsStart <= 9) return { op: 'kick', bound: smallDigits() };
  const magnitude = BigInt(text(digitsStart, digitsEnd));
  if (magnitude > U64_MAX) return BAD_FORMAT;
  const wrapped = negative ? BigInt.asUintN(64, -magnitude) : magnitude;
  return { op: 'kick', bound: Number(BigInt.asUintN(32, wrapped)) };
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/**
 * Where the number readers go on from: `readFrom` sets it, each number read moves it past that
 * number. They return plain numbers, no objects; one that fails sets `badNumber` (and returns 0),
 * and the line is bad whatever the readers after it find (`readFrom` clears it for the next).
 */
let readEnd = 0;
let badNumber = false;

function readFrom(at: number): void {
  readEnd = at;
  badNumber = false;
}

/** beanstalkd's read_u32: read_u64's digits, bad above 2^32-1. */
function nextU32(): number {
  const value = nextU64();
  return value > MAX_U32 || value < 0 ? bad() : value; // -1: beyond safe integers
}

/** beanstalkd's read_u64: spaces, then at least one digit; no sign. Ids beyond JavaScript's safe integers come back as -1 (never a job). */
function nextU64(): number {
  let i = readEnd;
  while (byteAt(i) === 32) i++;
  const start = i;
  let value = 0;
  for (let c = byteAt(i); isDigit(c); c = byteAt(++i)) value = value * 10 + (c - 48);
  if (i === start) return bad();
  readEnd = i;
  // Up to 15 digits the running value is exact; longer ones go through BigInt.
  if (i - start <= 15) return value;
  const big = BigInt(text(start, i));
  if (big > U64_MAX) return bad();
  return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : -1;
}

function bad(): number {
  badNumber = true;
  return 0;
}

/** What the last successful readCInteger found: the sign, and the digits' offsets. */
let negative = false;
let digitsStart = 0;
let digitsEnd = 0;

/** C's strtol/strtoul prefix: whitespace, an optional sign, digits. False when there are no digits. */
function readCInteger(at: number): boolean {
  let i = at;
  for (let c = byteAt(i); c === 32 || (c >= 9 && c <= 13); c = byteAt(++i));
  const sign = byteAt(i);
  negative = sign === 45; // -
  if (sign === 43 || sign === 45) i++; // + or -
  digitsStart = i;
  while (isDigit(byteAt(i))) i++;
  digitsEnd = i;
  return digitsEnd > digitsStart;
}

/** The value of digits [digitsStart, digitsEnd), at most 9 of them. */
function smallDigits(): number {
  let value = 0;
  for (let i = digitsStart; i < digitsEnd; i++) value = value * 10 + (byteAt(i) - 48);
  return value;
}
