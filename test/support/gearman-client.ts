import net from 'node:net';
import tls from 'node:tls';
import { encodePacket } from '../../server/protocol/gearman/packets.js';

/** A Gearman response as read off the wire. */
export interface Packet {
  magic: 'REQ' | 'RES';
  type: number;
  /** The data split at NULs into `count` arguments when asked, else whole. */
  data: Buffer;
}

/**
 * A byte-level Gearman client for tests: send request packets (or any bytes, or admin lines)
 * and read whole response packets or admin replies.
 */
export class GearmanTestClient {
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private ended = false;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.wake();
    });
    for (const event of ['end', 'close', 'error']) {
      socket.on(event, () => {
        this.ended = true;
        this.wake();
      });
    }
  }

  static connect(port: number, host = '127.0.0.1'): Promise<GearmanTestClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, host, () => resolve(new GearmanTestClient(socket)));
      // As client libraries do: a request written right after one with no answer (WORK_COMPLETE)
      // must not wait for the server's delayed ACK.
      socket.setNoDelay(true);
      socket.once('error', reject);
    });
  }

  /** A client over TLS (the options carry the CA, a client certificate ...), once its handshake is done. */
  static connectTls(port: number, options: tls.ConnectionOptions): Promise<GearmanTestClient> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ port, host: '127.0.0.1', ...options }, () => resolve(new GearmanTestClient(socket)));
      socket.setNoDelay(true);
      socket.once('error', reject);
    });
  }

  /** Sends a request packet of `type` whose arguments are joined by NULs. */
  request(type: number, ...args: (string | Buffer)[]): void {
    this.socket.write(requestPacket(type, ...args));
  }

  send(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Reads one response packet. */
  async packet(timeoutMs = 5000): Promise<Packet> {
    const raw = await this.take((b) => (b.length >= 12 && b.length >= 12 + b.readUInt32BE(8) ? 12 + b.readUInt32BE(8) : 0), timeoutMs);
    return { magic: raw.toString('latin1', 1, 4) === 'REQ' ? 'REQ' : 'RES', type: raw.readUInt32BE(4), data: raw.subarray(12) };
  }

  /** Reads one packet and returns its type and its arguments as latin1 strings. */
  async args(count: number, timeoutMs = 5000): Promise<[number, ...string[]]> {
    const p = await this.packet(timeoutMs);
    return [p.type, ...splitStrings(p.data, count)];
  }

  /** Reads an admin reply: up to and including a line that is `.`, or one line when `single`. */
  async adminReply(single: boolean, timeoutMs = 5000): Promise<string> {
    const raw = await this.take((b) => {
      const text = b.toString('latin1');
      if (single) {
        const i = text.indexOf('\n');
        return i < 0 ? 0 : i + 1;
      }
      if (text.startsWith('.\n')) return 2;
      const i = text.indexOf('\n.\n');
      return i < 0 ? 0 : i + 3;
    }, timeoutMs);
    return raw.toString('latin1');
  }

  /** Nothing arrives within `ms` (for replies that must not come). */
  async silentFor(ms: number): Promise<boolean> {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return this.buf.length === 0;
  }

  async waitClosed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error('connection still open');
      await this.wait(deadline - Date.now());
    }
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private async take(length: (b: Buffer) => number, timeoutMs: number): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const n = length(this.buf);
      if (n > 0) {
        const out = Buffer.from(this.buf.subarray(0, n));
        this.buf = this.buf.subarray(n);
        return out;
      }
      if (this.ended) throw new Error(`connection closed; unread: ${JSON.stringify(this.buf.toString('latin1'))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; unread: ${JSON.stringify(this.buf.toString('latin1'))}`);
      await this.wait(left);
    }
  }
}

export function requestPacket(type: number, ...args: (string | Buffer)[]): Buffer {
  return encodePacket(type, args, 'REQ');
}

/** Splits at the first count-1 NULs. */
export function splitStrings(data: Buffer, count: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < count - 1; i++) {
    const nul = data.indexOf(0, at);
    if (nul < 0) break;
    out.push(data.toString('latin1', at, nul));
    at = nul + 1;
  }
  out.push(data.toString('latin1', at));
  return out;
}
