import { lstatSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import type { Logger } from 'pino';
import type { TlsDoorway } from '../tls/tls-doorway.js';

/** What a door's server needs of a connection. */
export interface DoorConnection {
  /** Server shutdown: close without waiting for the client. */
  destroy(): void;
}

/**
 * A front door's listener: a TCP (or UNIX socket) server that makes one connection object per
 * client and closes them all on shutdown. The protocol lives in the connection.
 */
export class DoorServer<C extends DoorConnection> {
  readonly server: net.Server;
  private readonly connections = new Set<C>();
  /** With TLS on (useTls), every accepted socket passes through it before the door sees it. */
  private tls: TlsDoorway | null = null;

  constructor(log: Logger, accept: (socket: net.Socket) => C) {
    const serve = (socket: net.Socket): void => {
      const conn = accept(socket);
      this.connections.add(conn);
      log.debug({ remote: `${socket.remoteAddress}:${socket.remotePort}` }, 'accept');
      socket.once('close', () => {
        this.connections.delete(conn);
        log.debug('close');
      });
    };
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true }, (socket) => {
      if (this.tls === null) serve(socket);
      else this.tls.admit(socket, serve);
    });
  }

  /** Serves TLS (and plaintext, if the doorway allows it) from now on; call before listen. */
  useTls(doorway: TlsDoorway): void {
    this.tls = doorway;
  }

  /** Listens on `host:port`, or on a UNIX socket when `host` is `unix:/path`. */
  listen(host: string, port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      const done = (): void => {
        this.server.off('error', onError);
        const addr = this.server.address();
        resolve(typeof addr === 'string' ? `unix:${addr}` : `${addr!.address}:${addr!.port}`);
      };
      if (host.startsWith('unix:')) {
        const path = host.slice(5);
        try {
          removeStaleSocket(path);
        } catch (err) {
          reject(err as Error);
          return;
        }
        this.server.listen({ path, backlog: 1024 }, done);
      } else {
        this.server.listen({ host, port, backlog: 1024 }, done);
      }
    });
  }

  /** Open connections (for `workers` and the like). */
  get size(): number {
    return this.connections.size;
  }

  /** Stops accepting and closes every client. */
  close(): Promise<void> {
    this.tls?.close();
    for (const conn of this.connections) conn.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Like beanstalkd: an old socket file at the path is removed; any other kind of file is an error. */
function removeStaleSocket(path: string): void {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch {
    return; // nothing there
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket`);
  unlinkSync(path);
}
