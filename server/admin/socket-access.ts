/**
 * The same rules on socket.io as on the REST routes: a socket signs in with its token at the
 * handshake (a user's token, the admin token, or none when none is needed), and each event it
 * sends needs the role SOCKET_EVENT_ROLES gives it. Every event the dashboard sends today only
 * chooses what it is shown (views of tubes, jobs and connections), so each is a viewer's; a
 * change sent over the socket would name a higher role here, and the compiler asks for an entry
 * for every event in ClientToServerEvents. An event not in the table is refused.
 */
import type { ClientToServerEvents } from '../../shared/events.js';
import type { Ack } from '../../shared/events.js';
import { roleAllows, type Role } from '../../shared/roles.js';
import type { Access } from './access.js';
import type { AdminIo } from './live.js';
import { bearer } from './security.js';
import type { Principal } from './users.js';

export const SOCKET_EVENT_ROLES: { readonly [E in keyof ClientToServerEvents]: Role } = {
  'tube:view': 'viewer',
  'tube:leave': 'viewer',
  'job:view': 'viewer',
  'job:leave': 'viewer',
  'connections:view': 'viewer',
  'connections:leave': 'viewer',
};

function roleOfEvent(event: unknown): Role | undefined {
  return typeof event === 'string' && Object.hasOwn(SOCKET_EVENT_ROLES, event) ? SOCKET_EVENT_ROLES[event as keyof ClientToServerEvents] : undefined;
}

export function guardSocket(io: AdminIo, access: Access): void {
  /** Each socket's token, to check it again when the users file is reloaded. */
  const tokens = new WeakMap<object, string | undefined>();
  const principals = new WeakMap<object, Principal>();
  io.use((socket, next) => {
    const auth: unknown = socket.handshake.auth;
    const given = typeof auth === 'object' && auth !== null && typeof (auth as { token?: unknown }).token === 'string'
      ? (auth as { token: string }).token
      : bearer(socket.handshake.headers.authorization);
    const principal = access.users.identify(given);
    if (principal === null) return next(new Error('unauthorized'));
    tokens.set(socket, given);
    principals.set(socket, principal);
    next();
  });
  io.on('connection', (socket) => {
    socket.use((packet, next) => {
      const needed = roleOfEvent(packet[0]);
      const principal = principals.get(socket);
      if (needed !== undefined && principal !== undefined && roleAllows(access.effectiveRole(principal), needed)) return next();
      const ack: unknown = packet[packet.length - 1];
      const error = needed === undefined ? `unknown event ${String(packet[0])}` : `this needs the ${needed} role`;
      if (typeof ack === 'function') (ack as Ack)({ ok: false, error });
    });
  });
  // A user removed from the file (or given a new token) is signed out of open dashboards too.
  access.users.onReload = () => {
    for (const socket of io.of('/').sockets.values()) {
      const principal = access.users.identify(tokens.get(socket));
      if (principal === null) socket.disconnect(true);
      else principals.set(socket, principal);
    }
  };
}
