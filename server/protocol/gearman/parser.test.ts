import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodePacket, PACKET, splitArgs } from './packets.js';
import { GearmanParser, MAX_ADMIN_LINE, type GearmanFrameHandler, type Magic } from './parser.js';

/** What the parser handed out, as comparable strings. */
class Recorder implements GearmanFrameHandler {
  readonly events: string[] = [];
  packet(magic: Magic, type: number, buf: Buffer, start: number, end: number): void {
    const data = buf.subarray(start, end);
    this.events.push(`${magic} ${type} ${data.toString('hex')}`);
  }
  oversized(magic: Magic, type: number, size: number): void {
    this.events.push(`oversized ${magic} ${type} ${size}`);
  }
  badMagic(): void {
    this.events.push('bad-magic');
  }
  adminLine(line: string): void {
    this.events.push(`admin ${JSON.stringify(line)}`);
  }
  adminOverlong(): void {
    this.events.push('admin-overlong');
  }
}

function request(type: number, ...args: string[]): Buffer {
  const res = encodePacket(type, args);
  res.write('REQ', 1, 'latin1');
  return res;
}

/** Feeds `input` as the given pieces; returns what came out. */
function parse(pieces: Buffer[], max = 1024): string[] {
  const r = new Recorder();
  const p = new GearmanParser(r, max);
  for (const piece of pieces) p.write(piece);
  return r.events;
}

/** Like `parse`, as a socket reading into one shared buffer that is overwritten after each write. */
function parseTransient(pieces: Buffer[], max = 1024): string[] {
  const r = new Recorder();
  const p = new GearmanParser(r, max);
  const shared = Buffer.alloc(Math.max(1, ...pieces.map((c) => c.length)));
  for (const piece of pieces) {
    piece.copy(shared);
    p.write(shared.subarray(0, piece.length), true);
    shared.fill(0xee);
  }
  return r.events;
}

/** Every way of cutting `input` in two, plus byte by byte: all must parse alike. */
function splits(input: Buffer): Buffer[][] {
  const out: Buffer[][] = [[input], [...input].map((b) => Buffer.from([b]))];
  for (let i = 1; i < input.length; i++) out.push([input.subarray(0, i), input.subarray(i)]);
  return out;
}

const FIXTURE = Buffer.concat([
  request(PACKET.SUBMIT_JOB, 'reverse', 'u1', 'hello\0world'),
  Buffer.from('status\r\n'),
  request(PACKET.PRE_SLEEP),
  request(PACKET.ECHO_REQ, ''),
  Buffer.from('workers\n'),
  request(PACKET.CAN_DO, 'fn'),
]);

describe('GearmanParser', () => {
  it('hands out packets and admin lines in order, however the input is cut', () => {
    const expected = [
      `REQ 7 ${Buffer.from('reverse\0u1\0hello\0world').toString('hex')}`,
      'admin "status"',
      'REQ 4 ',
      'REQ 16 ',
      'admin "workers"',
      `REQ 1 ${Buffer.from('fn').toString('hex')}`,
    ];
    for (const pieces of splits(FIXTURE)) expect(parse(pieces)).toEqual(expected);
  });

  it('tells a response magic apart, and stops at a bad one', () => {
    const res = encodePacket(PACKET.ECHO_RES, ['x']);
    expect(parse([res])).toEqual([`RES 17 ${Buffer.from('x').toString('hex')}`]);
    const bad = Buffer.concat([Buffer.from('\0XYZ'), Buffer.alloc(8), request(PACKET.ECHO_REQ, 'y')]);
    for (const pieces of splits(bad)) expect(parse(pieces)).toEqual(['bad-magic']);
  });

  it('reports a packet over the limit before buffering it, skips its data and goes on', () => {
    const big = request(PACKET.SUBMIT_JOB_BG, 'f', '', 'x'.repeat(100));
    const input = Buffer.concat([big, request(PACKET.ECHO_REQ, 'ok')]);
    const expected = [`oversized REQ 18 ${big.length - 12}`, `REQ 16 ${Buffer.from('ok').toString('hex')}`];
    for (const pieces of splits(input)) expect(parse(pieces, 50)).toEqual(expected);
  });

  it('discards an admin line over the limit up to its end', () => {
    const input = Buffer.from(`${'a'.repeat(MAX_ADMIN_LINE + 1)}\nversion\n`);
    expect(parse([input])).toEqual(['admin-overlong', 'admin "version"']);
    const halves = [input.subarray(0, 5000), input.subarray(5000)];
    expect(parse(halves)).toEqual(['admin-overlong', 'admin "version"']);
  });

  it('assembles a large packet from transient pieces, and holds transient input while paused', () => {
    const big = request(PACKET.SUBMIT_JOB, 'fn', 'u', 'x'.repeat(200_000) + 'end');
    const input = Buffer.concat([big, FIXTURE]);
    const pieces: Buffer[] = [];
    for (let at = 0; at < input.length; at += 65_536) pieces.push(input.subarray(at, at + 65_536));
    expect(parseTransient(pieces, 1 << 20)).toEqual(parse([input], 1 << 20));

    const r = new Recorder();
    const p = new GearmanParser(r, 1024);
    const shared = Buffer.from(FIXTURE);
    p.pause();
    p.write(shared, true);
    shared.fill(0xee);
    p.resume();
    expect(r.events).toEqual(parse([FIXTURE]));
  });

  it('holds frames while paused and counts what it holds', () => {
    const r = new Recorder();
    const p = new GearmanParser(r, 1024);
    p.pause();
    p.write(FIXTURE);
    expect(r.events).toEqual([]);
    expect(p.buffered).toBe(FIXTURE.length);
    p.resume();
    expect(r.events).toHaveLength(6);
    expect(p.buffered).toBe(0);
  });

  it('never throws and hands out only whole frames, for any bytes in any pieces', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(300), { maxLength: 5 }), (bytes, cuts) => {
        const input = Buffer.from(bytes);
        const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
        const pieces: Buffer[] = [];
        let last = 0;
        for (const c of points) {
          pieces.push(input.subarray(last, c));
          last = c;
        }
        pieces.push(input.subarray(last));
        expect(parse(pieces, 64)).toEqual(parse([input], 64));
        expect(parseTransient(pieces, 64)).toEqual(parse([input], 64));
      }),
    );
  });
});

describe('splitArgs', () => {
  it('splits at the first count-1 NULs and keeps NULs in the last argument', () => {
    const data = Buffer.from('fn\0uniq\0a\0b');
    expect(splitArgs(data, 3)!.map((b) => b.toString())).toEqual(['fn', 'uniq', 'a\0b']);
    expect(splitArgs(data, 1)!.map((b) => b.toString())).toEqual(['fn\0uniq\0a\0b']);
    expect(splitArgs(Buffer.from('fn'), 2)).toBeNull();
    expect(splitArgs(Buffer.alloc(0), 0)).toEqual([]);
  });
});
