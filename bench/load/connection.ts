import net from 'node:net';
import tls from 'node:tls';
import { InvalidReplyError, ReplyReader, lineEquals, showReply, type ReplyHandler } from './wire.js';

/** Commands a connection sends before the load starts, and the exact reply line each must get. */
export interface SetupStep {
  commands: Buffer[];
  replies: Buffer[];
}

/** What a role does with its connection once set up. */
export interface RoleHandler {
  onReply: ReplyHandler;
  /** After each received chunk's replies: send what they made room for, publish counters. */
  afterChunk(): void;
}

/** Setup commands in flight at once: enough to hide the round trip, bounded for 10,000 watches. */
const SETUP_WINDOW = 512;
/** Each connection reads into its own reused buffer (no allocation per read). */
const READ_BUFFER_BYTES = 64 * 1024;

/**
 * One TCP connection of the load generator. Replies are read into a fixed buffer (`onread`) and
 * cut by a ReplyReader; the first ones answer the setup commands, the rest go to the role. Any
 * invalid reply, error or unexpected close is reported once through `onFailure`.
 */
export class LoadConnection {
  private readonly socket: net.Socket;
  private readonly reader: ReplyReader;
  private handler: RoleHandler | null = null;
  private setupSent = 0;
  private setupDone = 0;
  private closing = false;
  private failed = false;
  private readyResolve: (() => void) | null = null;
  private readyReject: ((err: Error) => void) | null = null;
  /** Resolves once connected and every setup reply was checked; rejects on failure. */
  readonly ready: Promise<void>;

  constructor(
    host: string,
    port: number,
    private readonly setup: SetupStep,
    maxBody: number,
    private readonly onFailure: (message: string) => void,
    /** Over TLS, trusting this CA (PEM); null: plaintext. */
    tlsCa: string | null = null,
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    // Failures are reported through onFailure; this only keeps an unawaited rejection quiet.
    this.ready.catch(() => undefined);
    this.reader = new ReplyReader((buf, ls, le, bs, be) => this.dispatch(buf, ls, le, bs, be), maxBody);
    const readBuf = Buffer.allocUnsafe(READ_BUFFER_BYTES);
    const onConnected = (): void => {
      if (this.setup.commands.length === 0) this.finishSetup();
      else this.sendSetup();
    };
    if (tlsCa === null) {
      this.socket = net.connect({
        host,
        port,
        noDelay: true,
        onread: {
          buffer: readBuf,
          callback: (n: number) => {
            this.received(readBuf.subarray(0, n));
            return true;
          },
        },
      });
      this.socket.once('connect', onConnected);
    } else {
      // A TLS socket hands out decrypted bytes as 'data' events (no onread buffer there).
      const secure = tls.connect({ host, port, ca: tlsCa });
      secure.setNoDelay(true);
      secure.on('data', (chunk: Buffer) => this.received(chunk));
      secure.once('secureConnect', onConnected);
      this.socket = secure;
    }
    this.socket.on('error', (err) => this.fail(`connection error: ${err.message}`));
    this.socket.on('close', () => {
      if (!this.closing) this.fail('the server closed the connection');
    });
  }

  /** Hands the connection to its role; replies after setup go there. */
  attach(handler: RoleHandler): void {
    this.handler = handler;
  }

  /** One write per batch: callers build the whole batch first. */
  write(bytes: Buffer): void {
    if (!this.closing) this.socket.write(bytes);
  }

  /** Closes without reporting a failure; replies still in flight are dropped. */
  close(): void {
    this.closing = true;
    this.socket.destroy();
  }

  private received(chunk: Buffer): void {
    if (this.closing || this.failed) return;
    try {
      this.reader.push(chunk);
      if (this.handler !== null && this.setupDone === this.setup.replies.length) this.handler.afterChunk();
    } catch (err) {
      this.fail(err instanceof InvalidReplyError ? err.message : `generator bug: ${(err as Error).stack ?? String(err)}`);
    }
  }

  private dispatch(buf: Buffer, lineStart: number, lineEnd: number, bodyStart: number, bodyEnd: number): void {
    if (this.setupDone < this.setup.replies.length) {
      const want = this.setup.replies[this.setupDone]!;
      if (!lineEquals(buf, lineStart, lineEnd, want)) {
        throw new InvalidReplyError(`setup reply ${showReply(buf, lineStart, lineEnd)}, expected ${JSON.stringify(want.toString('latin1'))}`);
      }
      this.setupDone++;
      if (this.setupDone === this.setup.replies.length) this.finishSetup();
      else if (this.setupDone === this.setupSent) this.sendSetup();
      return;
    }
    if (this.handler === null) throw new InvalidReplyError(`unexpected reply before the load started: ${showReply(buf, lineStart, lineEnd)}`);
    this.handler.onReply(buf, lineStart, lineEnd, bodyStart, bodyEnd);
  }

  private sendSetup(): void {
    const end = Math.min(this.setup.commands.length, this.setupSent + SETUP_WINDOW);
    this.socket.write(Buffer.concat(this.setup.commands.slice(this.setupSent, end)));
    this.setupSent = end;
  }

  private finishSetup(): void {
    this.readyResolve?.();
    this.readyResolve = null;
    this.readyReject = null;
  }

  private fail(message: string): void {
    if (this.failed || this.closing) return;
    this.failed = true;
    this.closing = true;
    this.socket.destroy();
    this.readyReject?.(new Error(message));
    this.readyReject = null;
    this.onFailure(message);
  }
}
