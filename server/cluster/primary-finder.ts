/**
 * Where this node's connections go: the host of the --cluster URL's list that is the primary
 * now. libpq tries the hosts in order and keeps the first that passes target_session_attrs;
 * this does the same, once for every connection of the node (a search is shared by the
 * connections that wait for it), starting with the host found last time. A connection that
 * finds its host gone or read-only (failover-client.ts) says so, and the next connection
 * searches again: so after a failover the pool, the heartbeat and the LISTEN connection all
 * reconnect to the new primary without a restart.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { searchOrder, type ClusterUrl, type DatabaseHost, type SessionAttrs } from '../common/cluster-url.js';
import { failoverClientClass, hostLabel, NO_PRIMARY_SQLSTATE, SESSION_CHECK, sessionFits, sqlError, type HostChooser, type SessionState } from './failover-client.js';

/** How long a search gives each host when the URL sets no connect_timeout. */
const DEFAULT_PROBE_MS = 5_000;
/** After a search found no primary, connections fail at once for this long rather than search again (a failover takes seconds). */
const SEARCH_PAUSE_MS = 250;

export class PrimaryFinder implements HostChooser {
  /** Index in the URL's hosts of the host found last. */
  private found = 0;
  /** Whether that host is believed to be the primary still (no connection to it has failed since). */
  private trusted: boolean;
  private search: Promise<DatabaseHost> | null = null;
  private lastFailure: { at: number; error: Error } | null = null;
  /** The connections of this node: `new database.Client(config)`, or a pool's `Client`. */
  readonly Client = failoverClientClass(this);
  private readonly moveListeners = new Set<(from: DatabaseHost) => void>();

  constructor(
    readonly url: ClusterUrl,
    private readonly log: Logger,
    private readonly probeConfig: pg.ClientConfig = {},
  ) {
    // One host that any server will do for: nothing to search, as before multi-host URLs.
    this.trusted = !this.searches;
  }

  get sessionAttrs(): SessionAttrs {
    return this.url.sessionAttrs;
  }

  private get searches(): boolean {
    return this.url.hosts.length > 1 || this.url.sessionAttrs !== 'any';
  }

  known(): DatabaseHost {
    return this.url.hosts[this.found]!;
  }

  hostUrl(host: DatabaseHost): string {
    return this.url.hostUrl(host);
  }

  target(): Promise<DatabaseHost> {
    if (this.trusted) return Promise.resolve(this.known());
    if (this.search !== null) return this.search;
    const failure = this.lastFailure;
    if (failure !== null && Date.now() - failure.at < SEARCH_PAUSE_MS) return Promise.reject(failure.error);
    this.search = this.searchHosts().finally(() => (this.search = null));
    return this.search;
  }

  onMove(listener: (from: DatabaseHost) => void): () => void {
    this.moveListeners.add(listener);
    return () => this.moveListeners.delete(listener);
  }

  lost(host: DatabaseHost, why: string): void {
    if (!this.searches || !this.trusted || !sameHost(host, this.known())) return;
    this.trusted = false;
    this.log.warn({ host: hostLabel(host), err: why }, 'cluster: lost the primary; looking for it among the hosts');
  }

  /** Tries the hosts in order (the last found first) until one passes the check; throws 08001 if none does. */
  private async searchHosts(): Promise<DatabaseHost> {
    const hosts = this.url.hosts;
    const refusals: string[] = [];
    for (const i of searchOrder(hosts.length, this.found)) {
      const host = hosts[i]!;
      const why = await this.probe(host);
      if (why === null) {
        const from = this.known();
        if (i !== this.found || this.lastFailure !== null) this.log.warn({ host: hostLabel(host) }, 'cluster: found the primary');
        this.found = i;
        this.trusted = true;
        this.lastFailure = null;
        if (!sameHost(from, host)) for (const listener of [...this.moveListeners]) listener(from);
        return host;
      }
      refusals.push(`${hostLabel(host)}: ${why}`);
    }
    const error = sqlError(NO_PRIMARY_SQLSTATE, `no host would do for target_session_attrs=${this.url.sessionAttrs} (${refusals.join('; ')})`);
    if (this.lastFailure === null) this.log.warn({ err: error.message }, 'cluster: no primary among the hosts yet');
    this.lastFailure = { at: Date.now(), error };
    throw error;
  }

  /** null when `host` is what the URL asks for, else why not. */
  private async probe(host: DatabaseHost): Promise<string | null> {
    const timeout = this.url.connectTimeoutMs ?? DEFAULT_PROBE_MS;
    const client = new pg.Client({
      ...this.probeConfig,
      connectionString: this.url.hostUrl(host),
      connectionTimeoutMillis: timeout,
      query_timeout: timeout,
    });
    // A probe that fails later (the server goes away as it is closed) must not throw at the process.
    client.on('error', () => undefined);
    try {
      await client.connect();
      if (this.url.sessionAttrs === 'any') return null;
      const { rows } = await client.query<SessionState>(SESSION_CHECK);
      return sessionFits(this.url.sessionAttrs, rows[0]!) ? null : 'read-only';
    } catch (err) {
      return (err as Error).message;
    } finally {
      void client.end().catch(() => undefined);
    }
  }
}

function sameHost(a: DatabaseHost, b: DatabaseHost): boolean {
  return a.host === b.host && a.port === b.port;
}
