import { crc32 } from 'node:zlib';
import { BURY_CAUSES, type JobImage, type JobState } from '../engine/records.js';
import type { JobCounts } from '../common/job-counts.js';
import { crc32Seed } from './crc32-seed.js';
import { parsePolicy } from '../common/policy-schema.js';
import type { TubePolicy } from '../../shared/policy.js';

/**
 * Beanpole's binlog format, version 2 (it reads version 1 too). Little-endian throughout.
 *
 * A segment file `binlog.N.bp` starts with a 32-byte header, then records:
 *
 *   header  magic "BPSEG001" | version u32 | index u32 | createdAt f64 | salt u32 | crc u32
 *   record  magic u32 | length u32 | crc u32 | payload (length bytes)
 *
 * The record crc is CRC-32 over the length field and the payload, seeded with the segment's
 * random salt, so a torn write, a zeroed region or a flipped bit anywhere is detected, and the
 * magic lets a reader find the next intact record after damage. The salt keeps a job body that
 * happens to contain a well-formed record (a client can send any bytes) from ever passing for
 * one when the reader searches for the next record after damage. A zero magic with a zero length is where written data ends (the segment
 * is preallocated with zeros). A damaged header loses no record: the salt can be read back from
 * the records' own checksums (recordSalt), and the index from the file name.
 *
 * Payload, first byte is the kind:
 *   JOB     kind | state | tubeLen u8 | 0x80 + buryCause | priority u32 | id u64 | delayMs f64
 *           | ttrMs f64 | createdAt f64 | deadlineAt f64 | buriedSeq f64 | reserves, timeouts,
 *           releases, buries, kicks u32 | bodyLen u32 | strikes u32 | tube | body
 *                                                                 (put, compaction, edits)
 *   STATE   kind | state | buryCause | 0 | priority u32 | id u64 | delayMs f64 | deadlineAt f64
 *           | buriedSeq f64 | reserves, timeouts, releases, buries, kicks u32 | strikes u32
 *                                                                 (state changes)
 *   DELETE  kind | 0 | 0 | 0 | id u64
 *   TUBE    kind | set | nameLen u8 | 0 | deadLetterAfter u32 | name   (a tube's settings;
 *           set = 0 clears them, so the server-wide default applies again)
 *
 * Version 1 had no strikes, bury cause or TUBE records: its JOB records have 0 in the fourth
 * byte (version 2 sets the top bit there) and its STATE records are 4 bytes shorter, so one
 * decoder reads both, and a segment whose header is damaged needs no version to be read.
 *
 * To change the format: bump FORMAT_VERSION, keep a reader for the old version in
 * recovery.ts (or refuse it with a clear message), update the layout above and the codec
 * tests, and say so in the README.
 */
export const FORMAT_VERSION = 2;
/** Versions this reader takes. */
const READABLE_VERSIONS: readonly number[] = [1, 2];
export const SEGMENT_MAGIC = Buffer.from('BPSEG001', 'latin1');
export const SEGMENT_HEADER_BYTES = 32;
export const RECORD_MAGIC = 0x31525042; // "BPR1"
export const RECORD_HEADER_BYTES = 12;
/** Where the salt sits in the segment header. */
export const SEGMENT_SALT_OFFSET = 24;
const RECORD_MAGIC_BYTES = Buffer.from([0x42, 0x50, 0x52, 0x31]);

export const KIND_JOB = 1;
export const KIND_STATE = 2;
export const KIND_DELETE = 3;
export const KIND_TUBE = 4;

const JOB_FIXED = 84;
const STATE_FIXED = 64;
const DELETE_FIXED = 12;
const TUBE_FIXED = 8;
/** Version 1's fixed parts: version 2's without the strikes u32 (see the layout above). */
const STRIKES_BYTES = 4;
const JOB_FIXED_V1 = JOB_FIXED - STRIKES_BYTES;
const STATE_FIXED_V1 = STATE_FIXED - STRIKES_BYTES;
/** The top bit of a JOB record's fourth byte: a version 2 record, with strikes. */
const JOB_V2_FLAG = 0x80;
export const JOB_RECORD_FIXED_BYTES = RECORD_HEADER_BYTES + JOB_FIXED;
export const STATE_RECORD_BYTES = RECORD_HEADER_BYTES + STATE_FIXED;
export const DELETE_RECORD_BYTES = RECORD_HEADER_BYTES + DELETE_FIXED;

const STATE_CODES: Record<JobState, number> = { ready: 1, reserved: 1, delayed: 2, buried: 3 };
const CODE_STATES: readonly (JobState | undefined)[] = [undefined, 'ready', 'delayed', 'buried'];

export type { JobImage };

/** What the encoders read from a job; the engine's Job has all of it, so it is passed as is. */
export type JobFields = Omit<JobImage, 'tube' | 'state'>;

/** The fields a STATE record carries (everything a state change can touch). */
export type StateImage = Omit<JobImage, 'tube' | 'ttrMs' | 'createdAt' | 'body'>;

/**
 * A tube's settings and policy as a TUBE record stores them; null: cleared (the server's
 * defaults apply, no policy). The policy, when there is one, follows the name as JSON.
 */
export interface TubeSettingsImage {
  tube: string;
  /** The dead-letter limit (0: off for this tube); see Engine.setTubeSettings. */
  settings: { deadLetterAfter: number } | null;
  policy: TubePolicy | null;
}

/** The TUBE record's flags (its second byte). */
const TUBE_HAS_SETTINGS = 1;
const TUBE_HAS_POLICY = 2;

export type DecodedRecord =
  | { kind: typeof KIND_JOB; job: JobImage }
  | { kind: typeof KIND_STATE; state: StateImage }
  | { kind: typeof KIND_DELETE; id: number }
  | { kind: typeof KIND_TUBE; tube: TubeSettingsImage };

export function jobRecordBytes(tubeNameBytes: number, bodyBytes: number): number {
  return JOB_RECORD_FIXED_BYTES + tubeNameBytes + bodyBytes;
}

export function tubeRecordBytes(tubeNameBytes: number, policyBytes = 0): number {
  return RECORD_HEADER_BYTES + TUBE_FIXED + tubeNameBytes + policyBytes;
}

/** A policy as its TUBE record carries it (empty: none). */
export function policyBytes(policy: TubePolicy | null): Buffer {
  return policy === null ? Buffer.alloc(0) : Buffer.from(JSON.stringify(policy), 'utf8');
}

function writeId(buf: Buffer, id: number, at: number): void {
  buf.writeUInt32LE(id >>> 0, at);
  buf.writeUInt32LE(Math.floor(id / 0x1_0000_0000), at + 4);
}

function readId(buf: Buffer, at: number): number {
  return buf.readUInt32LE(at) + buf.readUInt32LE(at + 4) * 0x1_0000_0000;
}

/** Fills in magic, length and crc for a payload already written at `at + RECORD_HEADER_BYTES`. */
function seal(buf: Buffer, at: number, payloadBytes: number, salt: number): number {
  buf.writeUInt32LE(RECORD_MAGIC, at);
  buf.writeUInt32LE(payloadBytes, at + 4);
  const crc = crc32(buf.subarray(at + 4, at + 8), salt);
  buf.writeUInt32LE(crc32(buf.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + payloadBytes), crc), at + 8);
  return RECORD_HEADER_BYTES + payloadBytes;
}

/**
 * What changes as a job moves between states, laid out alike in JOB and STATE records from `at`:
 * deadlineAt f64 (0 unless delayed) | buriedSeq f64 | reserves, timeouts, releases, buries,
 * kicks u32. The strikes come later, at an offset of each record's own.
 */
function writeProgress(buf: Buffer, at: number, img: JobFields, state: JobState): void {
  buf.writeDoubleLE(state === 'delayed' ? img.deadlineAt : 0, at);
  buf.writeDoubleLE(img.buriedSeq, at + 8);
  buf.writeUInt32LE(img.reserves >>> 0, at + 16);
  buf.writeUInt32LE(img.timeouts >>> 0, at + 20);
  buf.writeUInt32LE(img.releases >>> 0, at + 24);
  buf.writeUInt32LE(img.buries >>> 0, at + 28);
  buf.writeUInt32LE(img.kicks >>> 0, at + 32);
}

/** What writeProgress wrote at `at`, with the strikes at `strikesAt` (-1: a version-1 record, which has none). */
function readProgress(buf: Buffer, at: number, strikesAt: number): Pick<JobImage, 'deadlineAt' | 'buriedSeq'> & JobCounts {
  return {
    deadlineAt: buf.readDoubleLE(at),
    buriedSeq: buf.readDoubleLE(at + 8),
    reserves: buf.readUInt32LE(at + 16),
    timeouts: buf.readUInt32LE(at + 20),
    releases: buf.readUInt32LE(at + 24),
    buries: buf.readUInt32LE(at + 28),
    kicks: buf.readUInt32LE(at + 32),
    strikes: strikesAt < 0 ? 0 : buf.readUInt32LE(strikesAt),
  };
}

/**
 * Encodes a JOB record at `at`; `buf` must have jobRecordBytes(...) free there. `state` is what
 * to store (a reserved job is stored as ready). Returns its size.
 */
export function encodeJob(buf: Buffer, at: number, img: JobFields, state: JobState, tube: string, salt: number): number {
  writeJobFields(buf, at + RECORD_HEADER_BYTES, img, state, tube);
  img.body.copy(buf, at + RECORD_HEADER_BYTES + JOB_FIXED + tube.length);
  return seal(buf, at, JOB_FIXED + tube.length + img.body.length, salt);
}

/**
 * A JOB record without its body: the bytes that go before the body, with the checksum already
 * covering the body. A big record is written as this head and then the body itself, so a body
 * of hundreds of MiB is not copied into a record buffer first.
 */
export function encodeJobHead(img: JobFields, state: JobState, tube: string, salt: number): Buffer {
  const headBytes = RECORD_HEADER_BYTES + JOB_FIXED + tube.length;
  const buf = Buffer.allocUnsafe(headBytes);
  writeJobFields(buf, RECORD_HEADER_BYTES, img, state, tube);
  buf.writeUInt32LE(RECORD_MAGIC, 0);
  buf.writeUInt32LE(headBytes - RECORD_HEADER_BYTES + img.body.length, 4);
  const crc = crc32(buf.subarray(RECORD_HEADER_BYTES), crc32(buf.subarray(4, 8), salt));
  buf.writeUInt32LE(crc32(img.body, crc), 8);
  return buf;
}

/** The fixed fields and the tube name of a JOB payload, at `p`. */
function writeJobFields(buf: Buffer, p: number, img: JobFields, state: JobState, tube: string): void {
  buf[p] = KIND_JOB;
  buf[p + 1] = STATE_CODES[state];
  buf[p + 2] = tube.length;
  buf[p + 3] = JOB_V2_FLAG | img.buryCause;
  buf.writeUInt32LE(img.priority, p + 4);
  writeId(buf, img.id, p + 8);
  buf.writeDoubleLE(img.delayMs, p + 16);
  buf.writeDoubleLE(img.ttrMs, p + 24);
  buf.writeDoubleLE(img.createdAt, p + 32);
  writeProgress(buf, p + 40, img, state);
  buf.writeUInt32LE(img.body.length, p + 76);
  buf.writeUInt32LE(img.strikes >>> 0, p + 80);
  // Tube names are ASCII (the protocol's character set), one byte per character.
  buf.write(tube, p + JOB_FIXED, 'latin1');
}

/** Encodes a STATE record at `at` (STATE_RECORD_BYTES); `state` as for encodeJob. */
export function encodeState(buf: Buffer, at: number, img: JobFields, state: JobState, salt: number): number {
  const p = at + RECORD_HEADER_BYTES;
  buf[p] = KIND_STATE;
  buf[p + 1] = STATE_CODES[state];
  buf[p + 2] = img.buryCause;
  buf[p + 3] = 0;
  buf.writeUInt32LE(img.priority, p + 4);
  writeId(buf, img.id, p + 8);
  buf.writeDoubleLE(img.delayMs, p + 16);
  writeProgress(buf, p + 24, img, state);
  buf.writeUInt32LE(img.strikes >>> 0, p + 60);
  return seal(buf, at, STATE_FIXED, salt);
}

/** Encodes a TUBE record at `at` (tubeRecordBytes(name length)). */
export function encodeTube(buf: Buffer, at: number, img: TubeSettingsImage, salt: number, policy: Buffer = policyBytes(img.policy)): number {
  const p = at + RECORD_HEADER_BYTES;
  buf[p] = KIND_TUBE;
  buf[p + 1] = (img.settings === null ? 0 : TUBE_HAS_SETTINGS) | (img.policy === null ? 0 : TUBE_HAS_POLICY);
  buf[p + 2] = img.tube.length;
  buf[p + 3] = 0;
  buf.writeUInt32LE(img.settings?.deadLetterAfter ?? 0, p + 4);
  buf.write(img.tube, p + TUBE_FIXED, 'latin1');
  policy.copy(buf, p + TUBE_FIXED + img.tube.length);
  return seal(buf, at, TUBE_FIXED + img.tube.length + policy.length, salt);
}

/** Encodes a DELETE record at `at` (DELETE_RECORD_BYTES). */
export function encodeDelete(buf: Buffer, at: number, id: number, salt: number): number {
  const p = at + RECORD_HEADER_BYTES;
  buf.writeUInt32LE(KIND_DELETE, p);
  writeId(buf, id, p + 4);
  return seal(buf, at, DELETE_FIXED, salt);
}

/** What the reader found at an offset. */
export type RecordScan =
  | { kind: 'record'; size: number }
  /** Zeros from here on: the written part of the segment ends. */
  | { kind: 'end' }
  /** Not enough bytes for the record the header announces. */
  | { kind: 'short' }
  | { kind: 'bad'; reason: string };

/**
 * Checks the record at `at` without decoding it. `maxPayload` bounds the length field so a
 * corrupt length cannot make the reader wait for gigabytes that will never come.
 */
export function scanRecord(buf: Buffer, at: number, maxPayload: number, salt: number): RecordScan {
  if (buf.length - at < RECORD_HEADER_BYTES) return isZero(buf, at, buf.length) ? { kind: 'end' } : { kind: 'short' };
  const magic = buf.readUInt32LE(at);
  const length = buf.readUInt32LE(at + 4);
  if (magic === 0 && length === 0) {
    return isZero(buf, at, buf.length) ? { kind: 'end' } : { kind: 'bad', reason: 'non-zero bytes after a zero header' };
  }
  if (magic !== RECORD_MAGIC) return { kind: 'bad', reason: 'bad record magic' };
  if (length < 4 || length > maxPayload) return { kind: 'bad', reason: `bad record length ${length}` };
  if (buf.length - at - RECORD_HEADER_BYTES < length) return { kind: 'short' };
  const crc = crc32(buf.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + length), crc32(buf.subarray(at + 4, at + 8), salt));
  if (crc !== buf.readUInt32LE(at + 8)) return { kind: 'bad', reason: 'checksum mismatch' };
  return { kind: 'record', size: RECORD_HEADER_BYTES + length };
}

/** Finds the next offset after `from` where an intact record starts, or -1. */
export function resync(buf: Buffer, from: number, maxPayload: number, salt: number): number {
  for (let at = findRecordMagic(buf, from + 1); at >= 0; at = findRecordMagic(buf, at + 1)) {
    if (scanRecord(buf, at, maxPayload, salt).kind === 'record') return at;
  }
  return -1;
}

/** The first offset at or after `from` where a record magic is, or -1. */
export function findRecordMagic(buf: Buffer, from: number): number {
  return buf.indexOf(RECORD_MAGIC_BYTES, from);
}

/**
 * The salt under which the record at `at` would pass its checksum, or null when no record can
 * start there (no magic, or a length out of bounds or past the end). Every record candidate has
 * exactly one such salt, so a salt found this way must be confirmed before it is trusted.
 */
export function recordSalt(buf: Buffer, at: number, maxPayload: number): number | null {
  if (buf.length - at < RECORD_HEADER_BYTES || buf.readUInt32LE(at) !== RECORD_MAGIC) return null;
  const length = buf.readUInt32LE(at + 4);
  if (length < 4 || length > maxPayload || buf.length - at - RECORD_HEADER_BYTES < length) return null;
  // The crc is crc32(payload, crc32(length field, salt)): undo the payload, then the length field.
  const afterLength = crc32Seed(buf.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + length), buf.readUInt32LE(at + 8));
  return crc32Seed(buf.subarray(at + 4, at + 8), afterLength);
}

function isZero(buf: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] !== 0) return false;
  return true;
}

function decodePolicy(json: string): TubePolicy | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return null;
  }
  const parsed = parsePolicy(value);
  return parsed.ok ? parsed.policy : null;
}

/**
 * Decodes a record that scanRecord accepted. A JOB record's body is copied, so it does not pin
 * the segment buffer. Returns a reason string for a well-framed record with impossible contents.
 */
export function decodeRecord(buf: Buffer, at: number, size: number): DecodedRecord | string {
  const p = at + RECORD_HEADER_BYTES;
  const end = at + size;
  const kind = buf[p];
  if (kind === KIND_DELETE) {
    if (size !== DELETE_RECORD_BYTES) return 'bad DELETE record size';
    return { kind: KIND_DELETE, id: readId(buf, p + 4) };
  }
  if (kind === KIND_TUBE) {
    const nameLen = buf[p + 2]!;
    const flags = buf[p + 1]!;
    const policyAt = p + TUBE_FIXED + nameLen;
    const hasPolicy = (flags & TUBE_HAS_POLICY) !== 0;
    if (nameLen === 0 || flags > (TUBE_HAS_SETTINGS | TUBE_HAS_POLICY) || policyAt > end || hasPolicy !== policyAt < end) return 'bad TUBE record';
    const tube = buf.toString('latin1', p + TUBE_FIXED, policyAt);
    const settings = (flags & TUBE_HAS_SETTINGS) !== 0 ? { deadLetterAfter: buf.readUInt32LE(p + 4) } : null;
    if (!hasPolicy) return { kind: KIND_TUBE, tube: { tube, settings, policy: null } };
    const policy = decodePolicy(buf.toString('utf8', policyAt, end));
    if (policy === null) return 'bad TUBE record policy';
    return { kind: KIND_TUBE, tube: { tube, settings, policy } };
  }
  const state = CODE_STATES[buf[p + 1]!];
  if (state === undefined) return `bad job state ${buf[p + 1]}`;
  if (kind === KIND_STATE) {
    const v2 = size === STATE_RECORD_BYTES;
    if (!v2 && size !== RECORD_HEADER_BYTES + STATE_FIXED_V1) return 'bad STATE record size';
    const buryCause = buf[p + 2]!;
    if (buryCause >= BURY_CAUSES.length) return `bad bury cause ${buryCause}`;
    return {
      kind: KIND_STATE,
      state: {
        id: readId(buf, p + 8),
        state,
        priority: buf.readUInt32LE(p + 4),
        delayMs: buf.readDoubleLE(p + 16),
        ...readProgress(buf, p + 24, v2 ? p + 60 : -1),
        buryCause,
      },
    };
  }
  if (kind !== KIND_JOB) return `unknown record kind ${kind}`;
  const tubeLen = buf[p + 2]!;
  const flags = buf[p + 3]!;
  const v2 = (flags & JOB_V2_FLAG) !== 0;
  const buryCause = flags & ~JOB_V2_FLAG;
  if (!v2 && flags !== 0) return `bad JOB record flags ${flags}`;
  if (buryCause >= BURY_CAUSES.length) return `bad bury cause ${buryCause}`;
  const fixed = v2 ? JOB_FIXED : JOB_FIXED_V1;
  const bodyLen = buf.readUInt32LE(p + 76);
  if (p + fixed + tubeLen + bodyLen !== end || tubeLen === 0) return 'bad JOB record lengths';
  const bodyAt = p + fixed + tubeLen;
  return {
    kind: KIND_JOB,
    job: {
      id: readId(buf, p + 8),
      tube: buf.toString('latin1', p + fixed, bodyAt),
      state,
      priority: buf.readUInt32LE(p + 4),
      delayMs: buf.readDoubleLE(p + 16),
      ttrMs: buf.readDoubleLE(p + 24),
      createdAt: buf.readDoubleLE(p + 32),
      ...readProgress(buf, p + 40, v2 ? p + 80 : -1),
      buryCause,
      body: Buffer.from(buf.subarray(bodyAt, end)),
    },
  };
}

/** The 32-byte segment header; `salt` is a random u32 that seeds every record checksum in it. */
export function encodeSegmentHeader(index: number, createdAt: number, salt: number): Buffer {
  const buf = Buffer.alloc(SEGMENT_HEADER_BYTES);
  SEGMENT_MAGIC.copy(buf, 0);
  buf.writeUInt32LE(FORMAT_VERSION, 8);
  buf.writeUInt32LE(index, 12);
  buf.writeDoubleLE(createdAt, 16);
  buf.writeUInt32LE(salt >>> 0, SEGMENT_SALT_OFFSET);
  buf.writeUInt32LE(crc32(buf.subarray(0, 28), 0), 28);
  return buf;
}

export type SegmentHeaderCheck =
  | { ok: true; index: number; salt: number }
  /**
   * `short`: fewer bytes than a header; `damaged`: the header fails its checksum (its records
   * may still be intact); `foreign`: an intact header of another format or a future version.
   */
  | { ok: false; problem: 'short' | 'damaged' | 'foreign'; reason: string };

export function checkSegmentHeader(buf: Buffer): SegmentHeaderCheck {
  if (buf.length < SEGMENT_HEADER_BYTES) return { ok: false, problem: 'short', reason: 'shorter than its header' };
  // The checksum first: a flipped bit in the magic or the version is damage, not another format.
  const magicOk = buf.subarray(0, 8).equals(SEGMENT_MAGIC);
  if (buf.readUInt32LE(28) !== crc32(buf.subarray(0, 28), 0)) {
    return { ok: false, problem: 'damaged', reason: magicOk ? 'header checksum mismatch' : 'header checksum mismatch, bad magic' };
  }
  if (!magicOk) return { ok: false, problem: 'foreign', reason: 'not a Beanpole binlog segment' };
  const version = buf.readUInt32LE(8);
  if (!READABLE_VERSIONS.includes(version)) return { ok: false, problem: 'foreign', reason: `unknown format version ${version}` };
  return { ok: true, index: buf.readUInt32LE(12), salt: buf.readUInt32LE(SEGMENT_SALT_OFFSET) };
}

/** True when the header's checksum matches once `salt` is put in place of the stored one. */
export function segmentHeaderMatchesSalt(buf: Buffer, salt: number): boolean {
  const header = Buffer.from(buf.subarray(0, 28));
  header.writeUInt32LE(salt >>> 0, SEGMENT_SALT_OFFSET);
  return buf.readUInt32LE(28) === crc32(header, 0);
}

/** Segment file names: binlog.<index>.bp (not beanstalkd's binlog.N, whose format differs). */
export function segmentFileName(index: number): string {
  return `binlog.${index}.bp`;
}

export function parseSegmentFileName(name: string): number | null {
  const m = /^binlog\.([1-9][0-9]{0,9})\.bp$/.exec(name);
  return m === null ? null : Number(m[1]);
}
