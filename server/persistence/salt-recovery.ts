import { SEGMENT_HEADER_BYTES, SEGMENT_SALT_OFFSET, findRecordMagic, recordSalt, segmentHeaderMatchesSalt } from './format.js';

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
 * Record candidates tried at most: a file of garbage (or of job bodies full of magic bytes)
 * costs bounded time; an intact segment settles on its first two records.
 */
const MAX_CANDIDATES = 4096;

/**
 * The checksum salt of a segment whose header fails its checksum, or null when none can be
 * confirmed. Record candidates (a magic and a credible length) are taken in file order, and each
 * gives the one salt under which it would pass (recordSalt). A damaged record gives a random
 * salt, which nothing confirms but with odds of 1 in 2^32.
 *
 * File order matters: a job body may hold forged records sealed with a salt of the client's
 * choosing, but the records written before that body are the segment's own, and they confirm the
 * real salt first unless all but one of them are damaged as well.
 */
export function findSalt(data: Buffer, maxPayload: number): FoundSalt | null {
  const stored = data.readUInt32LE(SEGMENT_SALT_OFFSET);
  const seen = new Set<number>();
  let tried = 0;
  for (let at = findRecordMagic(data, SEGMENT_HEADER_BYTES); at >= 0 && tried < MAX_CANDIDATES; at = findRecordMagic(data, at + 1)) {
    const salt = recordSalt(data, at, maxPayload);
    if (salt === null) continue;
    tried++;
    if (salt === stored) return { salt, source: 'stored' };
    if (segmentHeaderMatchesSalt(data, salt)) return { salt, source: 'header' };
    if (seen.has(salt)) return { salt, source: 'records' };
    seen.add(salt);
  }
  return null;
}
