import { describe, expect, it } from 'vitest';
import { hostCheck } from './security.js';

describe('hostCheck', () => {
  const base = { listen: '127.0.0.1', token: null, allowedHosts: [] };

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
    const ok = hostCheck({ ...base, token: 't' });
    expect(ok('rebind.attacker.example:1')).toBe(true);
    expect(ok('not a host')).toBe(true);
  });
});
