import type { Socket } from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { TlsCredentials } from './credentials.js';
import { PeerLogLimiter } from './peer-log-limiter.js';

/**
 * The first byte of every TLS record that opens a connection (a handshake record holding the
 * ClientHello). No beanstalkd command starts with it, and a Gearman packet starts with "\0REQ"
 * and a text admin line with a letter, so one byte tells a TLS client from a plaintext one.
 */
export const TLS_HANDSHAKE_RECORD = 0x16;

export interface TlsDoorwayOptions {
  credentials: TlsCredentials;
  /** Plaintext clients are served too, on the same port (--tls-allow-plain). */
  allowPlain: boolean;
  /** A handshake not done this long after it started is closed (ms). */
  handshakeTimeoutMs: number;
  /** Handshakes under way at once; at the cap, the oldest is closed to make room. */
  maxHandshakes: number;
  log: Logger;
  /** Epoch ms, for the rate limit of refusal logs. */
  now?: () => number;
}

/** A connection between accept and the door: its timer, and how to close both of its sockets. */
interface Handshake {
  raw: Socket;
  timer: NodeJS.Timeout;
}

/**
 * What stands between a door's listener and its connections when TLS is on: it tells a TLS
 * client from a plaintext one by the first byte, runs the handshake (mutual when a CA is set)
 * and hands the door a socket that speaks plaintext to it, either the TLS socket or the raw one.
 *
 * Handshakes are bounded in time and in number: a client that opens connections and sends a
 * slow or no ClientHello holds a slot for at most `handshakeTimeoutMs`, and past
 * `maxHandshakes` the oldest slot is taken back, so such a flood costs a bounded amount of memory
 * and never delays clients that finish their handshake (or speak plaintext) at once. With
 * plaintext allowed, a connection that has sent nothing yet is no handshake: it may be a
 * plaintext client that speaks later, as beanstalkd lets it.
 */
export class TlsDoorway {
  /** In the order they began: the first is the oldest. */
  private readonly handshakes = new Set<Handshake>();
  private readonly logLimit: PeerLogLimiter;
  /**
   * Node's TLS server, never listening: it runs the handshake of each socket handed to it
   * (verifying client certificates, reloading its context with setSecureContext) and emits it
   * once secure.
   */
  private readonly tls: tls.Server;
  /** Sockets in the TLS server's hands, by their raw socket (weak: a socket that closes is forgotten). */
  private readonly deliverers = new WeakMap<Socket, { handshake: Handshake; deliver: (socket: Socket) => void }>();

  constructor(private readonly options: TlsDoorwayOptions) {
    this.logLimit = new PeerLogLimiter(options.now ?? Date.now);
    const { credentials } = options;
    const mutual = credentials.requiresClientCertificate;
    this.tls = tls.createServer({
      ...credentials.material,
      requestCert: mutual,
      rejectUnauthorized: mutual,
      // Ours (begin) is the limit; this one only backs it up.
      handshakeTimeout: options.handshakeTimeoutMs + 1000,
    });
    this.tls.on('secureConnection', this.secured);
    this.tls.on('tlsClientError', this.failed);
    credentials.onReload((material) => this.tls.setSecureContext(material));
  }

  /** Takes a socket the listener accepted; `deliver` gets the socket to serve, if any. */
  admit(raw: Socket, deliver: (socket: Socket) => void): void {
    // A client may reset the connection at any step: it is closed, and nothing else happens.
    raw.on('error', () => raw.destroy());
    const handshake = this.options.allowPlain ? null : this.begin(raw);
    let spoke = false;
    raw.once('data', (chunk: Buffer) => {
      spoke = true;
      // The bytes go back into the socket: the TLS layer (or the door) reads them first.
      raw.pause();
      raw.unshift(chunk);
      if (chunk[0] === TLS_HANDSHAKE_RECORD) return this.handshake(handshake ?? this.begin(raw), deliver);
      if (this.options.allowPlain) return deliver(raw);
      this.refuse(raw, handshake, 'plaintext client refused: this port speaks TLS only (--tls-allow-plain serves both)');
    });
    // Gone before saying anything: nothing to serve (the doors allow half-open connections).
    raw.once('end', () => {
      if (!spoke) raw.destroy();
    });
  }

  /** Closes every handshake under way (server shutdown). */
  close(): void {
    for (const h of this.handshakes) this.abandon(h);
  }

  private begin(raw: Socket): Handshake {
    if (this.handshakes.size >= this.options.maxHandshakes) {
      const oldest = this.handshakes.values().next().value!;
      this.logOnce('*limit*', { max: this.options.maxHandshakes }, 'TLS: too many handshakes under way; closing the oldest');
      this.abandon(oldest);
    }
    const handshake: Handshake = {
      raw,
      timer: setTimeout(() => {
        this.logOnce(`timeout ${peerOf(raw)}`, { peer: peerOf(raw), ms: this.options.handshakeTimeoutMs }, 'TLS: handshake not done in time; closed');
        this.abandon(handshake);
      }, this.options.handshakeTimeoutMs),
    };
    this.handshakes.add(handshake);
    raw.once('close', () => this.settle(handshake));
    return handshake;
  }

  /** Hands the socket, its first bytes put back, to the TLS server; `secureConnection` delivers it. */
  private handshake(handshake: Handshake, deliver: (socket: Socket) => void): void {
    this.deliverers.set(handshake.raw, { handshake, deliver });
    this.tls.emit('connection', handshake.raw);
  }

  private readonly secured = (secure: tls.TLSSocket): void => {
    const raw = parentOf(secure);
    const waiting = raw === null ? undefined : this.deliverers.get(raw);
    if (waiting === undefined) return void secure.destroy();
    this.settle(waiting.handshake);
    // Node has checked the chain against the CA (requestCert and rejectUnauthorized) already.
    waiting.deliver(secure);
  };

  private readonly failed = (err: Error, secure: tls.TLSSocket): void => {
    const raw = parentOf(secure);
    this.logOnce(`failed ${raw === null ? 'unix' : peerOf(raw)}`, { peer: raw === null ? undefined : peerOf(raw), err: err.message }, 'TLS: handshake failed');
    secure.destroy();
    raw?.destroy();
  };

  private refuse(raw: Socket, handshake: Handshake | null, why: string): void {
    this.logOnce(`plaintext ${peerOf(raw)}`, { peer: peerOf(raw) }, why);
    if (handshake !== null) this.settle(handshake);
    raw.destroy();
  }

  /** The handshake is over (done, or its socket closed): its slot and timer go. */
  private settle(handshake: Handshake): void {
    if (!this.handshakes.delete(handshake)) return;
    clearTimeout(handshake.timer);
  }

  private abandon(handshake: Handshake): void {
    this.settle(handshake);
    // The TLS socket closes with the raw one under it.
    handshake.raw.destroy();
  }

  /** Logs at most once a minute per kind of refusal and peer address (`key`), so a client in a loop cannot flood the log. */
  private logOnce(key: string, facts: Record<string, unknown>, message: string): void {
    if (this.logLimit.shouldLog(key)) this.options.log.warn(facts, message);
  }
}

/** The peer's address without its port: the rate limit is per host, however many ports it uses. */
function peerOf(socket: Socket): string {
  return socket.remoteAddress ?? 'unix';
}

/**
 * The raw socket under a TLS socket the TLS server made. Node keeps it as `_parent` (not in its
 * documented API, there since TLS sockets wrap net sockets); null if a Node ever drops it, and
 * then connections are closed rather than served unchecked.
 */
function parentOf(secure: tls.TLSSocket): Socket | null {
  const parent: unknown = (secure as unknown as { _parent?: unknown })._parent;
  return parent instanceof Object && 'remoteAddress' in parent ? (parent as Socket) : null;
}
