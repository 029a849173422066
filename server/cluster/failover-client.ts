/**
 * A `pg` connection that goes to whichever host is the primary now, as libpq's multi-host
 * connect does: it asks the node's PrimaryFinder where to connect, checks on connecting that
 * the server takes writes (target_session_attrs), and tells the finder when a host failed it: a
 * connection refused, a server that turned out read-only, or a statement refused with SQLSTATE
 * 25006 (a primary demoted under a live connection). The pool, the heartbeat's connection and
 * the LISTEN connection are all of this kind, so all of them move together.
 */
import pg from 'pg';
import type { DatabaseHost, SessionAttrs } from '../common/cluster-url.js';
import { withArrayLiterals } from './array-literal.js';

/** What a connection asks of the node's search for the primary (primary-finder.ts). */
export interface HostChooser {
  readonly sessionAttrs: SessionAttrs;
  /** The host the last search found (no waiting): where a connection is built for. */
  known(): DatabaseHost;
  /** The host to connect to now: the primary, searched for first if it is not known. */
  target(): Promise<DatabaseHost>;
  /** A connection to `host` failed or found it unfit: search again before the next one. */
  lost(host: DatabaseHost, why: string): void;
  /** One host of the list as a URL `pg` parses (user, database, sslmode... as written). */
  hostUrl(host: DatabaseHost): string;
  /** Calls `listener` with the host left each time a search finds the primary elsewhere; returns the unsubscribe. */
  onMove(listener: (from: DatabaseHost) => void): () => void;
}

/** SQLSTATE read_only_sql_transaction: a write reached a server that takes none (a standby, a demoted primary). */
export const READ_ONLY_SQLSTATE = '25006';
/** SQLSTATE sqlclient_unable_to_establish_sqlconnection: no host of the list would do. */
export const NO_PRIMARY_SQLSTATE = '08001';

/** What libpq's check on connect asks the server. */
export const SESSION_CHECK = "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') = 'on' AS read_only";

export interface SessionState {
  recovery: boolean;
  read_only: boolean;
}

/** Whether a server in `state` is what target_session_attrs asks for (libpq's rules). */
export function sessionFits(attrs: SessionAttrs, state: SessionState): boolean {
  if (attrs === 'read-write') return !state.read_only;
  if (attrs === 'primary') return !state.recovery;
  return true;
}

/** An error with a SQLSTATE, as `pg` gives them, so that callers tell it apart the same way. */
export function sqlError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export function hostLabel(h: DatabaseHost): string {
  return h.host === '' ? 'the default host' : `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;
}

/**
 * `Client.query`'s arguments with the parameters' arrays as literals: a config object's
 * `values`, or the array after the text.
 */
function withLiteralParameters(args: unknown[]): unknown[] {
  const [first, second] = args;
  if (Array.isArray(second)) return [first, withArrayLiterals(second), ...args.slice(2)];
  // A Submittable (a Query, a cursor) is passed on as it is: it is not a plain config.
  if (typeof first === 'object' && first !== null && typeof (first as { submit?: unknown }).submit !== 'function' && Array.isArray((first as { values?: unknown }).values)) {
    const config = first as { values: unknown[] };
    return [{ ...config, values: withArrayLiterals(config.values) }, ...args.slice(1)];
  }
  return args;
}

/** A class `pg.Pool` builds its connections with (its `Client` option), bound to a node's chooser. */
export function failoverClientClass(chooser: HostChooser): new (config?: pg.ClientConfig) => pg.Client {
  return class FailoverClient extends pg.Client {
    private connectedTo: DatabaseHost | null = null;

    constructor(config: pg.ClientConfig = {}) {
      super({ ...config, connectionString: chooser.hostUrl(chooser.known()) });
      // Every statement's array parameters go as literals written by array-literal.ts, not by pg.
      const query = this.query.bind(this) as (...args: unknown[]) => unknown;
      (this as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => query(...withLiteralParameters(args));
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      const connected = this.connectToTarget();
      if (callback === undefined) return connected;
      // pg-pool calls connect(callback) and looks only at the error.
      const call = callback as (err: Error | null, c?: pg.Client) => void;
      connected.then(
        (c) => call(null, c),
        (err: Error) => call(err),
      );
    }

    private async connectToTarget(): Promise<pg.Client> {
      const host = await chooser.target();
      if (host.host !== '') {
        this.host = host.host;
        this.port = host.port;
      }
      // An error the server sends right behind an answer (a shutdown's FATAL in the same packet
      // as the ReadyForQuery that ends the connect, or the session check) is emitted as an
      // 'error' event before this method runs on. Nobody listens for it yet (the pool does once
      // the connect is over), and an 'error' event nobody listens for ends the process: it is
      // kept here, and the connect fails with it.
      let failed: Error | null = null;
      const onError = (err: Error): void => {
        failed ??= err;
      };
      this.on('error', onError);
      let connected = false;
      try {
        await super.connect();
        connected = true;
        await this.checkSession(host);
        if (failed !== null) throw failed;
      } catch (err) {
        // The pool drops a connection whose connect failed without closing it: close it here.
        if (connected) void this.end().catch(() => undefined);
        const readOnly = (err as { code?: unknown }).code === READ_ONLY_SQLSTATE;
        chooser.lost(host, readOnly ? 'the server is read-only' : (err as Error).message);
        throw err;
      } finally {
        this.off('error', onError);
      }
      this.connectedTo = host;
      this.connection.on('errorMessage', this.onServerError);
      // A connection left on a host that is no longer the primary closes: the LISTEN connection
      // would otherwise hear nothing from the other nodes, now on the new primary.
      const unsubscribe = chooser.onMove((from) => {
        if (from.host === host.host && from.port === host.port) void this.end().catch(() => undefined);
      });
      this.once('end', unsubscribe);
      return this;
    }

    /** Checks that the server this connection reached is what target_session_attrs asks for (libpq's check). */
    private async checkSession(host: DatabaseHost): Promise<void> {
      if (chooser.sessionAttrs === 'any') return;
      const { rows } = await super.query<SessionState>(SESSION_CHECK);
      if (!sessionFits(chooser.sessionAttrs, rows[0]!)) {
        throw sqlError(READ_ONLY_SQLSTATE, `${hostLabel(host)} is read-only (a standby, or a demoted primary)`);
      }
    }

    /**
     * A primary demoted while this connection lived answers every write with 25006: the
     * statement fails (its caller answers INTERNAL_ERROR), the finder searches again, and this
     * connection closes once the server is done with the statement, so that its pool opens a
     * new one on the new primary rather than hand this one out again.
     */
    private readonly onServerError = (msg: unknown): void => {
      if ((msg as { code?: unknown }).code !== READ_ONLY_SQLSTATE || this.connectedTo === null) return;
      chooser.lost(this.connectedTo, 'a write was refused as read-only (SQLSTATE 25006)');
      this.connection.once('readyForQuery', () => void this.end().catch(() => undefined));
    };
  };
}
