import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ClusterUrlError, parseClusterUrl, searchOrder } from './cluster-url.js';

describe('parseClusterUrl', () => {
  it("takes libpq's list of hosts apart, each with its port or 5432, in the order written", () => {
    const url = parseClusterUrl('postgres://beanpole@db1.example:5433,db2.example,[fd00::7]:6000/jobs?target_session_attrs=read-write');
    expect(url.hosts).toStrictEqual([
      { host: 'db1.example', port: 5433 },
      { host: 'db2.example', port: 5432 },
      { host: 'fd00::7', port: 6000 },
    ]);
    expect(url.sessionAttrs).toBe('read-write');
    expect(url.database).toBe('jobs');
    expect(url.connectTimeoutMs).toBeNull();
  });

  it('gives pg one host at a time, with everything else as written and its own parameters taken out', () => {
    const url = parseClusterUrl(
      'postgresql://u:p%40ss@a:1,b:2/my%20db?sslmode=require&target_session_attrs=primary&connect_timeout=3&application_name=bp',
    );
    expect(url.sessionAttrs).toBe('primary');
    expect(url.connectTimeoutMs).toBe(3000);
    expect(url.hostUrl(url.hosts[1]!)).toBe('postgresql://u:p%40ss@b:2/my%20db?sslmode=require&application_name=bp');
    // pg's own parser reads the result as libpq would have read that host.
    expect(pg.defaults).toBeDefined();
    const config = new pg.Client({ connectionString: url.hostUrl(url.hosts[0]!) });
    expect({ host: config.host, port: config.port, user: config.user, password: config.password, database: config.database }).toStrictEqual({
      host: 'a',
      port: 1,
      user: 'u',
      password: 'p@ss',
      database: 'my db',
    });
    expect(url.display).toBe('postgresql://u:***@a:1,b:2/my%20db?sslmode=require&target_session_attrs=primary&connect_timeout=3&application_name=bp');
    expect(url.hasPassword).toBe(true);
  });

  it('keeps a one-host URL as it was, and one without a host (a Unix socket in ?host=) whole', () => {
    const one = parseClusterUrl('postgres://beanpole@127.0.0.1:5999/jobs');
    expect(one.hosts).toStrictEqual([{ host: '127.0.0.1', port: 5999 }]);
    expect(one.sessionAttrs).toBe('any');
    expect(one.hostUrl(one.hosts[0]!)).toBe('postgres://beanpole@127.0.0.1:5999/jobs');
    expect(one.hasPassword).toBe(false);
    const socket = parseClusterUrl('postgres:///jobs?host=/var/run/postgresql');
    expect(socket.hostUrl(socket.hosts[0]!)).toBe('postgres:///jobs?host=%2Fvar%2Frun%2Fpostgresql');
    expect(new pg.Client({ connectionString: socket.hostUrl(socket.hosts[0]!) }).host).toBe('/var/run/postgresql');
  });

  it("takes connect_timeout as libpq does: whole seconds, at least 2, 0 for none", () => {
    expect(parseClusterUrl('postgres://h/d?connect_timeout=1').connectTimeoutMs).toBe(2000);
    expect(parseClusterUrl('postgres://h/d?connect_timeout=0').connectTimeoutMs).toBeNull();
    expect(() => parseClusterUrl('postgres://h/d?connect_timeout=1.5')).toThrow(ClusterUrlError);
  });

  it('refuses what is not a postgres URL, a bad host or port, and session attributes a job server cannot write through', () => {
    for (const bad of [
      'mysql://h/d',
      'not a url',
      'postgres://a:1,:2/d',
      'postgres://a:99999/d',
      'postgres://a:x/d',
      'postgres://a,b/d?target_session_attrs=standby',
      'postgres://a,b/d?target_session_attrs=read-only',
      'postgres://a,b/d?target_session_attrs=whatever',
    ]) {
      expect(() => parseClusterUrl(bad), bad).toThrow(ClusterUrlError);
    }
  });
});

describe('searchOrder', () => {
  it('tries the host found last first, then the others as written', () => {
    expect(searchOrder(3, 0)).toStrictEqual([0, 1, 2]);
    expect(searchOrder(3, 1)).toStrictEqual([1, 0, 2]);
    expect(searchOrder(3, 2)).toStrictEqual([2, 0, 1]);
    expect(searchOrder(1, 0)).toStrictEqual([0]);
  });
});
