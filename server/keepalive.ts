import type { Socket } from 'node:net';
import type { KeepAliveOptions } from './cli.js';

/** Sets what --keepalive asks for on one accepted socket. */
export type SocketTuner = (socket: Socket) => void;

/**
 * The tuner for every door's accepted sockets (beanstalkd, Gearman, the dashboard). Node sets
 * SO_KEEPALIVE and TCP_KEEPIDLE itself (socket.setKeepAlive); it has no API for TCP_KEEPINTVL
 * and TCP_KEEPCNT, which net-keepalive sets with setsockopt on the socket's descriptor. That
 * library (and its native part) is loaded only when an interval or a count is asked for.
 */
export async function keepAliveTuner(options: KeepAliveOptions, warn: (err: unknown) => void): Promise<SocketTuner> {
  const idleMs = options.idleSec === null ? 0 : options.idleSec * 1000; // 0: the OS's idle time
  const { intervalSec, count } = options;
  const lib = intervalSec === null && count === null ? null : await import('net-keepalive');
  let warned = false;
  return (socket) => {
    socket.setKeepAlive(true, idleMs);
    // A UNIX socket (-l unix:PATH) has no TCP options.
    if (lib === null || socket.remoteAddress === undefined) return;
    try {
      if (intervalSec !== null) lib.setKeepAliveInterval(socket, intervalSec * 1000);
      if (count !== null) lib.setKeepAliveProbes(socket, count);
    } catch (err) {
      // A socket closed before it was tuned; said once, not per connection.
      if (!warned) warn(err);
      warned = true;
    }
  };
}
