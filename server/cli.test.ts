import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BINLOG_SIZE, DEFAULT_GEARMAN_MAX_SIZE, DEFAULT_MAX_JOB_SIZE, MAX_JOB_SIZE_LIMIT } from '../shared/limits.js';
import { USAGE, USAGE_EXIT_CODE, parseCommandLine, type CliResult, type ServerOptions } from './cli.js';

const DEFAULTS: ServerOptions = {
  listen: '0.0.0.0',
  port: 11300,
  maxJobSize: DEFAULT_MAX_JOB_SIZE,
  binlogDir: null,
  fsyncMs: 50,
  binlogSize: DEFAULT_BINLOG_SIZE,
  user: null,
  verbosity: 0,
  maxJobBytes: null,
  deadLetterAfter: 0,
  historyEvents: 100_000,
  admin: { listen: '127.0.0.1', port: 11380, token: null, readOnly: false, usersFile: null, users: [], allowedHosts: [], attach: [], basePath: '' },
  gearman: { listen: '0.0.0.0', port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 },
  cluster: null,
  keepAlive: null,
  automationTickMs: null,
  tls: null,
  policies: null,
  acl: null,
};

function run(changes: Partial<ServerOptions>, warnings: string[] = []): CliResult {
  // Gearman listens where -l does (unless a UNIX socket), when not told otherwise.
  const listen = changes.listen ?? DEFAULTS.listen;
  const gearman = { listen: listen.startsWith('unix:') ? '0.0.0.0' : listen, port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 };
  return { kind: 'run', options: { ...DEFAULTS, gearman, ...changes }, warnings };
}

const CLAMP_WARNING = `maximum job size was set to ${MAX_JOB_SIZE_LIMIT}`;

describe('parseCommandLine: the Gearman flags', () => {
  it('serves Gearman on 4730 at the -l address by default, or 0.0.0.0 when -l is a UNIX socket', () => {
    expect(parseCommandLine(['-l', '127.0.0.1'])).toStrictEqual(run({ listen: '127.0.0.1', gearman: { listen: '127.0.0.1', port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 } }));
    expect(parseCommandLine(['-l', 'unix:/tmp/s'])).toStrictEqual(run({ listen: 'unix:/tmp/s', gearman: { listen: '0.0.0.0', port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 } }));
  });

  it('takes --gearman-port, --gearman-listen and --no-gearman', () => {
    expect(parseCommandLine(['--gearman-port', '0'])).toStrictEqual(run({ gearman: { listen: '0.0.0.0', port: 0, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 } }));
    expect(parseCommandLine(['--gearman-listen', '::1', '--gearman-port=4731'])).toStrictEqual(run({ gearman: { listen: '::1', port: 4731, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 0 } }));
    expect(parseCommandLine(['--no-gearman'])).toStrictEqual(run({ gearman: null }));
    // --gearman-max-size is Gearman's packet limit; -z stays beanstalkd's.
    expect(parseCommandLine(['-z', '100', '--gearman-max-size', '2000'])).toStrictEqual(
      run({ maxJobSize: 100, gearman: { listen: '0.0.0.0', port: 4730, maxSize: 2000, roundRobin: false, jobRetries: 0 } }),
    );
    expect(parseCommandLine(['--gearman-max-size', '5000000000'])).toStrictEqual(
      run({ gearman: { listen: '0.0.0.0', port: 4730, maxSize: MAX_JOB_SIZE_LIMIT, roundRobin: false, jobRetries: 0 } }, [`maximum Gearman packet size was set to ${MAX_JOB_SIZE_LIMIT}`]),
    );
    expect(parseCommandLine(['--gearman-max-size', 'x'])).toStrictEqual({ kind: 'usage-error', message: 'invalid size: x' });
    expect(parseCommandLine(['--gearman-port', '70000'])).toStrictEqual({ kind: 'usage-error', message: 'invalid Gearman port: 70000' });
    expect(USAGE).toContain('--gearman-port PORT');
  });

  it('takes --gearman-round-robin', () => {
    expect(parseCommandLine(['--gearman-round-robin'])).toStrictEqual(
      run({ gearman: { listen: '0.0.0.0', port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: true, jobRetries: 0 } }),
    );
    expect(USAGE).toContain('--gearman-round-robin');
  });

  it('takes --gearman-job-retries N', () => {
    expect(parseCommandLine(['--gearman-job-retries', '3'])).toStrictEqual(
      run({ gearman: { listen: '0.0.0.0', port: 4730, maxSize: DEFAULT_GEARMAN_MAX_SIZE, roundRobin: false, jobRetries: 3 } }),
    );
    expect(parseCommandLine(['--gearman-job-retries', '-1'])).toStrictEqual({ kind: 'usage-error', message: 'invalid Gearman job retries: -1' });
    expect(USAGE).toContain('--gearman-job-retries N');

  });
});

describe('parseCommandLine: TCP keepalive', () => {
  it('takes --keepalive alone (the OS timings) and its three timings, each implying it', () => {
    expect(parseCommandLine(['--keepalive'])).toStrictEqual(run({ keepAlive: { idleSec: null, intervalSec: null, count: null } }));
    expect(parseCommandLine(['--keepalive-idle', '60', '--keepalive-interval=10', '--keepalive-count', '5'])).toStrictEqual(
      run({ keepAlive: { idleSec: 60, intervalSec: 10, count: 5 } }),
    );
    expect(parseCommandLine(['--keepalive-count', '3'])).toStrictEqual(run({ keepAlive: { idleSec: null, intervalSec: null, count: 3 } }));
  });

  it('refuses timings out of the kernel’s bounds', () => {
    expect(parseCommandLine(['--keepalive-idle', '0'])).toStrictEqual({ kind: 'usage-error', message: 'invalid keepalive idle time: 0' });
    expect(parseCommandLine(['--keepalive-interval', '32768'])).toStrictEqual({ kind: 'usage-error', message: 'invalid keepalive interval: 32768' });
    expect(parseCommandLine(['--keepalive-count', '128'])).toStrictEqual({ kind: 'usage-error', message: 'invalid keepalive probe count: 128' });
    expect(parseCommandLine(['--keepalive', 'x'])).toStrictEqual({ kind: 'usage-error', message: 'unknown argument: x' });
    expect(USAGE).toContain('--keepalive-interval S');
  });
});

describe('parseCommandLine: TLS', () => {
  // Any readable files do for the command line: the server reads them as PEM when it starts.
  const cert = fileURLToPath(import.meta.url);
  const key = fileURLToPath(new URL('./cli.ts', import.meta.url));

  it('takes a certificate and its key, with the defaults for the rest', () => {
    expect(parseCommandLine(['--tls-cert', cert, '--tls-key', key])).toStrictEqual(
      run({ tls: { certFile: cert, keyFile: key, caFile: null, allowPlain: false, handshakeTimeoutMs: 10_000, maxHandshakes: 512 } }),
    );
    expect(
      parseCommandLine(['--tls-cert', cert, '--tls-key', key, '--tls-ca', cert, '--tls-allow-plain', '--tls-handshake-timeout-ms', '500', '--tls-max-handshakes', '3']),
    ).toStrictEqual(run({ tls: { certFile: cert, keyFile: key, caFile: cert, allowPlain: true, handshakeTimeoutMs: 500, maxHandshakes: 3 } }));
  });

  it('wants the certificate and the key together, and the other TLS flags only with them', () => {
    expect(parseCommandLine(['--tls-cert', cert])).toStrictEqual({ kind: 'usage-error', message: '--tls-cert needs --tls-key' });
    expect(parseCommandLine(['--tls-key', key])).toStrictEqual({ kind: 'usage-error', message: '--tls-key needs --tls-cert' });
    expect(parseCommandLine(['--tls-ca', cert])).toStrictEqual({ kind: 'usage-error', message: '--tls-ca needs --tls-cert and --tls-key' });
    expect(parseCommandLine(['--tls-allow-plain'])).toStrictEqual({ kind: 'usage-error', message: '--tls-allow-plain needs --tls-cert and --tls-key' });
  });

  it('refuses files it cannot read, and bounds out of range', () => {
    expect(parseCommandLine(['--tls-cert', '/nonexistent/cert.pem', '--tls-key', key])).toStrictEqual({
      kind: 'usage-error',
      message: '--tls-cert /nonexistent/cert.pem: cannot read it (ENOENT)',
    });
    expect(parseCommandLine(['--tls-cert', cert, '--tls-key', key, '--tls-max-handshakes', '0'])).toStrictEqual({ kind: 'usage-error', message: 'invalid TLS handshake limit: 0' });
    expect(parseCommandLine(['--tls-cert', cert, '--tls-key', key, '--tls-handshake-timeout-ms', 'x'])).toStrictEqual({ kind: 'usage-error', message: 'invalid TLS handshake timeout: x' });
    expect(USAGE).toContain('--tls-allow-plain');
  });
});

describe('parseCommandLine: --acl', () => {
  it('reads the rule file at start, and a file it cannot use is a usage error naming it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-cli-acl-'));
    try {
      const file = path.join(dir, 'acl.json');
      writeFileSync(file, '{"identities": {"*": {"tubes": ["public"]}}}');
      const r = parseCommandLine(['--acl', file]);
      expect(r.kind === 'run' && r.options.acl?.file).toBe(file);
      expect(r.kind === 'run' && r.options.acl?.rules.others?.tubes?.('public')).toBe(true);
      writeFileSync(file, '{"identities": {"*": {"tubes": "public"}}}');
      expect(parseCommandLine(['--acl', file])).toStrictEqual({ kind: 'usage-error', message: `--acl ${file}: identities["*"].tubes: want a list of strings` });
      expect(parseCommandLine(['--acl'])).toStrictEqual({ kind: 'usage-error', message: 'flag requires an argument: --acl' });
      expect(USAGE).toContain('--acl FILE');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('parseCommandLine: cluster mode', () => {
  const url = 'postgres://beanpole@db.internal:5432/jobs';

  it('takes --cluster URL or BEANPOLE_CLUSTER_URL (the flag wins), and --cluster-lease-ms', () => {
    expect(parseCommandLine(['--cluster', url])).toStrictEqual(run({ cluster: { url, leaseMs: 5000, connectTimeoutMs: null } }));
    expect(parseCommandLine([], { BEANPOLE_CLUSTER_URL: url })).toStrictEqual(run({ cluster: { url, leaseMs: 5000, connectTimeoutMs: null } }));
    expect(parseCommandLine(['--cluster', url, '--cluster-connect-timeout', '30'])).toMatchObject({ options: { cluster: { connectTimeoutMs: 30_000 } } });
    expect(parseCommandLine(['--cluster', url, '--cluster-connect-timeout', '-1'])).toMatchObject({ kind: 'usage-error' });
    expect(parseCommandLine(['--cluster', 'postgresql://x@h/d'], { BEANPOLE_CLUSTER_URL: url })).toMatchObject({
      options: { cluster: { url: 'postgresql://x@h/d' } },
    });
    expect(parseCommandLine(['--cluster', url, '--cluster-lease-ms', '1500'])).toMatchObject({ options: { cluster: { leaseMs: 1500 } } });
  });

  it("takes libpq's multi-host URL, and refuses session attributes a job server cannot write through", () => {
    const hosts = 'postgres://beanpole@db1.example:5432,db2.example:5432/jobs?target_session_attrs=read-write&connect_timeout=5';
    expect(parseCommandLine(['--cluster', hosts])).toMatchObject({ options: { cluster: { url: hosts } } });
    expect(parseCommandLine([], { BEANPOLE_CLUSTER_URL: hosts })).toMatchObject({ options: { cluster: { url: hosts } } });
    expect(parseCommandLine(['--cluster', 'postgres://a,b/jobs?target_session_attrs=standby'])).toMatchObject({
      kind: 'usage-error',
      message: /target_session_attrs=standby/,
    });
  });

  it('refuses the binlog flags with --cluster, a URL that is not postgres://, and a lease out of range', () => {
    for (const flag of [['-b', '/tmp/x'], ['-f', '10'], ['-F']]) {
      expect(parseCommandLine(['--cluster', url, ...flag]), flag[0]).toMatchObject({ kind: 'usage-error', message: new RegExp(`^${flag[0]} `) });
      expect(parseCommandLine([...flag], { BEANPOLE_CLUSTER_URL: url }), flag[0]).toMatchObject({ kind: 'usage-error' });
    }
    expect(parseCommandLine(['--cluster', 'mysql://h/d'])).toMatchObject({ kind: 'usage-error', message: /postgres:\/\// });
    expect(parseCommandLine(['--cluster', 'not a url'])).toMatchObject({ kind: 'usage-error', message: /--cluster/ });
    expect(parseCommandLine(['--cluster', url, '--cluster-lease-ms', '50'])).toMatchObject({ kind: 'usage-error' });
  });

  it('warns about a password in the URL, and caps -z below what one bytea value holds', () => {
    const result = parseCommandLine(['--cluster', 'postgres://u:secret@h/d', '-z', '1073741824']);
    expect(result).toMatchObject({ kind: 'run', options: { maxJobSize: 64 * 1024 * 1024 } });
    const warnings = result.kind === 'run' ? result.warnings : [];
    expect(warnings.some((w) => w.includes('PGPASSWORD'))).toBe(true);
    expect(warnings.some((w) => w.includes('cluster mode'))).toBe(true);
  });
});

describe('parseCommandLine: the admin flags', () => {
  const admin = DEFAULTS.admin!;
  it('takes --admin-listen, --admin-port, --admin-token, --admin-read-only and --no-admin', () => {
    expect(parseCommandLine(['--admin-port', '0'])).toStrictEqual(run({ admin: { ...admin, port: 0 } }));
    expect(parseCommandLine(['--admin-token', 's3cret', '--admin-read-only'])).toStrictEqual(
      run({ admin: { ...admin, token: 's3cret', readOnly: true } }),
    );
    expect(parseCommandLine(['--no-admin'])).toStrictEqual(run({ admin: null }));
    expect(parseCommandLine(['--admin-listen', '::1'])).toStrictEqual(run({ admin: { ...admin, listen: '::1' } }));
  });

  it('takes --admin-base-path as a path without its trailing slash, and refuses what would need escaping', () => {
    expect(parseCommandLine(['--admin-base-path', '/ops/beanpole/'])).toStrictEqual(run({ admin: { ...admin, basePath: '/ops/beanpole' } }));
    expect(parseCommandLine(['--admin-base-path', '/'])).toStrictEqual(run({ admin: { ...admin, basePath: '' } }));
    for (const value of ['beanpole', '/a b', '/a/../b', '/"x', '/a//b', '/x?y']) {
      expect(parseCommandLine(['--admin-base-path', value]), value).toMatchObject({ kind: 'usage-error', message: /--admin-base-path/ });
    }
  });

  it('reads the token from BEANPOLE_ADMIN_TOKEN; the flag wins', () => {
    const env = { BEANPOLE_ADMIN_TOKEN: 'from-env' };
    expect(parseCommandLine([], env)).toStrictEqual(run({ admin: { ...admin, token: 'from-env' } }));
    expect(parseCommandLine(['--admin-token', 'flag'], env)).toStrictEqual(run({ admin: { ...admin, token: 'flag' } }));
  });

  it('refuses a non-loopback admin address without a token, and a bad admin port', () => {
    expect(parseCommandLine(['--admin-listen', '0.0.0.0'])).toMatchObject({ kind: 'usage-error', message: /admin-token/ });
    expect(parseCommandLine(['--admin-listen', '0.0.0.0', '--admin-token', 't'])).toStrictEqual(
      run({ admin: { ...admin, listen: '0.0.0.0', token: 't' } }),
    );
    expect(parseCommandLine(['--admin-listen', '0.0.0.0', '--no-admin'])).toStrictEqual(run({ admin: null }));
    expect(parseCommandLine(['--admin-port', '70000'])).toMatchObject({ kind: 'usage-error' });
    expect(parseCommandLine(['--admin-token', ''])).toMatchObject({ kind: 'usage-error' });
  });

  it('refuses a blank token, or one with whitespace at an end, from the flag or the variable (the bearer is trimmed)', () => {
    for (const token of [' ', '   ', '\t', '\n', ' tok', 'tok ', 'tok\n']) {
      expect(parseCommandLine(['--admin-token', token]), JSON.stringify(token)).toMatchObject({ kind: 'usage-error', message: /admin token/ });
      expect(parseCommandLine([], { BEANPOLE_ADMIN_TOKEN: token }), JSON.stringify(token)).toMatchObject({
        kind: 'usage-error',
        message: /BEANPOLE_ADMIN_TOKEN/,
      });
    }
    // An empty variable still means no token; the flag still wins over the variable.
    expect(parseCommandLine([], { BEANPOLE_ADMIN_TOKEN: '' })).toStrictEqual(run({}));
    expect(parseCommandLine(['--admin-token', 't'], { BEANPOLE_ADMIN_TOKEN: '  ' })).toStrictEqual(run({ admin: { ...admin, token: 't' } }));
    expect(parseCommandLine(['--admin-token', 'a b'])).toStrictEqual(run({ admin: { ...admin, token: 'a b' } }));
  });

  it('takes --admin-allowed-hosts as comma-separated names: lower case, ports and brackets dropped', () => {
    expect(parseCommandLine(['--admin-allowed-hosts', 'dash.example'])).toStrictEqual(run({ admin: { ...admin, allowedHosts: ['dash.example'] } }));
    expect(parseCommandLine(['--admin-allowed-hosts', 'A.Example:8080, b-2.example ,[::1],[FE80::1]:80,10.0.0.7'])).toStrictEqual(
      run({ admin: { ...admin, allowedHosts: ['a.example', 'b-2.example', '::1', 'fe80::1', '10.0.0.7'] } }),
    );
    expect(parseCommandLine(['--admin-allowed-hosts=x', '--admin-allowed-hosts', 'y'])).toStrictEqual(run({ admin: { ...admin, allowedHosts: ['y'] } }));
  });

  it.each([[''], [','], ['a,'], [',a'], ['a,,b'], [' '], ['a, ,b'], ['a b'], ['a/b'], ['[::1'], ['::1'], ['[nope]'], ['a:99999'], ['a:']])(
    '--admin-allowed-hosts %j is a usage error',
    (value) => {
      expect(parseCommandLine(['--admin-allowed-hosts', value])).toMatchObject({ kind: 'usage-error', message: /--admin-allowed-hosts/ });
    },
  );
});

describe('parseCommandLine', () => {
  it('uses beanstalkd defaults with no arguments', () => {
    expect(parseCommandLine([])).toStrictEqual(run({}));
  });

  const rows: Array<[string[], Partial<ServerOptions>]> = [
    [['-b', '/var/lib/bp'], { binlogDir: '/var/lib/bp' }],
    [['-b/var/lib/bp'], { binlogDir: '/var/lib/bp' }],
    [['--binlog-dir', '/var/lib/bp'], { binlogDir: '/var/lib/bp' }],
    [['--binlog-dir=/var/lib/bp'], { binlogDir: '/var/lib/bp' }],
    [['-f', '20'], { fsyncMs: 20 }],
    [['-f0'], { fsyncMs: 0 }],
    [['--fsync-ms', '20'], { fsyncMs: 20 }],
    [['-F'], { fsyncMs: null }],
    [['--no-fsync'], { fsyncMs: null }],
    [['-l', '127.0.0.1'], { listen: '127.0.0.1' }],
    [['-l', 'localhost'], { listen: 'localhost' }],
    [['-llocalhost'], { listen: 'localhost' }],
    [['-l', 'unix:/tmp/bp.sock'], { listen: 'unix:/tmp/bp.sock' }],
    [['--listen', '::1'], { listen: '::1' }],
    [['-p', '1234'], { port: 1234 }],
    [['-p1234'], { port: 1234 }],
    [['--port', '1234'], { port: 1234 }],
    [['--port=1234'], { port: 1234 }],
    [['-p', '0'], { port: 0 }],
    [['-p', '65535'], { port: 65535 }],
    [['-u', 'kr'], { user: 'kr' }],
    [['-ukr'], { user: 'kr' }],
    [['--user', 'kr'], { user: 'kr' }],
    [['-z', '1234'], { maxJobSize: 1234 }],
    [['-z1234'], { maxJobSize: 1234 }],
    [['--max-job-size', '1234'], { maxJobSize: 1234 }],
    [['-z', '0'], { maxJobSize: 0 }],
    [['-z', '+7'], { maxJobSize: 7 }],
    [['-z', '1073741824'], { maxJobSize: 1073741824 }],
    [['-s', '8000'], { binlogSize: 8000 }],
    [['-s8000'], { binlogSize: 8000 }],
    [['--binlog-size', '8000'], { binlogSize: 8000 }],
    [['-V'], { verbosity: 1 }],
    [['--verbose'], { verbosity: 1 }],
    [['-V', '-V'], { verbosity: 2 }],
    [['-VVV'], { verbosity: 3 }],
    [['--verbose', '-V', '--verbose'], { verbosity: 3 }],
    [['--max-job-bytes', '1000000'], { maxJobBytes: 1000000 }],
    [['--max-job-bytes=0'], { maxJobBytes: 0 }],
    [['--dead-letter-after', '3'], { deadLetterAfter: 3 }],
    [['--dead-letter-after=0'], { deadLetterAfter: 0 }],
    [['--history-events', '0'], { historyEvents: 0 }],
    [['--history-events=5000000'], { historyEvents: 5_000_000 }],
    // beanstalkd test optVFVu: combined flags, the last one taking the rest of the word.
    [['-VFVukr'], { verbosity: 2, fsyncMs: null, user: 'kr' }],
    // The last of -f / -F wins.
    [['-f1234', '-F'], { fsyncMs: null }],
    [['-F', '-f5'], { fsyncMs: 5 }],
    [['-f', '5', '-F', '-f', '7'], { fsyncMs: 7 }],
    [['-p', '1', '-p', '2'], { port: 2 }],
    // A flag's argument is the next word even when it starts with '-' (EARGF).
    [['-l', '-V'], { listen: '-V' }],
    [['-u', '-x'], { user: '-x' }],
    [['-b', '-'], { binlogDir: '-' }],
    [['-Vp', '1234', '-lunix:/s'], { verbosity: 1, port: 1234, listen: 'unix:/s' }],
    [['-p', '1234', '-l', '127.0.0.1', '-z', '100', '-b', '/tmp', '-f', '10', '-s', '4096', '-u', 'nobody', '-V'],
      { port: 1234, listen: '127.0.0.1', maxJobSize: 100, binlogDir: '/tmp', fsyncMs: 10, binlogSize: 4096, user: 'nobody', verbosity: 1 }],
  ];
  it.each(rows)('%j', (argv, changes) => {
    expect(parseCommandLine(argv)).toStrictEqual(run(changes));
  });

  describe('-z above the maximum', () => {
    it.each([
      [['-z1073741825']],
      [['-z', '1073741825']],
      [['--max-job-size', '99999999999']],
      // sscanf("%zu") wraps -1 around, and the result is then clamped.
      [['-z', '-1']],
      [['-z-1']],
      [['--max-job-size=-1']],
    ])('%j is clamped with a warning', (argv) => {
      expect(parseCommandLine(argv)).toStrictEqual(run({ maxJobSize: MAX_JOB_SIZE_LIMIT }, [CLAMP_WARNING]));
    });
  });

  it('warns about the removed -c and -n flags and carries on', () => {
    expect(parseCommandLine(['-c', '-n', '-p1'])).toStrictEqual(
      run({ port: 1 }, ['-c flag was removed. binlog is always compacted.', '-n flag was removed. binlog is always compacted.']),
    );
  });

  it.each([[['-h']], [['--help']], [['-Vh']], [['-p', '1', '-h']], [['-h', '-x']], [['-h', '-p']]])('%j asks for help', (argv) => {
    expect(parseCommandLine(argv)).toStrictEqual({ kind: 'help' });
  });

  it.each([[['-v']], [['--version']], [['-Vv']], [['-v', '-x']], [['-v', '-h']]])('%j asks for the version', (argv) => {
    expect(parseCommandLine(argv)).toStrictEqual({ kind: 'version' });
  });

  it.each([
    // unknown flags and arguments
    [['-x']],
    [['-Vx']],
    [['-x', '-h']],
    [['--bogus']],
    [['--bogus=1']],
    [['-']],
    [['--']],
    [['foo']],
    [['-p', '1', 'foo']],
    [['-p', '1', '1']],
    // a flag missing its argument
    [['-p']],
    [['-l']],
    [['-z']],
    [['-b']],
    [['-u']],
    [['-s']],
    [['-f']],
    [['-V', '-f']],
    [['--port']],
    [['--max-job-bytes']],
    [['--dead-letter-after']],
    [['--dead-letter-after', '-1']],
    [['--dead-letter-after', 'x']],
    [['--dead-letter-after', '4294967296']],
    [['--history-events', '10000001']],
    [['--history-events', '-5']],
    [['--admin-allowed-hosts']],
    // a switch given a value
    [['--help=yes']],
    [['--no-fsync=1']],
    // invalid numbers
    [['-p', 'abc']],
    [['-p', '-1']],
    [['-p', '65536']],
    [['-p', '1.5']],
    [['-p', '']],
    [['-f', 'abc']],
    [['-z', 'abc']],
    [['-z', '12x']],
    [['-z', '12 ']],
    [['-z', '']],
    [['-z', '1e3']],
    [['-s', 'abc']],
    [['-s', '-']],
    [['--max-job-bytes', 'abc']],
    [['--max-job-bytes', '-5']],
    // flags act in order: an error before -h or -v wins
    [['-z', 'abc', '-h']],
  ])('%j is a usage error', (argv) => {
    const result = parseCommandLine(argv);
    expect(result.kind).toBe('usage-error');
    if (result.kind === 'usage-error') expect(result.message).not.toBe('');
  });

  it('names what was wrong', () => {
    expect(parseCommandLine(['-x'])).toStrictEqual({ kind: 'usage-error', message: 'unknown flag: -x' });
    expect(parseCommandLine(['-p'])).toStrictEqual({ kind: 'usage-error', message: 'flag requires an argument: -p' });
    expect(parseCommandLine(['foo'])).toStrictEqual({ kind: 'usage-error', message: 'unknown argument: foo' });
    expect(parseCommandLine(['-z', 'abc'])).toStrictEqual({ kind: 'usage-error', message: 'invalid size: abc' });
  });
});

describe('bin/beanpole', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

  function beanpole(...args: string[]): { status: number | null; stdout: string; stderr: string } {
    return beanpoleWithEnv({}, ...args);
  }

  function beanpoleWithEnv(env: NodeJS.ProcessEnv, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
    // The test command builds first; starting the binary without dist/ would build the UI too.
    expect(existsSync(new URL('../dist/server/main.js', import.meta.url)), 'dist/server/main.js (run npm run build:server)').toBe(true);
    const r = spawnSync(process.execPath, ['bin/beanpole', ...args], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...env } });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  it('-h prints the usage on stderr and exits 0', () => {
    const r = beanpole('-h');
    expect(r.status).toBe(0);
    expect(r.stderr).toBe(USAGE);
    expect(r.stderr).toContain(' -b DIR   write-ahead log directory\n');
    expect(r.stdout).toBe('');
  });

  it('-x prints the usage and exits 5', () => {
    const r = beanpole('-x');
    expect(r.status).toBe(USAGE_EXIT_CODE);
    expect(r.status).toBe(5);
    expect(r.stderr).toContain(USAGE);
    expect(r.stdout).toBe('');
  });

  it('-v prints the version and exits 0', () => {
    const r = beanpole('-v');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`beanpole ${version}\n`);
  });

  it('a blank --admin-token or BEANPOLE_ADMIN_TOKEN, and an empty --admin-allowed-hosts name, exit 5 before listening', () => {
    // Were the command line accepted, the missing binlog folder would stop the server (exit 10)
    // before it listens on anything.
    const noDir = ['-b', '/nonexistent/beanpole-cli-test'];
    for (const r of [
      beanpoleWithEnv({}, ...noDir, '--admin-token', '   '),
      beanpoleWithEnv({ BEANPOLE_ADMIN_TOKEN: '   ' }, ...noDir),
      beanpoleWithEnv({}, ...noDir, '--admin-allowed-hosts', 'a,,b'),
    ]) {
      expect(r.status, r.stderr).toBe(USAGE_EXIT_CODE);
      expect(r.stderr).toContain(USAGE);
      expect(r.stdout).toBe('');
    }
  });

  it('--help lists --admin-allowed-hosts', () => {
    expect(USAGE).toContain('--admin-allowed-hosts a,b');
  });
});
