/**
 * Where job bodies live. Small bodies are copied back to back into shared slabs, so a job costs
 * its body's bytes plus three fields instead of a Buffer object of its own (about 100 bytes of
 * heap per job, as much again as a 100-byte body). Large bodies keep a buffer each.
 *
 * Slab memory is never reused in place: a body's bytes stay valid for as long as anyone holds a
 * view of them, and a slab is freed by the garbage collector once no job and no view refers to
 * it. Jobs that outlive their neighbours would pin mostly empty slabs, so when the slabs hold
 * more dead bytes than live ones the engine moves the live bodies out of sparse slabs
 * (`needsCompaction`, `isSparse`, `move`), a few per operation.
 */
let slabsMade = 0;

export class BodySlab {
  /** Tells slabs apart in a body's stamp (`bodyStamp`). */
  readonly serial = ++slabsMade;
  /** Bytes handed out; the rest of `buf` is free. */
  used = 0;
  /** Bytes of bodies still stored here. */
  live = 0;

  constructor(
    readonly buf: Buffer,
    /** False for a large body's own buffer, which is never counted as waste. */
    readonly shared: boolean,
  ) {}
}

/**
 * A number that changes when a body is replaced or moved: its slab and offset in one value
 * (offsets stay below 2^20 in shared slabs; a large body's own slab starts at 0).
 */
export function bodyStamp(holder: BodyHolder): number {
  return holder.slab.serial * 1_048_576 + bodyOffsetOf(holder);
}

/**
 * Where one body is: its slab, and its offset and length there in one number (`bodySpan`), so a
 * job spends two fields on its body, not three. In a shared slab the offset is below 2^17
 * (SLAB_BYTES) and the length below 2^14 (LARGE_BODY_BYTES), so the span stays below 2^31: a
 * small integer V8 keeps inline. A slab of its own holds exactly one body: offset 0, length the
 * buffer's, span 0.
 */
export interface BodyHolder {
  slab: BodySlab;
  bodySpan: number;
}

/** Bodies from this size up get a buffer of their own; 2^LENGTH_BITS (see BodyHolder). */
export const LARGE_BODY_BYTES = 16 * 1024;
const LENGTH_BITS = 14;
const LENGTH_MASK = LARGE_BODY_BYTES - 1;
const SLAB_BYTES = 128 * 1024;

export function bodyOffsetOf(holder: BodyHolder): number {
  return holder.bodySpan >>> LENGTH_BITS;
}

export function bodyLengthOf(holder: BodyHolder): number {
  return holder.slab.shared ? holder.bodySpan & LENGTH_MASK : holder.slab.buf.length;
}
/** Dead slab bytes tolerated before compaction starts, whatever the live size. */
const MIN_WASTE_BYTES = 16 * 1024 * 1024;

/** Shared by every empty body, and the current slab before the first body arrives. */
const EMPTY = new BodySlab(Buffer.alloc(0), false);

export class BodyStore {
  /** Bytes of all live bodies, small and large. */
  bytes = 0;
  /** Bytes of shared slabs that still hold a live body, the current slab included. */
  slabBytes = 0;
  /** Bytes of live bodies in shared slabs. */
  liveBytes = 0;
  private current: BodySlab = EMPTY;

  /**
   * Copies `src` into the store and points `holder` at the copy. With `adopt`, the caller gives
   * `src`'s memory up, and a large body keeps it instead of a copy: a body of hundreds of MiB is
   * then neither held twice nor copied on the event loop.
   */
  place(holder: BodyHolder, src: Buffer, adopt = false): void {
    const n = src.length;
    let slab: BodySlab;
    if (n === 0) {
      slab = EMPTY;
    } else if (n >= LARGE_BODY_BYTES) {
      slab = new BodySlab(adopt ? src : Buffer.from(src), false);
    } else {
      slab = this.current;
      if (slab.buf.length - slab.used < n) slab = this.newSlab();
      slab.buf.set(src, slab.used); // TypedArray `set`: Buffer.copy adds checks and calls around it
      this.liveBytes += n;
    }
    holder.slab = slab;
    holder.bodySpan = slab.shared ? slab.used * LARGE_BODY_BYTES + n : 0;
    this.bytes += n;
    slab.used += n;
    slab.live += n;
  }

  /** Forgets `holder`'s body; a shared slab leaves the books once nothing live is left in it. */
  release(holder: BodyHolder): void {
    const slab = holder.slab;
    const n = bodyLengthOf(holder);
    slab.live -= n;
    this.bytes -= n;
    if (!slab.shared) return;
    this.liveBytes -= n;
    if (slab.live === 0 && slab !== this.current) this.slabBytes -= slab.buf.length;
  }

  /** True when dead bytes in slabs exceed both the live bytes and a floor. */
  get needsCompaction(): boolean {
    const waste = this.slabBytes - this.liveBytes;
    return waste > MIN_WASTE_BYTES && waste > this.liveBytes;
  }

  /** True when `holder`'s body sits in an old slab that is mostly dead space. */
  isSparse(holder: BodyHolder): boolean {
    const slab = holder.slab;
    return slab.shared && slab !== this.current && slab.live * 2 < slab.used;
  }

  /** Copies `holder`'s body into the current slab and releases the old copy. */
  move(holder: BodyHolder): void {
    const view = bodyView(holder);
    this.release(holder);
    this.place(holder, view);
  }

  private newSlab(): BodySlab {
    const old = this.current;
    // A slab left with nothing live stops counting the moment it stops being current.
    if (old.shared && old.live === 0) this.slabBytes -= old.buf.length;
    this.current = new BodySlab(Buffer.allocUnsafeSlow(SLAB_BYTES), true);
    this.slabBytes += SLAB_BYTES;
    return this.current;
  }
}

/** A view of the body's bytes (valid for as long as it is held). */
export function bodyView(holder: BodyHolder): Buffer {
  const offset = bodyOffsetOf(holder);
  return holder.slab.buf.subarray(offset, offset + bodyLengthOf(holder));
}
