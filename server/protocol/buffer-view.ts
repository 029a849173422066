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

/**
 * The memory (`.buffer`) of the last buffer asked about, kept: reading `.buffer` is a generic
 * property load and a runtime call, and the buffers a hot path reads come from the same few in a
 * row (the shared read buffer, a body store slab, a connection's reply slab). One per call site,
 * so that two paths that alternate do not evict each other. A buffer over `maxKeptBytes` (a big
 * assembled packet, a large body's own buffer) is not held on to.
 */
export class LastMemory {
  private source: Uint8Array = new Uint8Array(0);
  private memory: ArrayBufferLike = this.source.buffer;

  constructor(private readonly maxKeptBytes: number) {}

  of(buf: Uint8Array): ArrayBufferLike {
    if (buf === this.source) return this.memory;
    if (buf.byteLength > this.maxKeptBytes) return buf.buffer;
    this.source = buf;
    this.memory = buf.buffer;
    return this.memory;
  }
}

const viewed = new LastMemory(1024 * 1024);

/** `buf[start, end)` as a Buffer sharing `buf`'s memory, like `buf.subarray(start, end)` for 0 <= start <= end <= buf.length. */
export function viewOf(buf: Uint8Array, start: number, end: number): Buffer {
  return new View(viewed.of(buf), buf.byteOffset + start, end - start);
}
