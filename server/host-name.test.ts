import { describe, expect, it } from 'vitest';
import { hostName } from './host-name.js';

describe('hostName (the name in a Host header)', () => {
  it.each([
    ['localhost', 'localhost'],
    ['LocalHost:11380', 'localhost'],
    ['127.0.0.1', '127.0.0.1'],
    ['127.0.0.1:0', '127.0.0.1'],
    ['[::1]', '::1'],
    ['[::1]:65535', '::1'],
    ['[FE80::A]:80', 'fe80::a'],
    ['[::ffff:127.0.0.1]:1', '::ffff:127.0.0.1'],
    ['Rebind.Attacker.Example:8080', 'rebind.attacker.example'],
    ['under_score.example', 'under_score.example'],
  ])('%j -> %j', (host, name) => {
    expect(hostName(host)).toBe(name);
  });

  it.each([
    [''],
    [' '],
    [' localhost'],
    ['localhost '],
    [':80'],
    ['localhost:'],
    ['localhost:65536'],
    ['localhost:123456'],
    ['localhost:-1'],
    ['localhost:80:80'],
    ['::1'],
    ['[::1'],
    ['::1]'],
    ['[::1]x'],
    ['[]'],
    ['[127.0.0.1]'],
    ['[::g]'],
    ['[fe80::1%25eth0]'],
    ['user@localhost'],
    ['localhost/x'],
    ['a b'],
    ['localhost\u0000'],
    ['éxample'],
  ])('%j is not a host', (host) => {
    expect(hostName(host)).toBeNull();
  });
});
