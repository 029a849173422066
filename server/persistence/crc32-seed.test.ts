/**
 * crc32Seed(): running node:zlib's CRC-32 backwards, checked against crc32 itself on random
 * data and seeds (a seeded generator, so a failure reproduces).
 */
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32Seed } from './crc32-seed.js';

/** xorshift32: deterministic bytes for the cases below. */
function generator(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

function randomBytes(next: () => number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = next() & 0xff;
  return b;
}

describe('crc32Seed', () => {
  it('finds the seed crc32 started from, for random data and seeds', () => {
    const next = generator(0xc0ffee);
    for (let round = 0; round < 2000; round++) {
      const data = randomBytes(next, next() % 300);
      const seed = next();
      const crc = crc32(data, seed);
      expect(crc32Seed(data, crc), `round ${round}: ${data.length} bytes, seed ${seed}`).toBe(seed);
    }
  });

  it('handles the edge seeds and bytes', () => {
    for (const seed of [0, 1, 0x7fffffff, 0x80000000, 0xffffffff]) {
      for (const data of [Buffer.alloc(0), Buffer.alloc(1), Buffer.from([0xff]), Buffer.alloc(64, 0xff), Buffer.alloc(4096)]) {
        expect(crc32Seed(data, crc32(data, seed)), `seed ${seed}, ${data.length} bytes`).toBe(seed);
      }
    }
  });

  it('undoes a chain of crc32 calls as one run (a record: length field, then payload, seeded with the salt)', () => {
    const next = generator(7);
    for (let round = 0; round < 200; round++) {
      const salt = next();
      const length = randomBytes(next, 4);
      const payload = randomBytes(next, 1 + (next() % 500));
      const crc = crc32(payload, crc32(length, salt));
      expect(crc32Seed(Buffer.concat([length, payload]), crc)).toBe(salt);
    }
  });

  it('gives a different seed when one byte of the data differs (so a damaged record yields a wrong salt)', () => {
    const next = generator(99);
    const data = randomBytes(next, 100);
    const seed = 0x5a170001;
    const crc = crc32(data, seed);
    for (let i = 0; i < data.length; i++) {
      const bad = Buffer.from(data);
      bad[i]! ^= 0x01;
      expect(crc32Seed(bad, crc), `byte ${i}`).not.toBe(seed);
    }
  });
});
