/**
 * Views of part of a buffer, made for every job a door receives (its body in the socket chunk).
 *
 * Why not `buf.subarray`: Node's subarray reads `this.buffer` at a property-load site that every
 * Buffer in the process goes through (megamorphic: a generic lookup, then a runtime call that
 * fetches the memory), and then constructs its view. Here the memory of the last buffer seen is
 * kept (a door's chunks all come from the same shared read buffer, or from one packet) and the
 * view is constructed directly: a Uint8Array subclass whose prototype chain is Buffer's, as
 * Node's own views are (FastBuffer), so it is a Buffer to every caller. About 20 ns less per job.
 */

/** Buffer's own view class in all but name: `Buffer.isBuffer` and `instanceof Buffer` hold. */
class BufferView extends Uint8Array {}
Object.setPrototypeOf(BufferView.prototype, Buffer.prototype);
/** The constructor, typed as what its instances are. */
const View = BufferView as unknown as new (memory: ArrayBufferLike, byteOffset: number, length: number) => Buffer;

/** The largest buffer whose memory is kept between calls: a big assembled packet is not held on to. */
const MAX_KEPT_BYTES = 1024 * 1024;
let lastSource: Uint8Array = new Uint8Array(0);
let lastMemory: ArrayBufferLike = lastSource.buffer;

/** `buf[start, end)` as a Buffer sharing `buf`'s memory, like `buf.subarray(start, end)` for 0 <= start <= end <= buf.length. */
export function viewOf(buf: Uint8Array, start: number, end: number): Buffer {
  if (buf !== lastSource) {
    if (buf.byteLength > MAX_KEPT_BYTES) return new View(buf.buffer, buf.byteOffset + start, end - start);
    lastSource = buf;
    lastMemory = buf.buffer;
  }
  return new View(lastMemory, buf.byteOffset + start, end - start);
}
