import {
  RECORD_HEADER_BYTES,
  SEGMENT_HEADER_BYTES,
  SEGMENT_SALT_OFFSET,
  findRecordMagic,
  recordSalt,
  scanRecord,
  segmentHeaderMatchesSalt,
} from './format.js';

/**
 * How the salt of a segment with a damaged header was confirmed: `stored`, the header's own salt
 * bytes, which a record passes its checksum with; `header`, derived from a record and matching
 * the header checksum in place of the stored bytes (only the salt was damaged); `records`,
 * derived from two records that agree.
 */
export type SaltSource = 'stored' | 'header' | 'records';

export interface FoundSalt {
  salt: number;
  source: SaltSource;
}

/**
 * Record candidates looked at, at most, and payload bytes checksummed over all of them: a file
 * of garbage (or of job bodies full of magic bytes and huge lengths) costs bounded time. The
 * forward check runs in zlib; running a checksum backwards runs in JavaScript (~10 ns a byte),
 * so it gets the smaller budget.
 */
const MAX_CANDIDATES = 4096;
const MAX_FORWARD_BYTES = 1024 * 1024 * 1024;
const MAX_REVERSED_BYTES = 64 * 1024 * 1024;

/**
 * The checksum salt of a segment whose header fails its checksum, or null when none can be
 * confirmed, tried in this order:
 *
 * 1. The header's own salt bytes (most damage spares them), if a record candidate passes its
 *    checksum with them. Only the server knows a segment's salt, so a job body cannot forge this.
 * 2. The salt the record right after the header would pass with, confirmed by the header
 *    checksum (only the salt was damaged) or by the next record in the chain. These two are the
 *    segment's own records: a forged record sits inside a job body, after its record's start.
 * 3. Any two candidates, in file order, that give the same salt. A damaged record gives a random
 *    salt, which nothing confirms but with odds of 1 in 2^32; the records before a job body are
 *    the segment's own, so they confirm the real salt before forged ones in the body could.
 */
export function findSalt(data: Buffer, maxPayload: number): FoundSalt | null {
  const stored = data.readUInt32LE(SEGMENT_SALT_OFFSET);
  let forward = MAX_FORWARD_BYTES;
  for (const at of candidates(data)) {
    const length = data.readUInt32LE(at + 4);
    if (length > forward) continue;
    forward -= length;
    if (scanRecord(data, at, maxPayload, stored).kind === 'record') return { salt: stored, source: 'stored' };
  }
  const reversed = { left: MAX_REVERSED_BYTES };
  const first = derivedSalt(data, SEGMENT_HEADER_BYTES, maxPayload, reversed);
  if (first !== null) {
    if (segmentHeaderMatchesSalt(data, first)) return { salt: first, source: 'header' };
    const next = SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES + data.readUInt32LE(SEGMENT_HEADER_BYTES + 4);
    if (derivedSalt(data, next, maxPayload, reversed) === first) return { salt: first, source: 'records' };
  }
  const seen = new Set<number>();
  for (const at of candidates(data)) {
    const salt = derivedSalt(data, at, maxPayload, reversed);
    if (salt === null) continue;
    if (segmentHeaderMatchesSalt(data, salt)) return { salt, source: 'header' };
    if (seen.has(salt)) return { salt, source: 'records' };
    seen.add(salt);
  }
  return null;
}

/** Offsets of the first MAX_CANDIDATES record magics after the header, in file order. */
function* candidates(data: Buffer): Generator<number> {
  let n = 0;
  for (let at = findRecordMagic(data, SEGMENT_HEADER_BYTES); at >= 0 && n < MAX_CANDIDATES; at = findRecordMagic(data, at + 1)) {
    if (data.length - at < RECORD_HEADER_BYTES) return;
    n++;
    yield at;
  }
}

/** recordSalt, within what is left of the budget of bytes to run backwards (`budget.left`). */
function derivedSalt(data: Buffer, at: number, maxPayload: number, budget: { left: number }): number | null {
  if (data.length - at < RECORD_HEADER_BYTES) return null;
  const length = data.readUInt32LE(at + 4);
  if (length > budget.left) return null;
  const salt = recordSalt(data, at, maxPayload);
  if (salt !== null) budget.left -= length;
  return salt;
}
