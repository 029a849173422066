/**
 * Why a node could not start on its database, told apart: a database it cannot reach yet (it is
 * starting, restarting, failing over, or the network is down) is worth trying again; one that
 * answered no (a wrong password, an unknown database or role, a role without rights) is not, and
 * the operator gets one line that says what to fix.
 */

/** Network failures and a server that is not ready: the node tries again. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  // SQLSTATE: the database system is starting up, shutting down, or in recovery.
  '57P01',
  '57P02',
  '57P03',
  // The connection was lost, no host of a multi-host URL is the primary yet (08001, during a
  // failover), or a standby cannot take writes yet.
  '08000',
  '08001',
  '08003',
  '08006',
  '25006',
]);

/** Answers that will not change by trying again, with what to say about each. */
const REFUSALS: Readonly<Record<string, string>> = {
  '28P01': 'the database refused the password (set PGPASSWORD or ~/.pgpass for this user)',
  '28000': 'the database refused the login (no such role, or pg_hba.conf does not let it in)',
  '3D000': 'the database does not exist (create it, or fix the --cluster URL)',
  '42501': 'the role lacks a right it needs (it must be able to create tables in the database, or own them)',
};

export interface StartupFailure {
  /** True when trying again may help. */
  transient: boolean;
  /** What to tell the operator. */
  reason: string;
}

export function startupFailure(err: unknown): StartupFailure {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : String(err);
  const refusal = REFUSALS[code];
  if (refusal !== undefined) return { transient: false, reason: `${refusal}: ${message}` };
  // node-postgres's own words for a lost or slow connection carry no code.
  const transient = TRANSIENT_CODES.has(code) || /timeout|terminated|ECONNREFUSED|Connection terminated/i.test(message);
  return { transient, reason: message };
}
