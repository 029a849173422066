import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';

/**
 * Who the peer says it is: the subject CN of the client certificate it presented in a verified
 * mutual-TLS handshake, or null (plaintext, TLS without a client certificate, or no CN). The
 * first CN when the subject holds several.
 */
export function peerIdentityOf(socket: Socket): string | null {
  if (!(socket instanceof TLSSocket) || !socket.authorized) return null;
  const cn: unknown = socket.getPeerCertificate().subject?.CN;
  if (typeof cn === 'string') return cn;
  if (Array.isArray(cn) && typeof cn[0] === 'string') return cn[0];
  return null;
}
