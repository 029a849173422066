import { describe, expect, it } from 'vitest';
import { startupFailure } from './startup-errors.js';
import { NO_PRIMARY_SQLSTATE, READ_ONLY_SQLSTATE, sessionFits, sqlError } from './failover-client.js';

describe('sessionFits: what target_session_attrs accepts (libpq)', () => {
  const primary = { recovery: false, read_only: false };
  const standby = { recovery: true, read_only: true };
  // A primary fenced with default_transaction_read_only: not in recovery, yet it takes no writes.
  const fenced = { recovery: false, read_only: true };
  it.each([
    ['any', primary, true],
    ['any', standby, true],
    ['read-write', primary, true],
    ['read-write', standby, false],
    ['read-write', fenced, false],
    ['primary', primary, true],
    ['primary', standby, false],
    ['primary', fenced, true],
  ] as const)('%s on %o: %s', (attrs, state, fits) => {
    expect(sessionFits(attrs, state)).toBe(fits);
  });
});

describe('the SQLSTATEs of a failover, as a starting node reads them', () => {
  it('a read-only server and no primary among the hosts are worth trying again', () => {
    expect(startupFailure(sqlError(READ_ONLY_SQLSTATE, 'read-only')).transient).toBe(true);
    expect(startupFailure(sqlError(NO_PRIMARY_SQLSTATE, 'no host would do')).transient).toBe(true);
    expect(startupFailure(sqlError('28P01', 'password authentication failed')).transient).toBe(false);
  });
});
