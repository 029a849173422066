import net from 'node:net';
import tls from 'node:tls';

/**
 * A byte-level beanstalkd client for tests: send any bytes, read whole replies
 * (a line, plus the body for RESERVED/FOUND/OK replies).
 */
export class RawClient {
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private ended = false;
  readonly socket: net.Socket;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('error', () => {
      this.ended = true;
      this.wake();
    });
  }

  static connect(port: number, host = '127.0.0.1'): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host, allowHalfOpen: true });
      socket.setNoDelay(true);
      socket.once('connect', () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  /**
   * A client over TLS (the options carry the CA, a client certificate ...): resolves once the
   * handshake is done as the client sees it, rejects when it fails.
   */
  static connectTls(port: number, options: tls.ConnectionOptions = {}): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ port, host: '127.0.0.1', ...options });
      socket.setNoDelay(true);
      socket.once('secureConnect', () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  /** True once the server closed its side. */
  get closed(): boolean {
    return this.ended;
  }

  /** Bytes received but not read yet. */
  get pending(): Buffer {
    return this.buf;
  }

  send(data: string | Buffer): void {
    this.socket.write(typeof data === 'string' ? Buffer.from(data, 'latin1') : data);
  }

  /** Half-closes: the server sees end of input. */
  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Waits until `pred(buffer)` returns a byte count to consume, or times out. */
  private async take(pred: (b: Buffer) => number, timeoutMs: number): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const n = pred(this.buf);
      if (n > 0) {
        const out = this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        return Buffer.from(out);
      }
      if (this.ended) throw new Error(`connection closed; unread: ${JSON.stringify(this.buf.toString('latin1'))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; unread: ${JSON.stringify(this.buf.toString('latin1'))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Reads one whole reply (with its body, if any) as a latin1 string. */
  async reply(timeoutMs = 5000): Promise<string> {
    const b = await this.take(replyLength, timeoutMs);
    return b.toString('latin1');
  }

  /** Reads exactly n bytes. */
  async bytes(n: number, timeoutMs = 5000): Promise<Buffer> {
    return this.take((b) => (b.length >= n ? n : 0), timeoutMs);
  }

  /** Sends a command and reads one reply. */
  async call(data: string | Buffer, timeoutMs = 5000): Promise<string> {
    this.send(data);
    return this.reply(timeoutMs);
  }

  /** Waits until the server closes the connection; returns whatever arrived before that. */
  async waitClosed(timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error('connection still open');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    const rest = this.buf.toString('latin1');
    this.buf = Buffer.alloc(0);
    return rest;
  }
}

/** Length of the first complete reply in `b`, or 0 if it is not all there yet. */
export function replyLength(b: Buffer): number {
  const eol = b.indexOf('\r\n');
  if (eol < 0) return 0;
  const line = b.toString('latin1', 0, eol);
  const m = /^(?:RESERVED \d+ (\d+)|FOUND \d+ (\d+)|OK (\d+))$/.exec(line);
  if (m === null) return eol + 2;
  const bodyLen = Number(m[1] ?? m[2] ?? m[3]);
  const total = eol + 2 + bodyLen + 2;
  return b.length >= total ? total : 0;
}

/** `put` over the protocol; returns the new id. */
export async function tcpPut(c: RawClient, body: string | Buffer, pri = 0, delay = 0, ttr = 60): Promise<number> {
  const b = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const reply = await c.call(Buffer.concat([Buffer.from(`put ${pri} ${delay} ${ttr} ${b.length}\r\n`, 'latin1'), b, Buffer.from('\r\n')]));
  const m = /^INSERTED (\d+)\r\n$/.exec(reply);
  if (m === null) throw new Error(`put: ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

/** reserve-with-timeout 0; returns the id and body bytes. */
export async function tcpReserve(c: RawClient): Promise<{ id: number; body: Buffer }> {
  const reply = Buffer.from(await c.call('reserve-with-timeout 0\r\n'), 'latin1');
  const eol = reply.indexOf('\r\n');
  const m = /^RESERVED (\d+) (\d+)$/.exec(reply.toString('latin1', 0, eol));
  if (m === null) throw new Error(`reserve: ${JSON.stringify(reply.toString('latin1'))}`);
  return { id: Number(m[1]), body: reply.subarray(eol + 2, eol + 2 + Number(m[2])) };
}
