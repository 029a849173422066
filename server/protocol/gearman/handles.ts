/** A job handle is this many bytes at most (the protocol: 64 including a NUL terminator). */
export const MAX_HANDLE_BYTES = 63;

/**
 * Job handles: `H:<host>:<job id>`, as gearmand makes them, with the host cut so that any id
 * fits in 63 bytes. The id is the engine's, so a handle names one job for as long as it lives.
 */
export class JobHandles {
  private readonly prefix: string;

  constructor(host: string) {
    // 16 digits cover every safe integer id; "H:" and ":" take three more bytes.
    const room = MAX_HANDLE_BYTES - 3 - 16;
    this.prefix = `H:${host.replace(/[^\x21-\x7e]/g, '_').slice(0, room)}:`;
  }

  handle(id: number): string {
    return this.prefix + String(id);
  }

  /** The job id a handle names, or null when it is not one of this server's handles. */
  idOf(handle: Buffer | string): number | null {
    const text = typeof handle === 'string' ? handle : handle.toString('latin1');
    if (!text.startsWith(this.prefix)) return null;
    const digits = text.slice(this.prefix.length);
    if (!/^[1-9][0-9]{0,15}$/.test(digits)) return null;
    const id = Number(digits);
    return Number.isSafeInteger(id) ? id : null;
  }
}
