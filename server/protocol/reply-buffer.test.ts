import { describe, expect, it } from 'vitest';
import { immediateDurability } from '../engine/journal.js';
import type { Durability, JobBytes } from '../operations/operations.js';
import { WORD } from './beanstalk/replies.js';
import { ReplyBuffer } from './reply-buffer.js';

/** A journal whose durable point moves only when the test says so. */
class ManualDurability implements Durability {
  appendedSeq = 0;
  durableSeq = 0;
  waiters: { seq: number; fn: () => void }[] = [];
  whenDurable(seq: number, fn: () => void): void {
    if (seq <= this.durableSeq) fn();
    else this.waiters.push({ seq, fn });
  }
  advance(to: number): void {
    this.durableSeq = to;
    const due = this.waiters.filter((w) => w.seq <= to);
    this.waiters = this.waiters.filter((w) => w.seq > to);
    for (const w of due) w.fn();
  }
}

function setup(durability: Durability = immediateDurability): { out: ReplyBuffer; writes: string[] } {
  const writes: string[] = [];
  const out = new ReplyBuffer((b) => writes.push(b.toString('latin1')) > 0, durability);
  return { out, writes };
}

/** A body at an offset inside a larger buffer, as a store holds it. */
function body(text: string | Buffer): Pick<JobBytes, 'bodyBuf' | 'bodyOffset' | 'bodyLength'> {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'latin1') : text;
  const bodyBuf = Buffer.concat([Buffer.from('before'), bytes, Buffer.from('after')]);
  return { bodyBuf, bodyOffset: 6, bodyLength: bytes.length };
}

describe('ReplyBuffer', () => {
  it('encodes numbers, text and jobs exactly', () => {
    const { out, writes } = setup();
    for (const n of [0, 7, 9, 10, 99, 100, 4294967295, Number.MAX_SAFE_INTEGER]) out.wordNumber(WORD.INSERTED, n);
    out.wordText(WORD.USING, 'tube-with_odd+chars');
    out.job(WORD.RESERVED, 12, body('hello'));
    out.job(WORD.FOUND, 3, body(''));
    out.job(WORD.RESERVED, 5, body(Buffer.from([0, 13, 10, 255])));
    out.flush();
    expect(writes).toEqual([
      'INSERTED 0\r\nINSERTED 7\r\nINSERTED 9\r\nINSERTED 10\r\nINSERTED 99\r\nINSERTED 100\r\n' +
        `INSERTED 4294967295\r\nINSERTED ${Number.MAX_SAFE_INTEGER}\r\nUSING tube-with_odd+chars\r\n` +
        'RESERVED 12 5\r\nhello\r\nFOUND 3 0\r\n\r\nRESERVED 5 4\r\n\x00\r\n\xff\r\n',
    ]);
  });

  it('sends everything made in one turn in one write, however large', () => {
    const { out, writes } = setup();
    const big = body(Buffer.alloc(100_000, 'b'));
    for (let i = 0; i < 500; i++) out.bytes(Buffer.from('DELETED\r\n'));
    out.job(WORD.RESERVED, 1, big);
    out.wordNumber(WORD.KICKED, 3);
    expect(out.pending).toBe(500 * 9 + 'RESERVED 1 100000\r\n'.length + 100_002 + 'KICKED 3\r\n'.length);
    out.flush();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.startsWith('DELETED\r\n'.repeat(500) + 'RESERVED 1 100000\r\nbbb')).toBe(true);
    expect(writes[0]!.endsWith('bbb\r\nKICKED 3\r\n')).toBe(true);
    expect(out.pending).toBe(0);
    out.flush();
    expect(writes).toHaveLength(1);
  });

  it('never changes bytes already handed to the socket', () => {
    const handed: Buffer[] = [];
    // The socket still holds them (a slow client): the writer says they were not all taken.
    const out = new ReplyBuffer((b) => handed.push(b) < 0, immediateDurability);
    out.wordNumber(WORD.INSERTED, 1);
    out.flush();
    out.wordNumber(WORD.INSERTED, 2);
    out.flush();
    for (let i = 0; i < 2000; i++) out.wordNumber(WORD.INSERTED, i);
    out.flush();
    expect(handed[0]!.toString()).toBe('INSERTED 1\r\n');
    expect(handed[1]!.toString()).toBe('INSERTED 2\r\n');
  });

  it('writes the next replies over the same memory once the kernel took every byte', () => {
    const handed: Buffer[] = [];
    const texts: string[] = [];
    const out = new ReplyBuffer((b) => {
      handed.push(b);
      texts.push(b.toString('latin1'));
      return true;
    }, immediateDurability);
    for (let i = 0; i < 1000; i++) {
      out.wordNumber(WORD.INSERTED, i);
      out.flush();
    }
    expect(texts).toEqual(Array.from({ length: 1000 }, (_, i) => `INSERTED ${i}\r\n`));
    expect(new Set(handed.map((b) => b.buffer)).size).toBe(1);
    expect(new Set(handed.map((b) => b.byteOffset)).size).toBe(1);
  });

  it('holds replies until the records made before them are durable, in order', () => {
    const d = new ManualDurability();
    const { out, writes } = setup(d);
    out.wordNumber(WORD.INSERTED, 1); // nothing appended yet: free to go
    d.appendedSeq = 1;
    out.wordNumber(WORD.INSERTED, 2); // needs record 1
    out.bytes(Buffer.from('USING a\r\n')); // still needs record 1 (nothing newer appended)
    d.appendedSeq = 3;
    out.bytes(Buffer.from('DELETED\r\n')); // needs record 3
    out.flush();
    expect(writes).toEqual(['INSERTED 1\r\n']);
    expect(out.held).toBe('INSERTED 2\r\nUSING a\r\nDELETED\r\n'.length);
    out.flush(); // a second flush must not register a second wait
    expect(d.waiters).toHaveLength(1);
    d.advance(2);
    expect(writes).toEqual(['INSERTED 1\r\n', 'INSERTED 2\r\nUSING a\r\n']);
    expect(d.waiters).toHaveLength(1);
    out.wordNumber(WORD.INSERTED, 4); // made after record 3 was appended: waits behind it
    d.advance(3);
    expect(writes).toEqual(['INSERTED 1\r\n', 'INSERTED 2\r\nUSING a\r\n', 'DELETED\r\nINSERTED 4\r\n']);
    expect(out.pending).toBe(0);
    expect(out.held).toBe(0);
  });

  it('keeps held replies intact when the slab has to grow', () => {
    const d = new ManualDurability();
    const { out, writes } = setup(d);
    d.appendedSeq = 1;
    out.wordNumber(WORD.INSERTED, 1);
    out.flush();
    d.appendedSeq = 2;
    for (let i = 2; i < 3000; i++) out.wordNumber(WORD.INSERTED, i);
    out.flush();
    expect(writes).toEqual([]);
    d.advance(2);
    const expected = Array.from({ length: 2999 }, (_, i) => `INSERTED ${i + 1}\r\n`).join('');
    expect(writes.join('')).toBe(expected);
  });
});
