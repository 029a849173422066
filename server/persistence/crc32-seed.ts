/**
 * Running zlib's CRC-32 backwards: given some bytes and the CRC that `crc32(bytes, seed)`
 * returned, find the seed. Recovery uses it to get a segment's checksum salt back from one of
 * its records when the salt in the segment header is damaged (see recovery.ts).
 *
 * zlib's CRC-32 (reflected, polynomial 0xEDB88320) keeps a 32-bit register: it starts as ~seed,
 * each input byte b does `reg = T[(reg ^ b) & 0xff] ^ (reg >>> 8)`, and the result is ~reg.
 * One step is undone like this: `reg >>> 8` has a zero top byte, so the top byte of the new
 * register is the top byte of T[i]; the 256 entries of T have 256 different top bytes, so that
 * byte names i. XOR-ing T[i] back out leaves `reg >>> 8`, the upper 24 bits of the old register,
 * and its low byte is i ^ b (because i = (reg ^ b) & 0xff).
 */

/** T[i]: the register after shifting byte i through eight rounds of the polynomial. */
const TABLE = new Uint32Array(256);
/** TOP_INDEX[T[i] >>> 24] = i. */
const TOP_INDEX = new Uint8Array(256);

for (let i = 0; i < 256; i++) {
  let c = i;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[i] = c >>> 0;
  TOP_INDEX[c >>> 24] = i;
}

/**
 * The seed `s` for which `crc32(data, s) === crc` (node:zlib's crc32). Every (data, crc) pair has
 * exactly one such seed, so the answer only means something once it is confirmed some other way.
 */
export function crc32Seed(data: Uint8Array, crc: number): number {
  let reg = ~crc >>> 0;
  for (let n = data.length - 1; n >= 0; n--) {
    const i = TOP_INDEX[reg >>> 24]!;
    reg = (((reg ^ TABLE[i]!) << 8) | (i ^ data[n]!)) >>> 0;
  }
  return ~reg >>> 0;
}
