import net from 'node:net';
import { replyLength } from '../support/raw-client.js';

/** Where a server listens: a TCP port on 127.0.0.1, or a UNIX socket path. */
export type { Address } from '../support/servers.js';
import type { Address } from '../support/servers.js';

/**
 * A byte-level client for transcripts. Like RawClient, but it can connect to a UNIX socket,
 * and a failed read hands back what did arrive instead of throwing.
 */
export class ByteClient {
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private ended = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.wake();
    });
    const end = (): void => {
      this.ended = true;
      this.wake();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  static connect(addr: Address): Promise<ByteClient> {
    return new Promise((resolve, reject) => {
      const socket =
        'port' in addr
          ? net.connect({ port: addr.port, host: '127.0.0.1', allowHalfOpen: true })
          : net.connect({ path: addr.path, allowHalfOpen: true });
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        if ('port' in addr) socket.setNoDelay(true);
        resolve(new ByteClient(socket));
      });
      socket.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  /** True once the server closed its side (or the connection failed). */
  get closed(): boolean {
    return this.ended;
  }

  send(data: string | Buffer): void {
    if (this.socket.destroyed || this.socket.writableEnded) return;
    this.socket.write(typeof data === 'string' ? Buffer.from(data, 'latin1') : data);
  }

  /** Writes `count` copies of `byte` in chunks, honouring backpressure. */
  async fill(byte: number, count: number): Promise<void> {
    const chunk = Buffer.alloc(Math.min(count, 1 << 20), byte);
    for (let left = count; left > 0 && !this.socket.destroyed; ) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!this.socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            this.socket.off('drain', done);
            this.socket.off('close', done);
            resolve();
          };
          this.socket.on('drain', done);
          this.socket.on('close', done);
        });
      }
    }
  }

  /** Half-closes: the server sees end of input. */
  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Removes and returns everything received but not read yet. */
  takeAll(): Buffer {
    const out = Buffer.from(this.buf);
    this.buf = Buffer.alloc(0);
    return out;
  }

  private sleepUntilWoken(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /**
   * Waits until `size(buffer)` says how many bytes to take, and takes them. Returns null if the
   * server closed the connection or `timeoutMs` passed first (the bytes stay unread).
   */
  private async take(size: (b: Buffer) => number, timeoutMs: number): Promise<Buffer | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const n = size(this.buf);
      if (n > 0) {
        const out = Buffer.from(this.buf.subarray(0, n));
        this.buf = this.buf.subarray(n);
        return out;
      }
      const left = deadline - Date.now();
      if (this.ended || left <= 0) return null;
      await this.sleepUntilWoken(left);
    }
  }

  /** One whole reply (a line, plus the body for RESERVED/FOUND/OK), or null. */
  reply(timeoutMs: number): Promise<Buffer | null> {
    return this.take(replyLength, timeoutMs);
  }

  /** Exactly n bytes, or null. */
  bytes(n: number, timeoutMs: number): Promise<Buffer | null> {
    return this.take((b) => (b.length >= n ? n : 0), timeoutMs);
  }

  /** Waits until the server closes the connection; false if it is still open after `timeoutMs`. */
  async waitClosed(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.sleepUntilWoken(left);
    }
    return true;
  }
}
