/**
 * findSalt(): the checksum salt of a segment whose header is damaged, from the records' own
 * checksums, accepted only when confirmed (stored salt + a record, the header checksum, or two
 * records), and never taken from forged records in a job body ahead of the segment's own.
 */
import { describe, expect, it } from 'vitest';
import type { JobImage } from '../engine/records.js';
import { DELETE_RECORD_BYTES, SEGMENT_HEADER_BYTES, encodeDelete, encodeSegmentHeader } from './format.js';
import { T0 } from '../engine/testing.js';
import { findSalt } from './salt-recovery.js';
import { MAX_PAYLOAD, jobImage, jobRecord } from './testing.js';

const SALT = 0x5a17_0001;

function image(id: number, body: Buffer = Buffer.from(`body of ${id}`)): JobImage {
  return jobImage({ id, body });
}

function jobRec(img: JobImage, salt = SALT): Buffer {
  return jobRecord(img, salt);
}

function deleteRec(id: number, salt = SALT): Buffer {
  const buf = Buffer.alloc(DELETE_RECORD_BYTES);
  encodeDelete(buf, 0, id, salt);
  return buf;
}

/** A segment: header, records, zeros; `flip` lists header bytes to damage (XOR 0x01). */
function segment(records: Buffer[], flip: number[]): Buffer {
  const data = Buffer.concat([encodeSegmentHeader(3, T0, SALT), ...records, Buffer.alloc(4096)]);
  for (const i of flip) data[i]! ^= 0x01;
  return data;
}

describe('findSalt', () => {
  it('takes the stored salt when a record passes with it (the damage is elsewhere in the header)', () => {
    for (const byte of [0, 5, 8, 12, 16, 23, 28, 31]) {
      expect(findSalt(segment([jobRec(image(1)), jobRec(image(2))], [byte]), MAX_PAYLOAD), `byte ${byte}`).toEqual({ salt: SALT, source: 'stored' });
    }
    // One record is enough to confirm the stored salt.
    expect(findSalt(segment([deleteRec(1)], [12]), MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'stored' });
  });

  it('recovers a damaged salt from one record, confirmed by the header checksum', () => {
    for (const byte of [24, 25, 26, 27]) {
      expect(findSalt(segment([jobRec(image(1))], [byte]), MAX_PAYLOAD), `byte ${byte}`).toEqual({ salt: SALT, source: 'header' });
    }
  });

  it('recovers a damaged salt from two records when the header checksum cannot confirm it', () => {
    // The salt and the index are damaged: the header checksum matches no salt.
    const data = segment([jobRec(image(1)), deleteRec(7), jobRec(image(2))], [24, 13]);
    expect(findSalt(data, MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'records' });
  });

  it('skips damaged records and magic bytes that start no record', () => {
    const first = jobRec(image(1));
    first[40]! ^= 0x01;
    const magicInBody = jobRec(image(2, Buffer.from('BPR1\xff\xff\xff\xff BPR1\x10\x00\x00\x00', 'latin1')));
    const data = segment([first, magicInBody, jobRec(image(3))], [24, 13]);
    expect(findSalt(data, MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'records' });
    // With the stored salt intact, the first intact record confirms it.
    expect(findSalt(segment([first, magicInBody], [13]), MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'stored' });
  });

  it('confirms nothing from a single record when the salt and another header byte are damaged', () => {
    expect(findSalt(segment([jobRec(image(1))], [24, 13]), MAX_PAYLOAD)).toBeNull();
  });

  it('confirms nothing in garbage, zeros or a header alone', () => {
    const garbage = Buffer.alloc(8192);
    for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 131 + 17) & 0xff;
    garbage.write('BPR1', 100, 'latin1');
    expect(findSalt(garbage, MAX_PAYLOAD)).toBeNull();
    expect(findSalt(segment([], [24]), MAX_PAYLOAD)).toBeNull();
    expect(findSalt(Buffer.alloc(SEGMENT_HEADER_BYTES), MAX_PAYLOAD)).toBeNull();
  });

  it('takes the segment salt, not that of forged records in a job body after its own records', () => {
    const FORGED = 0x0bad_5a17;
    const forged = Buffer.concat([jobRec(image(900), FORGED), jobRec(image(901), FORGED)]);
    const data = segment([jobRec(image(1)), jobRec(image(2, forged)), jobRec(image(3))], [24, 13]);
    expect(findSalt(data, MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'records' });
  });

  it('takes the segment salt when the very first record is a job whose body holds forged records', () => {
    const FORGED = 0x0bad_5a17;
    const forged = Buffer.concat([jobRec(image(900), FORGED), jobRec(image(901), FORGED)]);
    // The chain (the record after the header, then the next) is the segment's own.
    const data = segment([jobRec(image(1, forged)), jobRec(image(3))], [24, 13]);
    expect(findSalt(data, MAX_PAYLOAD)).toEqual({ salt: SALT, source: 'records' });
  });
});
