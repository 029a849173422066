import { describe, expect, it } from 'vitest';
import { PeerLogLimiter } from './peer-log-limiter.js';

describe('PeerLogLimiter', () => {
  it('lets each peer through once per interval, and others meanwhile', () => {
    let now = 1_000_000;
    const limiter = new PeerLogLimiter(() => now, 60_000);
    expect(limiter.shouldLog('10.0.0.1')).toBe(true);
    expect(limiter.shouldLog('10.0.0.1')).toBe(false);
    expect(limiter.shouldLog('10.0.0.2')).toBe(true);
    now += 59_999;
    expect(limiter.shouldLog('10.0.0.1')).toBe(false);
    now += 1;
    expect(limiter.shouldLog('10.0.0.1')).toBe(true);
    expect(limiter.shouldLog('10.0.0.1')).toBe(false);
  });

  it('forgets everyone rather than grow without bound under a flood of addresses', () => {
    const limiter = new PeerLogLimiter(() => 0, 60_000);
    for (let i = 0; i < 10_000; i++) expect(limiter.shouldLog(`peer ${i}`)).toBe(true);
    // The memory was cleared on the way: an early address is logged again, at most once.
    expect(limiter.shouldLog('peer 0')).toBe(true);
    expect(limiter.shouldLog('peer 0')).toBe(false);
  });
});
