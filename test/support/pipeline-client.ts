import net from 'node:net';
import { replyLength } from './raw-client.js';

/**
 * A beanstalkd client for bulk pipelining in load tests: write large batches of commands with
 * backpressure, and have each whole reply (line plus body) handed to `onReply` as it arrives,
 * without building one big buffer.
 */
export class PipelineClient {
  readonly socket: net.Socket;
  /** Whole replies received so far. */
  received = 0;
  /** Called for every whole reply, in order; the buffer is a view, copy it to keep it. */
  onReply: (reply: Buffer) => void = () => {};
  private rest: Buffer = Buffer.alloc(0);
  private closed = false;
  private error: Error | null = null;
  private waiters: (() => void)[] = [];

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', (err) => {
      this.error = err;
      this.wake();
    });
  }

  static connect(port: number, host = '127.0.0.1'): Promise<PipelineClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host });
      socket.setNoDelay(true);
      socket.once('connect', () => resolve(new PipelineClient(socket)));
      socket.once('error', reject);
    });
  }

  private onData(d: Buffer): void {
    let buf = this.rest.length === 0 ? d : Buffer.concat([this.rest, d]);
    let off = 0;
    for (;;) {
      const view = buf.subarray(off);
      const n = replyLength(view);
      if (n === 0) break;
      this.received++;
      try {
        this.onReply(view.subarray(0, n));
      } catch (err) {
        this.error ??= err instanceof Error ? err : new Error(String(err));
      }
      off += n;
    }
    this.rest = off === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(off));
    buf = this.rest;
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  /** Writes bytes, waiting for 'drain' when the socket buffer is full. */
  async write(data: Buffer | string): Promise<void> {
    if (this.error) throw this.error;
    const ok = this.socket.write(typeof data === 'string' ? Buffer.from(data, 'latin1') : data);
    if (!ok) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.once('drain', done);
        this.socket.once('close', done);
      });
    }
  }

  /** Waits until `total` replies have arrived in all (counting from the connection's start). */
  async waitReplies(total: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.received < total) {
      if (this.error) throw this.error;
      if (this.closed) throw new Error(`connection closed after ${this.received} of ${total} replies`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${this.received} of ${total} replies`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    if (this.error) throw this.error;
  }

  destroy(): void {
    this.socket.destroy();
  }
}
