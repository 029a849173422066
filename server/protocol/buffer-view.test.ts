import { describe, expect, it } from 'vitest';
import { viewOf } from './buffer-view.js';

describe('viewOf', () => {
  it('is a Buffer over the same memory, as subarray is', () => {
    const chunk = Buffer.from('put 0 0 0 5\r\nhello\r\n', 'latin1');
    const view = viewOf(chunk, 13, 18);
    expect(Buffer.isBuffer(view)).toBe(true);
    expect(view).toBeInstanceOf(Buffer);
    expect(view.toString('latin1')).toBe('hello');
    expect(view.equals(chunk.subarray(13, 18))).toBe(true);
    expect(view.buffer).toBe(chunk.buffer);
    expect(view.byteOffset).toBe(chunk.byteOffset + 13);
    expect(Buffer.isBuffer(view.subarray(1, 3))).toBe(true);
    expect(Buffer.from(view).toString('hex')).toBe(Buffer.from('hello').toString('hex'));
    chunk[13] = 0x48;
    expect(view.toString('latin1')).toBe('Hello');
  });

  it('views the right memory when chunks alternate, big or small', () => {
    const a = Buffer.from('aaaa-1234');
    const b = Buffer.alloc(2 * 1024 * 1024, 0x62);
    b.write('5678', 100);
    for (let i = 0; i < 3; i++) {
      expect(viewOf(a, 5, 9).toString()).toBe('1234');
      expect(viewOf(b, 100, 104).toString()).toBe('5678');
      expect(viewOf(a, 0, 0).length).toBe(0);
    }
  });
});
