import type { Logger } from 'pino';
import type { TlsOptions } from '../cli.js';
import { TlsCredentials, TlsLoadError } from './credentials.js';
import { TlsDoorway } from './tls-doorway.js';

/** A front door's listener that can serve TLS (DoorServer). */
export interface TlsDoor {
  useTls(doorway: TlsDoorway): void;
}

/** The process's status when the TLS files given cannot be used at start. */
export const TLS_EXIT_CODE = 1;

/**
 * --tls-*: reads the certificate, key and CA, and puts a doorway of its own (its own handshake
 * limit) on each door. Returns the credentials, which the dashboard serves HTTPS with and
 * SIGHUP reloads; null without TLS. Files that cannot be used stop the start here.
 */
export function secureDoors(options: TlsOptions | null, doors: readonly (TlsDoor | null)[], log: Logger): TlsCredentials | null {
  if (options === null) return null;
  let credentials: TlsCredentials;
  try {
    credentials = TlsCredentials.load(options);
  } catch (err) {
    if (!(err instanceof TlsLoadError)) throw err;
    log.fatal(err.message);
    process.exit(TLS_EXIT_CODE);
  }
  for (const door of doors) {
    door?.useTls(
      new TlsDoorway({
        credentials,
        allowPlain: options.allowPlain,
        handshakeTimeoutMs: options.handshakeTimeoutMs,
        maxHandshakes: options.maxHandshakes,
        log,
      }),
    );
  }
  const mode = options.caFile === null ? 'TLS' : 'mutual TLS';
  log.info({ cert: options.certFile, ca: options.caFile, allowPlain: options.allowPlain }, `${mode} on the job ports${options.allowPlain ? ' (plaintext clients served too)' : ''}`);
  return credentials;
}

/** SIGHUP: new handshakes get the files as they are now; a failure keeps the old ones and says why. */
export function reloadTls(credentials: TlsCredentials, log: Logger): void {
  const result = credentials.reload();
  if (result.ok) log.info('SIGHUP: TLS certificate, key and CA reloaded; new connections use them');
  else log.error({ err: result.reason }, `SIGHUP: TLS reload failed, still serving the previous certificate: ${result.reason}`);
}
