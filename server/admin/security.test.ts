import { describe, expect, it } from 'vitest';
import { EventBucket, SOCKET_EVENT_BURST, SOCKET_EVENT_CUTOFF, SOCKET_EVENTS_PER_SECOND, hostCheck } from './security.js';

describe('EventBucket', () => {
  /** Takes `n` tokens at time `at`; returns how many of each verdict came back. */
  function takeMany(bucket: EventBucket, n: number, at: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const v = bucket.take(at);
      out[v] = (out[v] ?? 0) + 1;
    }
    return out;
  }

  it('serves a burst at once, then refuses; refusals count, and past the cut-off it says so', () => {
    const b = new EventBucket(10, 5, 4, 0);
    expect(takeMany(b, 10, 0)).toEqual({ ok: 10 });
    expect(takeMany(b, 4, 0)).toEqual({ refused: 4 });
    expect(b.take(0)).toBe('cut-off');
  });

  it('refills at the rate, up to the burst; a refused client must slow down below the rate to be served again', () => {
    const b = new EventBucket(10, 5, 100, 0);
    expect(takeMany(b, 10, 0)).toEqual({ ok: 10 });
    // One second: five tokens back.
    expect(takeMany(b, 6, 1000)).toEqual({ ok: 5, refused: 1 });
    // Debt of one: the next token comes 400 ms later.
    expect(b.take(1200)).toBe('refused');
    expect(b.take(1800)).toBe('ok');
    // A long pause refills to the burst, no further.
    expect(takeMany(b, 11, 60_000)).toEqual({ ok: 10, refused: 1 });
  });

  it('a clock going backwards gives nothing back', () => {
    const b = new EventBucket(2, 1000, 10, 5000);
    expect(takeMany(b, 2, 5000)).toEqual({ ok: 2 });
    expect(b.take(0)).toBe('refused');
    expect(b.take(1000)).toBe('refused');
    expect(b.take(5004)).toBe('ok');
  });

  it('the socket limits: 200 at once, 100 a second, cut off 200 refusals later', () => {
    expect([SOCKET_EVENT_BURST, SOCKET_EVENTS_PER_SECOND, SOCKET_EVENT_CUTOFF]).toEqual([200, 100, 200]);
    const b = new EventBucket(SOCKET_EVENT_BURST, SOCKET_EVENTS_PER_SECOND, SOCKET_EVENT_CUTOFF, 0);
    expect(takeMany(b, 400, 0)).toEqual({ ok: 200, refused: 200 });
    expect(b.take(0)).toBe('cut-off');
  });
});

describe('hostCheck', () => {
  const base = { listen: '127.0.0.1', tokenRequired: false, allowedHosts: [] };

  it('without a token: the listen address, loopback names and the allowed names, any port, any case', () => {
    const ok = hostCheck({ ...base, listen: '127.0.0.5', allowedHosts: ['dash.example', '10.0.0.7'] });
    for (const h of ['127.0.0.5:1', 'localhost', 'LOCALHOST:80', '127.0.0.1:11380', '[::1]:11380', 'dash.example', 'Dash.Example:443', '10.0.0.7:9']) {
      expect(ok(h), h).toBe(true);
    }
    for (const h of ['127.0.0.2', 'rebind.attacker.example', 'dash.example.attacker.example', 'localhost.', '', '[::1', 'dash.example:99999']) {
      expect(ok(h), h).toBe(false);
    }
    // No Host at all is not a browser.
    expect(ok(undefined)).toBe(true);
  });

  it('an IPv6 listen address is matched in brackets', () => {
    const ok = hostCheck({ ...base, listen: '::1' });
    expect(ok('[::1]:8080')).toBe(true);
    expect(hostCheck({ ...base, listen: 'fd00::5' })('[FD00::5]:1')).toBe(true);
  });

  it('with a token, any name: the token is the defence', () => {
    const ok = hostCheck({ ...base, tokenRequired: true });
    expect(ok('rebind.attacker.example:1')).toBe(true);
    expect(ok('not a host')).toBe(true);
  });
});
