/**
 * A small beanstalkd client for the cluster benchmark: one command in flight, answered by a
 * promise. The cluster runs at thousands of jobs per second, not hundreds of thousands, so the
 * generator's cost per command does not matter here as it does in bench/load/.
 */
import net from 'node:net';
import { ReplyReader } from '../load/wire.js';

export interface Reply {
  line: string;
  /** The body of a RESERVED reply, else null. */
  body: Buffer | null;
}

export class BeanstalkClient {
  private readonly waiting: ((reply: Reply) => void)[] = [];
  private readonly reader = new ReplyReader((buf, ls, le, bs, be) => {
    const next = this.waiting.shift();
    next?.({ line: buf.toString('latin1', ls, le), body: bs < 0 ? null : Buffer.from(buf.subarray(bs, be)) });
  }, 1024 * 1024);
  private failure: Error | null = null;

  private constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.reader.push(chunk));
    socket.on('error', (err) => (this.failure = err));
    socket.on('close', () => {
      this.failure ??= new Error('connection closed');
      for (const w of this.waiting.splice(0)) w({ line: 'CLOSED', body: null });
    });
  }

  static connect(port: number): Promise<BeanstalkClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(new BeanstalkClient(socket)));
      socket.once('error', reject);
    });
  }

  call(command: string | Buffer): Promise<Reply> {
    if (this.failure !== null) return Promise.reject(this.failure);
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.socket.write(command);
    });
  }

  /** Sends `commands` in one write (pipelined) and resolves with their replies, in order. */
  pipeline(commands: string[]): Promise<Reply[]> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const replies = commands.map(() => new Promise<Reply>((resolve) => this.waiting.push(resolve)));
    this.socket.write(commands.join(''));
    return Promise.all(replies);
  }

  put(body: string, priority = 0): Promise<Reply> {
    return this.call(`put ${priority} 0 60 ${Buffer.byteLength(body)}\r\n${body}\r\n`);
  }

  close(): void {
    this.socket.destroy();
  }
}
