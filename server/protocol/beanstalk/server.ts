import { lstatSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { BeanstalkConnection, type ConnectionContext } from './connection.js';

/** The beanstalkd front door: a TCP (or UNIX socket) server whose clients drive the engine. */
export class BeanstalkServer {
  readonly server: net.Server;
  private readonly connections = new Set<BeanstalkConnection>();

  constructor(ctx: ConnectionContext) {
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true }, (socket) => {
      const conn = new BeanstalkConnection(socket, ctx);
      this.connections.add(conn);
      ctx.log.debug({ remote: `${socket.remoteAddress}:${socket.remotePort}` }, 'accept');
      socket.once('close', () => {
        this.connections.delete(conn);
        ctx.log.debug('close');
      });
    });
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

  /** Stops accepting and closes every client. */
  close(): Promise<void> {
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
