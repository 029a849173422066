/** A job handle is this many bytes at most (the protocol: 64 including a NUL terminator). */
export const MAX_HANDLE_BYTES = 63;

/**
 * Job handles: `H:<host>:<job id>`, as gearmand makes them, with the host cut so that any id
 * fits in 63 bytes. The id is the engine's, so a handle names one job for as long as it lives.
 */
export class JobHandles {
  private readonly prefix: string;
  /** `H:<host>:`, what every handle starts with; replies write it and the id's digits straight into their packet. */
  readonly prefixBytes: Buffer;

  constructor(host: string) {
    // 16 digits cover every safe integer id; "H:" and ":" take three more bytes.
    const room = MAX_HANDLE_BYTES - 3 - 16;
    this.prefix = `H:${host.replace(/[^\x21-\x7e]/g, '_').slice(0, room)}:`;
    this.prefixBytes = Buffer.from(this.prefix, 'latin1');
  }

  handle(id: number): string {
    return this.prefix + String(id);
  }

  /** The job id a handle (`handle[start, end)`) names, or null when it is not one of this server's handles. */
  idOf(handle: Buffer | string, start = 0, end = handle.length): number | null {
    // Every WORK_* packet names its job: compared and parsed in place, no string or view made
    // (a byte loop: the prefix is short, and a native compare costs more than it saves).
    const buf = typeof handle === 'string' ? Buffer.from(handle, 'latin1') : handle;
    const prefix = this.prefixBytes;
    const plen = prefix.length;
    const digits = end - start - plen;
    if (digits < 1 || digits > 16) return null;
    for (let i = 0; i < plen; i++) if (buf[start + i] !== prefix[i]) return null;
    if (buf[start + plen] === 0x30) return null; // no leading zero: one spelling per id
    let id = 0;
    for (let i = start + plen; i < end; i++) {
      const c = buf[i]! - 0x30;
      if (c < 0 || c > 9) return null;
      id = id * 10 + c;
    }
    return Number.isSafeInteger(id) ? id : null;
  }
}
