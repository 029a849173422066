/**
 * The binlog record codec: round trips of every record kind, what scanRecord says about damaged
 * or cut bytes (never a silently different record), resync after garbage, and segment headers.
 */
import { NO_POLICY, type TubePolicy } from '../../shared/policy.js';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { JobImage, JobState } from '../engine/records.js';
import {
  DELETE_RECORD_BYTES,
  FORMAT_VERSION,
  JOB_RECORD_FIXED_BYTES,
  KIND_DELETE,
  KIND_JOB,
  KIND_STATE,
  KIND_TUBE,
  RECORD_HEADER_BYTES,
  RECORD_MAGIC,
  SEGMENT_HEADER_BYTES,
  STATE_RECORD_BYTES,
  checkSegmentHeader,
  decodeRecord,
  encodeDelete,
  encodeJob,
  encodeJobHead,
  encodeSegmentHeader,
  encodeState,
  encodeTube,
  policyBytes,
  jobRecordBytes,
  parseSegmentFileName,
  recordSalt,
  resync,
  scanRecord,
  tubeRecordBytes,
  segmentFileName,
  segmentHeaderMatchesSalt,
  type DecodedRecord,
  type StateImage,
} from './format.js';
import { jobImage } from './testing.js';

/** The checksum salt of the segments these tests write by hand. */
const SALT = 0x5a17_0001;

const T0 = 1_700_000_000_000;
const MAX_PAYLOAD = 1 << 20;
const MAX_U32 = 4294967295;

function image(over: Partial<JobImage> = {}): JobImage {
  // A fractional creation time and an urgent-looking priority, so every field's encoding shows.
  return jobImage({ priority: 1024, createdAt: T0 + 0.123456, body: Buffer.from('hello'), ...over });
}

function jobRecord(img: JobImage, state: JobState = img.state): Buffer {
  const buf = Buffer.alloc(jobRecordBytes(img.tube.length, img.body.length));
  expect(encodeJob(buf, 0, img, state, img.tube, SALT)).toBe(buf.length);
  return buf;
}

function stateRecord(img: JobImage, state: JobState = img.state): Buffer {
  const buf = Buffer.alloc(STATE_RECORD_BYTES);
  expect(encodeState(buf, 0, img, state, SALT)).toBe(STATE_RECORD_BYTES);
  return buf;
}

function deleteRecord(id: number): Buffer {
  const buf = Buffer.alloc(DELETE_RECORD_BYTES);
  expect(encodeDelete(buf, 0, id, SALT)).toBe(DELETE_RECORD_BYTES);
  return buf;
}

/** What decoding the JOB record of `img` stored as `state` must give. */
function expectedJob(img: JobImage, state: JobState = img.state): DecodedRecord {
  const stored: JobState = state === 'reserved' ? 'ready' : state;
  return { kind: KIND_JOB, job: { ...img, state: stored, deadlineAt: stored === 'delayed' ? img.deadlineAt : 0 } };
}

function expectedState(img: JobImage, state: JobState = img.state): DecodedRecord {
  const stored: JobState = state === 'reserved' ? 'ready' : state;
  const s: StateImage = {
    id: img.id,
    state: stored,
    priority: img.priority,
    delayMs: img.delayMs,
    deadlineAt: stored === 'delayed' ? img.deadlineAt : 0,
    buriedSeq: img.buriedSeq,
    reserves: img.reserves,
    timeouts: img.timeouts,
    releases: img.releases,
    buries: img.buries,
    kicks: img.kicks,
    strikes: img.strikes,
    buryCause: img.buryCause,
  };
  return { kind: KIND_STATE, state: s };
}

/** Scans and decodes the one record at `at`, failing the test if it is not intact. */
function decodeAt(buf: Buffer, at = 0): DecodedRecord {
  const scan = scanRecord(buf, at, MAX_PAYLOAD, SALT);
  if (scan.kind !== 'record') throw new Error(`expected a record at ${at}, got ${JSON.stringify(scan)}`);
  const rec = decodeRecord(buf, at, scan.size);
  if (typeof rec === 'string') throw new Error(`record at ${at} did not decode: ${rec}`);
  return rec;
}

/** Rewrites the length and crc of the record at `at` after its payload was edited. */
function reseal(buf: Buffer, at: number, payloadBytes: number): void {
  buf.writeUInt32LE(payloadBytes, at + 4);
  const crc = crc32(buf.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + payloadBytes), crc32(buf.subarray(at + 4, at + 8), SALT));
  buf.writeUInt32LE(crc, at + 8);
}

const busy = image({
  id: 2 ** 40 + 7,
  tube: 'a'.repeat(200),
  priority: MAX_U32,
  delayMs: 3_600_000,
  ttrMs: MAX_U32 * 1000,
  createdAt: T0 + 0.5,
  deadlineAt: T0 + 3_600_000.25,
  buriedSeq: 12345,
  reserves: MAX_U32,
  timeouts: 1,
  releases: 2,
  buries: 3,
  kicks: 4,
  body: Buffer.from([0, 13, 10, 0, 255, 13, 10, 0, 0]),
});

/** A sample of every record kind, for the corruption sweeps. */
const samples: { name: string; bytes: Buffer; decoded: DecodedRecord }[] = [
  { name: 'JOB', bytes: jobRecord(busy, 'delayed'), decoded: expectedJob(busy, 'delayed') },
  { name: 'JOB with an empty body', bytes: jobRecord(image({ body: Buffer.alloc(0) })), decoded: expectedJob(image({ body: Buffer.alloc(0) })) },
  { name: 'STATE', bytes: stateRecord(busy, 'buried'), decoded: expectedState(busy, 'buried') },
  { name: 'DELETE', bytes: deleteRecord(2 ** 33 + 1), decoded: { kind: KIND_DELETE, id: 2 ** 33 + 1 } },
];

describe('JOB records', () => {
  it('round-trip every field, with a binary body of zeros and CRLFs', () => {
    const rec = jobRecord(busy, 'delayed');
    expect(rec.length).toBe(JOB_RECORD_FIXED_BYTES + 200 + busy.body.length);
    expect(decodeAt(rec)).toEqual(expectedJob(busy, 'delayed'));
  });

  it('are the same bytes when written as a head and then the body (big records)', () => {
    for (const body of [Buffer.alloc(0), busy.body, Buffer.alloc(3 << 20, 0x0d)]) {
      const img = { ...busy, body };
      const head = encodeJobHead(img, 'buried', img.tube, SALT);
      expect(Buffer.concat([head, body]).equals(jobRecord(img, 'buried'))).toBe(true);
    }
  });

  it('round-trip an empty body', () => {
    const img = image({ body: Buffer.alloc(0) });
    const rec = jobRecord(img);
    expect(rec.length).toBe(JOB_RECORD_FIXED_BYTES + 'default'.length);
    const out = decodeAt(rec);
    expect(out).toEqual(expectedJob(img));
    if (out.kind === KIND_JOB) expect(out.job.body.length).toBe(0);
  });

  it('round-trip 200-character tube names and one-character ones', () => {
    for (const tube of ['x', 'T'.repeat(200), 'a-b+c/d;e.f$g_h(i)j'.repeat(10)]) {
      const img = image({ tube });
      expect(decodeAt(jobRecord(img))).toEqual(expectedJob(img));
    }
  });

  it('round-trip ids above 2^32, up to the largest safe integer', () => {
    for (const id of [1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 40 + 12345, Number.MAX_SAFE_INTEGER]) {
      const img = image({ id });
      expect(decodeAt(jobRecord(img))).toEqual(expectedJob(img));
      expect(decodeAt(stateRecord(img))).toEqual(expectedState(img));
      expect(decodeAt(deleteRecord(id))).toEqual({ kind: KIND_DELETE, id });
    }
  });

  it('round-trip the largest u32 priority and counters, and fractional times', () => {
    const img = image({
      priority: MAX_U32,
      reserves: MAX_U32,
      timeouts: MAX_U32,
      releases: MAX_U32,
      buries: MAX_U32,
      kicks: MAX_U32,
      createdAt: T0 + 0.000001,
      buriedSeq: 2 ** 45,
      state: 'buried',
    });
    expect(decodeAt(jobRecord(img))).toEqual(expectedJob(img));
  });

  it('keep a delayed job’s absolute deadline', () => {
    const img = image({ state: 'delayed', delayMs: 5000, deadlineAt: T0 + 5000.75 });
    const out = decodeAt(jobRecord(img));
    expect(out).toEqual(expectedJob(img));
    if (out.kind === KIND_JOB) expect(out.job.deadlineAt).toBe(T0 + 5000.75);
  });

  it('store a reserved job as ready, without its TTR deadline', () => {
    const img = image({ state: 'reserved', deadlineAt: T0 + 60_000, reserves: 3 });
    const out = decodeAt(jobRecord(img, 'reserved'));
    expect(out).toMatchObject({ kind: KIND_JOB, job: { state: 'ready', deadlineAt: 0, reserves: 3 } });
  });

  it('store deadline 0 for ready and buried jobs whatever the field holds', () => {
    for (const state of ['ready', 'buried'] as const) {
      const out = decodeAt(jobRecord(image({ deadlineAt: T0 + 99 }), state));
      expect(out).toMatchObject({ kind: KIND_JOB, job: { state, deadlineAt: 0 } });
    }
  });

  it('copy the body, so the decoded job does not pin the segment buffer', () => {
    const rec = jobRecord(busy);
    const out = decodeAt(rec);
    rec.fill(0xee);
    expect(out).toEqual(expectedJob(busy));
  });

  it('encode at an offset inside a larger buffer, back to back with other records', () => {
    const a = image({ id: 10, body: Buffer.from('first\r\n') });
    const b = image({ id: 11, state: 'delayed', deadlineAt: T0 + 1, delayMs: 1 });
    const buf = Buffer.alloc(4096);
    let at = 7;
    const starts: number[] = [];
    starts.push(at);
    at += encodeJob(buf, at, a, 'ready', a.tube, SALT);
    starts.push(at);
    at += encodeState(buf, at, b, 'delayed', SALT);
    starts.push(at);
    at += encodeDelete(buf, at, 10, SALT);
    starts.push(at);
    at += encodeJob(buf, at, b, 'delayed', 'other', SALT);
    expect(decodeAt(buf, starts[0])).toEqual(expectedJob(a));
    expect(decodeAt(buf, starts[1])).toEqual(expectedState(b));
    expect(decodeAt(buf, starts[2])).toEqual({ kind: KIND_DELETE, id: 10 });
    expect(decodeAt(buf, starts[3])).toEqual(expectedJob({ ...b, tube: 'other' }));
    expect(scanRecord(buf, at, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
  });
});

describe('STATE and DELETE records', () => {
  it('round-trip every state', () => {
    for (const state of ['ready', 'delayed', 'buried'] as const) {
      const img = image({ id: 99, state, deadlineAt: T0 + 1234, delayMs: 1234, buriedSeq: 8, reserves: 5, releases: 6, buries: 7, kicks: 8, timeouts: 9 });
      expect(decodeAt(stateRecord(img))).toEqual(expectedState(img));
    }
  });

  it('store a reserved job as ready', () => {
    const img = image({ state: 'reserved', deadlineAt: T0 + 60_000, reserves: 1 });
    expect(decodeAt(stateRecord(img, 'reserved'))).toMatchObject({ kind: KIND_STATE, state: { state: 'ready', deadlineAt: 0, reserves: 1 } });
  });

  it('have fixed sizes', () => {
    expect(stateRecord(image()).length).toBe(STATE_RECORD_BYTES);
    expect(deleteRecord(1).length).toBe(DELETE_RECORD_BYTES);
  });
});

describe('version 2: strikes, bury causes and tube settings', () => {
  it('round-trips strikes and the bury cause in JOB and STATE records', () => {
    const img = image({ state: 'buried', strikes: 4_000_000_000, buryCause: 3 });
    const job = jobRecord(img);
    expect(decodeRecord(job, 0, job.length)).toEqual(expectedJob(img));
    const state = stateRecord(img);
    expect(decodeRecord(state, 0, state.length)).toEqual(expectedState(img));
  });

  it('round-trips TUBE records, set and cleared, with and without a policy', () => {
    const policy: TubePolicy = { concurrency: 3, rate: { perSecond: 2.5, burst: 4 }, queueCap: 0, timeoutBackoff: { baseMs: 1000, factor: 2, maxMs: 60000, jitter: 0.25 } };
    for (const settings of [{ deadLetterAfter: 7 }, { deadLetterAfter: 0 }, null]) {
      for (const p of [null, policy]) {
        const tube = 'emails.$(x)';
        const buf = Buffer.alloc(tubeRecordBytes(tube.length, policyBytes(p).length));
        expect(encodeTube(buf, 0, { tube, settings, policy: p }, SALT)).toBe(buf.length);
        expect(scanRecord(buf, 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'record', size: buf.length });
        expect(decodeRecord(buf, 0, buf.length)).toEqual({ kind: KIND_TUBE, tube: { tube, settings, policy: p } });
      }
    }
  });

  it('rejects a TUBE record whose policy is not one the API would take', () => {
    const tube = 'ab';
    const json = Buffer.from(JSON.stringify({ concurrency: 0 }));
    const buf = Buffer.alloc(tubeRecordBytes(tube.length, json.length));
    encodeTube(buf, 0, { tube, settings: null, policy: NO_POLICY }, SALT, json);
    expect(decodeRecord(buf, 0, buf.length)).toBe('bad TUBE record policy');
  });

  it('reads version 1 records (no strikes, 4 bytes shorter) as strikes 0 and no bury cause', () => {
    const img = image({ state: 'buried', strikes: 5, buryCause: 1, tube: 'v1', body: Buffer.from('old body') });
    // A version 1 JOB record: the version 2 one without the flag byte and the strikes field.
    const v2 = jobRecord(img);
    const p = RECORD_HEADER_BYTES;
    const v1 = Buffer.concat([v2.subarray(0, p + 80), v2.subarray(p + 84)]);
    v1[p + 3] = 0;
    reseal(v1, 0, v1.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(v1, 0, v1.length)).toEqual(expectedJob({ ...img, strikes: 0, buryCause: 0 }));
    const state = stateRecord(img);
    const v1State = Buffer.from(state.subarray(0, STATE_RECORD_BYTES - 4));
    v1State[p + 2] = 0;
    reseal(v1State, 0, v1State.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(v1State, 0, v1State.length)).toEqual(expectedState({ ...img, strikes: 0, buryCause: 0 }));
    // A version 1 segment header is still one this reader takes.
    const header = encodeSegmentHeader(3, T0, SALT);
    header.writeUInt32LE(1, 8);
    header.writeUInt32LE(crc32(header.subarray(0, 28), 0), 28);
    expect(checkSegmentHeader(header)).toEqual({ ok: true, index: 3, salt: SALT });
  });

  it('rejects a TUBE record with a bad length, an empty name or a bad flag, and an unknown bury cause', () => {
    const good = Buffer.alloc(tubeRecordBytes(2));
    encodeTube(good, 0, { tube: 'ab', settings: { deadLetterAfter: 1 }, policy: null }, SALT);
    const badFlag = Buffer.from(good);
    badFlag[RECORD_HEADER_BYTES + 1] = 4;
    reseal(badFlag, 0, badFlag.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(badFlag, 0, badFlag.length)).toBe('bad TUBE record');
    const badLength = Buffer.from(good);
    badLength[RECORD_HEADER_BYTES + 2] = 3;
    reseal(badLength, 0, badLength.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(badLength, 0, badLength.length)).toBe('bad TUBE record');
    const state = stateRecord(image());
    state[RECORD_HEADER_BYTES + 2] = 4;
    reseal(state, 0, state.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(state, 0, state.length)).toBe('bad bury cause 4');
  });
});

describe('decodeRecord on well-framed records with impossible contents', () => {
  it('rejects an unknown kind', () => {
    const rec = stateRecord(image());
    rec[RECORD_HEADER_BYTES] = 9;
    reseal(rec, 0, rec.length - RECORD_HEADER_BYTES);
    expect(scanRecord(rec, 0, MAX_PAYLOAD, SALT).kind).toBe('record');
    expect(decodeRecord(rec, 0, rec.length)).toBe('unknown record kind 9');
  });

  it('rejects a bad state code', () => {
    for (const code of [0, 4, 255]) {
      const rec = stateRecord(image());
      rec[RECORD_HEADER_BYTES + 1] = code;
      reseal(rec, 0, STATE_RECORD_BYTES - RECORD_HEADER_BYTES);
      expect(decodeRecord(rec, 0, rec.length)).toBe(`bad job state ${code}`);
    }
  });

  it('rejects a JOB record whose lengths disagree, or with an empty tube name', () => {
    const rec = jobRecord(image());
    rec.writeUInt32LE(6, RECORD_HEADER_BYTES + 76); // body length one more than the record holds
    reseal(rec, 0, rec.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(rec, 0, rec.length)).toBe('bad JOB record lengths');

    const noTube = jobRecord(image({ tube: 'x', body: Buffer.from('ab') }));
    noTube[RECORD_HEADER_BYTES + 2] = 0;
    noTube.writeUInt32LE(3, RECORD_HEADER_BYTES + 76);
    reseal(noTube, 0, noTube.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(noTube, 0, noTube.length)).toBe('bad JOB record lengths');
  });

  it('rejects STATE and DELETE records of the wrong size', () => {
    const longState = Buffer.alloc(STATE_RECORD_BYTES + 4);
    stateRecord(image()).copy(longState);
    reseal(longState, 0, longState.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(longState, 0, longState.length)).toBe('bad STATE record size');

    const shortDelete = deleteRecord(3).subarray(0, DELETE_RECORD_BYTES - 4);
    const copy = Buffer.from(shortDelete);
    reseal(copy, 0, copy.length - RECORD_HEADER_BYTES);
    expect(decodeRecord(copy, 0, copy.length)).toBe('bad DELETE record size');
  });
});

describe('scanRecord', () => {
  it('reports the size of an intact record', () => {
    for (const s of samples) expect(scanRecord(s.bytes, 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'record', size: s.bytes.length });
  });

  it('never returns a different record for any single corrupted byte', () => {
    const verdicts = { record: 0, end: 0, short: 0, bad: 0 };
    const wrong: string[] = [];
    for (const s of samples) {
      const accepted: { what: string; rec: DecodedRecord | string }[] = [];
      // Alone, followed by zeros (preallocated space), and followed by another record.
      const contexts = [
        { tail: Buffer.alloc(0) },
        { tail: Buffer.alloc(4096) },
        { tail: Buffer.concat([deleteRecord(77), Buffer.alloc(64)]) },
      ];
      for (const { tail } of contexts) {
        const buf = Buffer.concat([s.bytes, tail]);
        for (let i = 0; i < s.bytes.length; i++) {
          const original = buf[i]!;
          for (let v = 0; v < 256; v++) {
            if (v === original) continue;
            buf[i] = v;
            const scan = scanRecord(buf, 0, MAX_PAYLOAD, SALT);
            verdicts[scan.kind]++;
            if (scan.kind === 'record') {
              // Only acceptable if the bytes still mean exactly the same record.
              accepted.push({ what: `${s.name} + ${tail.length} byte tail: byte ${i} = ${v}`, rec: decodeRecord(buf, 0, scan.size) });
            } else if (scan.kind === 'end') {
              wrong.push(`${s.name} + ${tail.length} byte tail: byte ${i} = ${v} reads as the end`);
            }
          }
          buf[i] = original;
        }
        expect(scanRecord(buf, 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'record', size: s.bytes.length });
      }
      for (const a of accepted) expect(a.rec, a.what).toEqual(s.decoded);
    }
    expect(wrong).toEqual([]);
    // CRC-32 catches every single-byte change, so nothing damaged is ever accepted.
    expect(verdicts.record).toBe(0);
    expect(verdicts.bad + verdicts.short).toBeGreaterThan(0);
  });

  it('flags a corrupted byte as bad when the record is followed by more data', () => {
    for (const s of samples) {
      const buf = Buffer.concat([s.bytes, Buffer.alloc(1 << 16)]);
      for (let i = 0; i < s.bytes.length; i++) {
        buf[i]! ^= 0x01;
        expect(scanRecord(buf, 0, MAX_PAYLOAD, SALT).kind, `${s.name}: byte ${i}`).toBe('bad');
        buf[i]! ^= 0x01;
      }
    }
  });

  it('calls every truncation short (or end when nothing was written)', () => {
    for (const s of samples) {
      expect(scanRecord(s.bytes.subarray(0, 0), 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
      for (let k = 1; k < s.bytes.length; k++) {
        expect(scanRecord(s.bytes.subarray(0, k), 0, MAX_PAYLOAD, SALT), `${s.name} cut at ${k}`).toEqual({ kind: 'short' });
      }
    }
  });

  it('never accepts a torn write followed by zeros as a different record', () => {
    for (const s of samples) {
      for (let k = 0; k < s.bytes.length; k++) {
        const buf = Buffer.concat([s.bytes.subarray(0, k), Buffer.alloc(s.bytes.length - k + 512)]);
        const scan = scanRecord(buf, 0, MAX_PAYLOAD, SALT);
        if (k === 0) expect(scan).toEqual({ kind: 'end' });
        else if (scan.kind === 'record') expect(decodeRecord(buf, 0, scan.size), `${s.name} torn at ${k}`).toEqual(s.decoded);
        else expect(['bad', 'short'], `${s.name} torn at ${k}`).toContain(scan.kind);
      }
    }
  });

  it('accepts a record whose cut-off tail was zeros anyway, as the same record', () => {
    const img = image({ body: Buffer.from([1, 2, 0, 0, 0]) });
    const rec = jobRecord(img);
    const buf = Buffer.concat([rec.subarray(0, rec.length - 3), Buffer.alloc(100)]);
    expect(decodeAt(buf)).toEqual(expectedJob(img));
  });

  it('reads zero tails as the end, and a zero header before data as bad', () => {
    expect(scanRecord(Buffer.alloc(4096), 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
    expect(scanRecord(Buffer.alloc(5), 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
    expect(scanRecord(Buffer.alloc(40), 40, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
    const buf = Buffer.alloc(4096);
    buf[4000] = 1;
    expect(scanRecord(buf, 0, MAX_PAYLOAD, SALT)).toMatchObject({ kind: 'bad', reason: 'non-zero bytes after a zero header' });
    expect(scanRecord(buf, 4001, MAX_PAYLOAD, SALT)).toEqual({ kind: 'end' });
    const tiny = Buffer.from([0, 0, 0, 7]);
    expect(scanRecord(tiny, 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'short' });
  });

  it('rejects lengths below 4 and above maxPayload', () => {
    const rec = jobRecord(image({ body: Buffer.alloc(1000, 1) }));
    expect(scanRecord(rec, 0, rec.length - RECORD_HEADER_BYTES, SALT).kind).toBe('record');
    expect(scanRecord(rec, 0, rec.length - RECORD_HEADER_BYTES - 1, SALT)).toMatchObject({ kind: 'bad', reason: expect.stringMatching(/bad record length/) });
    const zeroLen = Buffer.alloc(64);
    zeroLen.writeUInt32LE(RECORD_MAGIC, 0);
    for (const len of [0, 1, 3]) {
      zeroLen.writeUInt32LE(len, 4);
      expect(scanRecord(zeroLen, 0, MAX_PAYLOAD, SALT)).toEqual({ kind: 'bad', reason: `bad record length ${len}` });
    }
    // A huge length is bad at once, not a "short" record that would never complete.
    zeroLen.writeUInt32LE(0xffffffff, 4);
    expect(scanRecord(zeroLen, 0, MAX_PAYLOAD, SALT).kind).toBe('bad');
  });
});

describe('resync', () => {
  const rec = jobRecord(image({ id: 5 }));
  const del = deleteRecord(6);

  it('finds the next intact record after garbage', () => {
    const garbage = Buffer.from('this is not a record at all \x00\x01\x02', 'latin1');
    const buf = Buffer.concat([garbage, rec, del]);
    expect(resync(buf, 0, MAX_PAYLOAD, SALT)).toBe(garbage.length);
    expect(resync(buf, garbage.length, MAX_PAYLOAD, SALT)).toBe(garbage.length + rec.length);
    expect(resync(buf, garbage.length + rec.length, MAX_PAYLOAD, SALT)).toBe(-1);
  });

  it('skips a stray magic that does not start an intact record', () => {
    const fake = Buffer.alloc(20, 0xab);
    fake.writeUInt32LE(RECORD_MAGIC, 3);
    const damaged = Buffer.from(rec);
    damaged[RECORD_HEADER_BYTES + 20]! ^= 0xff;
    const buf = Buffer.concat([fake, damaged, del, Buffer.alloc(100)]);
    expect(scanRecord(buf, fake.length, MAX_PAYLOAD, SALT).kind).toBe('bad');
    expect(resync(buf, 0, MAX_PAYLOAD, SALT)).toBe(fake.length + damaged.length);
  });

  it('returns -1 when nothing intact follows', () => {
    expect(resync(Buffer.alloc(1000), 0, MAX_PAYLOAD, SALT)).toBe(-1);
    expect(resync(rec.subarray(0, rec.length - 1), 0, MAX_PAYLOAD, SALT)).toBe(-1);
  });

  it('finds a record after a damaged one inside a batch of records', () => {
    const parts = [jobRecord(image({ id: 1 })), stateRecord(image({ id: 1, state: 'buried' })), jobRecord(image({ id: 2 })), deleteRecord(1)];
    const buf = Buffer.concat([...parts, Buffer.alloc(256)]);
    buf[parts[0]!.length + 30]! ^= 0x10; // inside the STATE record
    const at = parts[0]!.length;
    expect(scanRecord(buf, at, MAX_PAYLOAD, SALT)).toMatchObject({ kind: 'bad', reason: 'checksum mismatch' });
    expect(resync(buf, at, MAX_PAYLOAD, SALT)).toBe(at + parts[1]!.length);
  });
});

describe('segment headers', () => {
  it('round-trip the index', () => {
    const h = encodeSegmentHeader(42, T0, SALT);
    expect(h.length).toBe(SEGMENT_HEADER_BYTES);
    expect(checkSegmentHeader(h)).toEqual({ ok: true, index: 42, salt: SALT });
    expect(checkSegmentHeader(Buffer.concat([h, Buffer.alloc(100)]))).toEqual({ ok: true, index: 42, salt: SALT });
    expect(h.readUInt32LE(8)).toBe(FORMAT_VERSION);
  });

  it('reject a short buffer', () => {
    expect(checkSegmentHeader(encodeSegmentHeader(1, T0, SALT).subarray(0, 31))).toEqual({
      ok: false,
      problem: 'short',
      reason: 'shorter than its header',
    });
    expect(checkSegmentHeader(Buffer.alloc(0))).toMatchObject({ ok: false, problem: 'short' });
  });

  it('call a header with a valid checksum but another magic foreign', () => {
    const h = encodeSegmentHeader(1, T0, SALT);
    h.write('binlog.1', 0, 'latin1');
    h.writeUInt32LE(crc32(h.subarray(0, 28), 0), 28);
    expect(checkSegmentHeader(h)).toEqual({ ok: false, problem: 'foreign', reason: 'not a Beanpole binlog segment' });
  });

  it('call a header damaged, whichever byte is flipped (magic and version included: damage, not another format)', () => {
    for (let i = 0; i < SEGMENT_HEADER_BYTES; i++) {
      const h = encodeSegmentHeader(7, T0, SALT);
      h[i]! ^= 0x04;
      const reason = i < 8 ? 'header checksum mismatch, bad magic' : 'header checksum mismatch';
      expect(checkSegmentHeader(h), `byte ${i}`).toEqual({ ok: false, problem: 'damaged', reason });
    }
  });

  it('call a different format version with a valid checksum foreign', () => {
    const h = encodeSegmentHeader(3, T0, SALT);
    h.writeUInt32LE(FORMAT_VERSION + 1, 8);
    h.writeUInt32LE(crc32(h.subarray(0, 28), 0), 28);
    expect(checkSegmentHeader(h)).toEqual({ ok: false, problem: 'foreign', reason: `unknown format version ${FORMAT_VERSION + 1}` });
  });

  it('match the header checksum with the right salt in place of damaged salt bytes, and only then', () => {
    const h = encodeSegmentHeader(3, T0, SALT);
    expect(segmentHeaderMatchesSalt(h, SALT)).toBe(true);
    h[25]! ^= 0x10;
    expect(checkSegmentHeader(h)).toMatchObject({ ok: false, problem: 'damaged' });
    expect(segmentHeaderMatchesSalt(h, SALT)).toBe(true);
    expect(segmentHeaderMatchesSalt(h, h.readUInt32LE(24))).toBe(false);
    expect(segmentHeaderMatchesSalt(h, SALT ^ 1)).toBe(false);
    // Damage outside the salt: no salt makes it match.
    h[25]! ^= 0x10;
    h[13]! ^= 0x01;
    expect(segmentHeaderMatchesSalt(h, SALT)).toBe(false);
  });
});

describe('recordSalt', () => {
  const records = (): Buffer[] => [jobRecord(image({ id: 9, body: Buffer.from('BPR1 in a body') })), stateRecord(image({ state: 'buried' })), deleteRecord(3)];

  it('gives the salt each kind of record was sealed with, wherever it sits', () => {
    for (const rec of records()) {
      const buf = Buffer.concat([Buffer.alloc(5, 0xee), rec, Buffer.alloc(7)]);
      expect(recordSalt(buf, 5, MAX_PAYLOAD)).toBe(SALT);
      expect(scanRecord(buf, 5, MAX_PAYLOAD, recordSalt(buf, 5, MAX_PAYLOAD)!)).toEqual({ kind: 'record', size: rec.length });
    }
  });

  it('gives another salt for a record with a damaged length, crc or payload', () => {
    for (const rec of records()) {
      for (let i = 4; i < rec.length; i++) {
        const bad = Buffer.from(rec);
        bad[i]! ^= 0x01;
        const salt = recordSalt(bad, 0, MAX_PAYLOAD);
        // A changed length may no longer fit the buffer: then there is no candidate at all.
        if (salt !== null) expect(salt, `byte ${i}`).not.toBe(SALT);
      }
    }
  });

  it('is null where no record can start: no magic, a length out of bounds or past the end, too few bytes', () => {
    const rec = jobRecord(image());
    const noMagic = Buffer.from(rec);
    noMagic[0]! ^= 1;
    expect(recordSalt(noMagic, 0, MAX_PAYLOAD)).toBeNull();
    const long = Buffer.from(rec);
    long.writeUInt32LE(rec.length, 4);
    expect(recordSalt(long, 0, MAX_PAYLOAD)).toBeNull();
    const short = Buffer.from(rec);
    short.writeUInt32LE(3, 4);
    expect(recordSalt(short, 0, MAX_PAYLOAD)).toBeNull();
    expect(recordSalt(rec, 0, rec.length - RECORD_HEADER_BYTES - 1)).toBeNull();
    expect(recordSalt(rec.subarray(0, rec.length - 1), 0, MAX_PAYLOAD)).toBeNull();
    expect(recordSalt(rec.subarray(0, 11), 0, MAX_PAYLOAD)).toBeNull();
  });
});

describe('segment file names', () => {
  it('round-trip', () => {
    for (const i of [1, 9, 10, 123456, 4294967295]) expect(parseSegmentFileName(segmentFileName(i))).toBe(i);
    expect(segmentFileName(3)).toBe('binlog.3.bp');
  });

  it('ignore other names', () => {
    for (const name of ['binlog.0.bp', 'binlog.01.bp', 'binlog.1', 'binlog.1.bp.tmp', 'xbinlog.1.bp', 'binlog.-1.bp', 'binlog..bp', 'next-id', 'beanpole.lock', 'binlog.12345678901.bp']) {
      expect(parseSegmentFileName(name), name).toBeNull();
    }
  });
});
