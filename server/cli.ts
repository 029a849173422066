import { accessSync, constants as fsConstants } from 'node:fs';
import { loadPolicyFile, PolicyFileError, type PolicyFile } from './policies/policy-file.js';
import { parseArgs } from 'node:util';
import { DEFAULT_BINLOG_SIZE, DEFAULT_GEARMAN_MAX_SIZE, DEFAULT_MAX_JOB_SIZE, MAX_JOB_SIZE_LIMIT } from '../shared/limits.js';
import { DEFAULT_HISTORY_EVENTS } from './engine/history.js';
import { ClusterUrlError, parseClusterUrl } from './common/cluster-url.js';
import { parseHostPort } from './host-port.js';
import { hostName, isLoopback } from './host-name.js';
import { UsersFileError, loadUsersFile, type AdminUser } from './admin-users.js';
import { AclFileError, loadAclFile, type AclRules } from './acl/acl-file.js';

/** Everything the command line sets. */
export interface ServerOptions {
  listen: string;
  port: number;
  maxJobSize: number;
  binlogDir: string | null;
  /** fsync at most every this many ms; 0 = before every acknowledgement; null = never (-F). */
  fsyncMs: number | null;
  binlogSize: number;
  user: string | null;
  verbosity: number;
  /** Budget for all job bodies together (bytes); null: derived from the machine's memory. */
  maxJobBytes: number | null;
  /** Releases plus timeouts after which a job is buried instead (0: off, beanstalkd's behaviour). */
  deadLetterAfter: number;
  /** Events in the job history ring shown on job pages (0: no history). */
  historyEvents: number;
  /** The dashboard and admin API; null with --no-admin. */
  admin: AdminOptions | null;
  /** The Gearman port; null with --no-gearman. */
  gearman: GearmanOptions | null;
  /** Cluster mode: jobs in this PostgreSQL database, shared with other nodes; null: in memory. */
  cluster: ClusterOptions | null;
  /** TCP keepalive timings for every door's accepted sockets (--keepalive ...); null: the OS's. */
  keepAlive: KeepAliveOptions | null;
  /**
   * How often schedules and alert rules are evaluated (ms; --automation-tick); null: schedules
   * every second and alert rules every five seconds. Tests set it low to run fast.
   */
  automationTickMs: number | null;
  /** TLS on the beanstalkd and Gearman ports and HTTPS on the dashboard (--tls-cert ...); null: plaintext. */
  tls: TlsOptions | null;
  /** The --policies file and the policies it set at start (SIGHUP reads it again); null: none. */
  policies: { file: string; doc: PolicyFile } | null;
  /** Who may do what on the job ports (--acl FILE), as read at start; SIGHUP reads the file again. null: everyone everything. */
  acl: { file: string; rules: AclRules } | null;
}

/** TLS on every port, from PEM files read at start and again on SIGHUP. */
export interface TlsOptions {
  /** The server's certificate, a chain allowed (--tls-cert). */
  certFile: string;
  /** Its private key (--tls-key). */
  keyFile: string;
  /** Clients of the job ports must present a certificate signed by this CA (--tls-ca); null: none asked for. */
  caFile: string | null;
  /** Plaintext clients are served too on the job ports, told apart by their first byte (--tls-allow-plain). */
  allowPlain: boolean;
  /** A TLS handshake not done this long after the connection opened (ms) is closed. */
  handshakeTimeoutMs: number;
  /** Handshakes under way at once per port; past it the oldest is closed. */
  maxHandshakes: number;
}

export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
export const DEFAULT_TLS_MAX_HANDSHAKES = 512;

/**
 * TCP keepalive on accepted sockets: a peer silent this long is probed, and given up (its
 * connection closed, its jobs released) when that many probes go unanswered. Null fields keep
 * the OS's setting (Linux: net.ipv4.tcp_keepalive_time, _intvl, _probes).
 */
export interface KeepAliveOptions {
  /** Seconds of silence before the first probe (TCP_KEEPIDLE). */
  idleSec: number | null;
  /** Seconds between probes (TCP_KEEPINTVL). */
  intervalSec: number | null;
  /** Unanswered probes before the connection is dropped (TCP_KEEPCNT). */
  count: number | null;
}

/** Linux's bounds: TCP_KEEPIDLE and TCP_KEEPINTVL at most 32767 s, TCP_KEEPCNT at most 127. */
const MAX_KEEPALIVE_SEC = 32767;
const MAX_KEEPALIVE_COUNT = 127;

export interface ClusterOptions {
  /** postgres://USER@HOST:PORT/DB (--cluster or BEANPOLE_CLUSTER_URL). */
  url: string;
  /** How long a node's reservations outlive its last heartbeat (--cluster-lease-ms). */
  leaseMs: number;
  /** How long a starting node keeps trying to reach the database (--cluster-connect-timeout, ms); null: for ever. */
  connectTimeoutMs: number | null;
}

export const DEFAULT_CLUSTER_LEASE_MS = 5000;
/**
 * Largest job body in cluster mode: a body is one bytea value, which PostgreSQL caps at 1 GB,
 * and the driver holds a whole row in memory while it reads it.
 */
export const MAX_CLUSTER_JOB_SIZE = 64 * 1024 * 1024;

export interface GearmanOptions {
  listen: string;
  /** 0 picks a free port (the log line says which). */
  port: number;
  /** Largest job data accepted (bytes); a packet may be 1 KiB larger for its other arguments. */
  maxSize: number;
  /** A worker that can do several functions gets them in turn (gearmand's --round-robin). */
  roundRobin: boolean;
  /** A job whose workers fail it this many times is dropped (gearmand's --job-retries); 0: never. */
  jobRetries: number;
}

export const DEFAULT_GEARMAN_PORT = 4730;
/** Bounds --history-events: 10 million events are about 400 MB. */
const MAX_HISTORY_EVENTS = 10_000_000;

export interface AdminOptions {
  listen: string;
  /** 0 picks a free port (the log line says which). */
  port: number;
  /** Required by the API and socket.io when set (--admin-token or BEANPOLE_ADMIN_TOKEN). */
  token: string | null;
  readOnly: boolean;
  /**
   * --admin-users FILE: dashboard users with roles, beside the token (which stays an admin).
   * `users` is the file as read at start; SIGHUP reads it again (admin/users.ts).
   */
  usersFile: string | null;
  users: AdminUser[];
  /**
   * Host names (lower case, no port, IPv6 without brackets) the dashboard answers to without a
   * token, beyond its listen address and loopback names (--admin-allowed-hosts).
   */
  allowedHosts: string[];
  /** Other beanstalkd servers the dashboard shows (--admin-attach HOST:PORT, repeatable). */
  attach: string[];
  /**
   * The path the dashboard is reached under behind a reverse proxy ('/beanpole'; '' at the root).
   * Requests arrive with or without it, since proxies differ on stripping it (--admin-base-path).
   */
  basePath: string;
}

/** The admin side's defaults: loopback only, so a fresh `npm start` exposes nothing. */
export const DEFAULT_ADMIN_LISTEN = '127.0.0.1';
export const DEFAULT_ADMIN_PORT = 11380;

export type CliResult =
  | { kind: 'run'; options: ServerOptions; warnings: string[] }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'usage-error'; message: string };

/** beanstalkd's exit status for a bad command line. */
export const USAGE_EXIT_CODE = 5;

export const USAGE = `Use: beanpole [OPTIONS]

Options:
 -b DIR   write-ahead log directory
 -f MS    fsync at most once every MS milliseconds (default is 50ms);
          use -f0 for "always fsync"
 -F       never fsync
 -l ADDR  listen on address (default is 0.0.0.0); unix:/path for a UNIX socket
 -p PORT  listen on port (default is 11300)
 -u USER  become user and group
 -z BYTES set the maximum job size in bytes (default is 65535);
          max allowed is 1073741824 bytes
 -s BYTES set the size of each write-ahead log file (default is 10485760);
          will be rounded up to a multiple of 4096 bytes
 -v       show version information
 -V       increase verbosity
 -h       show this help

Long forms: --binlog-dir --fsync-ms --no-fsync --listen --port --user --max-job-size
            --binlog-size --version --verbose --help
Beyond beanstalkd:
 --max-job-bytes BYTES  memory budget for all job bodies; a put beyond it
                        gets OUT_OF_MEMORY (default: 40% of the memory that
                        the V8 heap cannot take)
 --dead-letter-after N  bury a job at its N-th release or TTR timeout since
                        it was put or last kicked (the release answers
                        BURIED); a tube's own setting in the dashboard
                        overrides it (default: off)
 --history-events N     events kept in the job history ring, shared by all
                        jobs (default 100000, about 37 bytes each, for the
                        beanstalkd jobs and as many for Gearman's; 0 keeps
                        none; at most 10000000)
 --automation-tick MS   evaluate schedules and alert rules every MS ms
                        (10-60000; default: schedules every second, alert
                        rules every 5 seconds); mostly for tests
 --policies FILE        tube and Gearman function policies (JSON: {"tubes":
                        {"NAME": {"concurrency", "rate", "queueCap",
                        "timeoutBackoff"}}, "functions": {...}}), applied at
                        start and on SIGHUP over what the dashboard set

Dashboard and admin API (HTTP + socket.io):
 --admin-listen ADDR    listen address (default 127.0.0.1); an address other
                        than loopback needs a token
 --admin-port PORT      port (default 11380; 0 picks a free one)
 --admin-token TOKEN    require this bearer token (or set BEANPOLE_ADMIN_TOKEN);
                        it is an admin
 --admin-users FILE     dashboard users (JSON: {"users": [{"name", "token_sha256",
                        "role": viewer|operator|admin}]}), each signing in with
                        their own token; SIGHUP reads the file again
 --admin-allowed-hosts a,b  without a token, also answer requests for these
                        host names (the listen address, localhost, 127.0.0.1
                        and [::1] always work)
 --admin-attach HOST:PORT  also show this beanstalkd server in the dashboard,
                        through the beanstalkd protocol (repeatable)
 --admin-read-only      reject every change made through the dashboard
 --admin-base-path PATH serve the dashboard under PATH (/beanpole) behind a
                        reverse proxy, which may strip PATH or pass it on
 --no-admin             no dashboard and no admin API

Gearman protocol (binary and text admin, same jobs engine):
 --gearman-port PORT    port (default 4730; 0 picks a free one)
 --gearman-listen ADDR  listen address (default: the -l address, or 0.0.0.0
                        when -l is a UNIX socket)
 --gearman-max-size BYTES  largest job data (and WORK_* data) accepted
                        (default 67108864, 64 MiB; max 1073741824); -z
                        applies to beanstalkd jobs only
 --gearman-round-robin  a worker that can do several functions gets them in
                        turn (the last registered first), instead of the best
                        job of them all
 --gearman-job-retries N  drop a job once its workers failed it N times
                        (disconnected holding it, or overran CAN_DO_TIMEOUT);
                        its waiting clients get WORK_FAIL (default 0: retry
                        for ever)
 --no-gearman           no Gearman port

TCP keepalive (finds dead peers behind NAT and firewalls; their jobs are released):
 --keepalive            keepalive on the dashboard's sockets too (the beanstalkd
                        and Gearman ports always have it, with the OS's timings)
 --keepalive-idle S     seconds of silence before the first probe (1-32767)
 --keepalive-interval S seconds between probes (1-32767)
 --keepalive-count N    unanswered probes before the connection is dropped
                        (1-127); each of these three implies --keepalive, and
                        applies to every port; unset: the OS's setting

TLS (the beanstalkd and Gearman ports, and HTTPS on the dashboard):
 --tls-cert FILE        the server's certificate (PEM, a chain allowed); with
                        --tls-key, the job ports speak TLS only (a plaintext
                        client is closed) and the dashboard serves HTTPS
 --tls-key FILE         its private key (PEM)
 --tls-ca FILE          clients of the job ports must present a certificate
                        signed by this CA (mutual TLS); its subject CN is the
                        client's identity
 --tls-allow-plain      serve plaintext clients too, on the same ports (told
                        apart by their first byte): for moving a fleet to TLS
 --tls-handshake-timeout-ms MS  close a TLS handshake not done this long
                        after the connection opened (default 10000)
 --tls-max-handshakes N handshakes under way at once per port; past it the
                        oldest is closed (default 512)
                        SIGHUP reads the certificate, key and CA files again:
                        new connections get them, open ones stay
 --acl FILE             access rules for the job ports (JSON: {"identities":
                        {"<certificate CN or glob>": {"tubes": [globs],
                        "functions": [globs], "commands": [names]}, "*": ...}});
                        refused commands answer FORBIDDEN (beanstalkd) or
                        PERMISSION_DENIED (Gearman); SIGHUP reads it again

Cluster mode (several nodes sharing one PostgreSQL database):
 --cluster URL          keep jobs in PostgreSQL at postgres://USER@HOST:PORT/DB
                        (or set BEANPOLE_CLUSTER_URL); the password comes from
                        PGPASSWORD or ~/.pgpass; not with -b, -f or -F.
                        Several hosts follow a failover, as with libpq:
                        postgres://USER@H1:P1,H2:P2/DB?target_session_attrs=
                        read-write
 --cluster-lease-ms MS  a dead node's reserved jobs go back to ready this
                        long after its last heartbeat (default 5000)
 --cluster-connect-timeout S
                        a node that cannot reach the database at start keeps
                        trying, ever less often, for S seconds, then exits 111
                        (default: for ever)
`;

/** A long option that takes a value, and one that is a switch (parseArgs' configuration). */
const TEXT = { type: 'string' } as const;
const FLAG = { type: 'boolean' } as const;

const OPTIONS = {
  'binlog-dir': { type: 'string', short: 'b' },
  'fsync-ms': { type: 'string', short: 'f' },
  'no-fsync': { type: 'boolean', short: 'F' },
  listen: { type: 'string', short: 'l' },
  port: { type: 'string', short: 'p' },
  user: { type: 'string', short: 'u' },
  'max-job-size': { type: 'string', short: 'z' },
  'binlog-size': { type: 'string', short: 's' },
  version: { type: 'boolean', short: 'v' },
  verbose: { type: 'boolean', short: 'V', multiple: true },
  help: { type: 'boolean', short: 'h' },
  compact: { type: 'boolean', short: 'c' },
  'no-compact': { type: 'boolean', short: 'n' },
  'max-job-bytes': TEXT,
  'dead-letter-after': TEXT,
  'history-events': TEXT,
  'automation-tick': TEXT,
  policies: TEXT,
  'admin-listen': TEXT,
  'admin-port': TEXT,
  'admin-token': TEXT,
  'admin-users': TEXT,
  'admin-allowed-hosts': TEXT,
  'admin-attach': { type: 'string', multiple: true },
  'admin-read-only': FLAG,
  'admin-base-path': TEXT,
  'no-admin': FLAG,
  'gearman-port': TEXT,
  'gearman-listen': TEXT,
  'gearman-max-size': TEXT,
  'no-gearman': FLAG,
  'gearman-round-robin': FLAG,
  'gearman-job-retries': TEXT,
  cluster: TEXT,
  'cluster-lease-ms': TEXT,
  'cluster-connect-timeout': TEXT,
  keepalive: FLAG,
  'keepalive-idle': TEXT,
  'keepalive-interval': TEXT,
  'keepalive-count': TEXT,
  'tls-cert': TEXT,
  acl: TEXT,
  'tls-key': TEXT,
  'tls-ca': TEXT,
  'tls-allow-plain': FLAG,
  'tls-handshake-timeout-ms': TEXT,
  'tls-max-handshakes': TEXT,
} as const;

/** Every flag but help and version, which answer at once. */
type FlagName = Exclude<keyof typeof OPTIONS, 'help' | 'version'>;
/** Flags that set up the node's own binlog: a usage error with --cluster. */
const LOCAL_STORE_FLAGS: ReadonlySet<string> = new Set<FlagName>(['binlog-dir', 'fsync-ms', 'no-fsync']);
/** TLS flags that mean nothing without --tls-cert (tlsOptions names them). */
const TLS_ONLY_FLAGS: ReadonlySet<string> = new Set<FlagName>(['tls-ca', 'tls-allow-plain', 'tls-handshake-timeout-ms', 'tls-max-handshakes']);

function removedCompactFlag(flag: string): string {
  return `-${flag.replace(/^-+/, '')} flag was removed. binlog is always compacted.`;
}

const U64_MAX = 18446744073709551615n;

/** Like sscanf("%zu%c"): optional sign, digits, nothing after; negative values wrap. */
function parseSize(text: string): bigint | null {
  const m = /^\s*([+-]?)(\d+)$/.exec(text);
  if (m === null) return null;
  const magnitude = BigInt(m[2]!);
  if (magnitude > U64_MAX) return null;
  return m[1] === '-' ? BigInt.asUintN(64, -magnitude) : magnitude;
}

class UsageError extends Error {}

/** Parses beanstalkd-style flags (combined, attached or separate arguments; the last one wins). */
export function parseCommandLine(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
  readUsers: (file: string) => AdminUser[] = loadUsersFile,
): CliResult {
  // Not strict: like beanstalkd's EARGF, a flag's argument is the next word even when it starts
  // with '-' (`-z -1`), and flags act in order (`-h -x` is help, `-x -h` a usage error).
  const { tokens } = parseArgs({ args: argv, options: OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const options: ServerOptions = {
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
    historyEvents: DEFAULT_HISTORY_EVENTS,
    admin: null,
    gearman: null,
    cluster: null,
    keepAlive: null,
    automationTickMs: null,
    tls: null,
    policies: null,
    acl: null,
  };
  const tls: Partial<TlsOptions> & { flags: string[] } = { flags: [] };
  const keepAlive = (): KeepAliveOptions => (options.keepAlive ??= { idleSec: null, intervalSec: null, count: null });
  let clusterUrl: string | null = null;
  let clusterLeaseMs = DEFAULT_CLUSTER_LEASE_MS;
  let clusterConnectTimeoutMs: number | null = null;
  /** A flag that makes no sense with --cluster (the binlog's), or null. */
  let localStoreFlag: string | null = null;
  const admin: AdminOptions = {
    listen: DEFAULT_ADMIN_LISTEN,
    port: DEFAULT_ADMIN_PORT,
    token: null,
    readOnly: false,
    usersFile: null,
    users: [],
    allowedHosts: [],
    attach: [],
    basePath: '',
  };
  let noAdmin = false;
  let noGearman = false;
  let gearmanListen: string | null = null;
  let gearmanPort = DEFAULT_GEARMAN_PORT;
  let gearmanMaxSize = DEFAULT_GEARMAN_MAX_SIZE;
  let gearmanRoundRobin = false;
  let gearmanJobRetries = 0;
  const warnings: string[] = [];
  // What each flag does with its value (`flag`: as written); help and version answer at once.
  const FLAGS: Record<FlagName, (value: string, flag: string) => void> = {
    'binlog-dir': (v) => (options.binlogDir = v),
    'fsync-ms': (v) => (options.fsyncMs = integer(v, 'fsync interval', 0, 2 ** 31 - 1)),
    'no-fsync': () => (options.fsyncMs = null),
    cluster: (v) => (clusterUrl = postgresUrl(v, '--cluster')),
    'cluster-lease-ms': (v) => (clusterLeaseMs = integer(v, 'cluster lease', 100, 3_600_000)),
    'cluster-connect-timeout': (v) => (clusterConnectTimeoutMs = integer(v, 'cluster connect timeout', 0, 86_400) * 1000),
    listen: (v) => (options.listen = v),
    port: (v) => (options.port = integer(v, 'port', 0, 65535)),
    user: (v) => (options.user = v),
    'max-job-size': (v) => (options.maxJobSize = jobSize(v, 'maximum job size', warnings)),
    'binlog-size': (v) => {
      const size = parseSize(v);
      if (size === null || size > BigInt(Number.MAX_SAFE_INTEGER)) throw new UsageError(`invalid size: ${v}`);
      options.binlogSize = Number(size);
    },
    verbose: () => options.verbosity++,
    compact: (_v, flag) => warnings.push(removedCompactFlag(flag)),
    'no-compact': (_v, flag) => warnings.push(removedCompactFlag(flag)),
    'max-job-bytes': (v) => (options.maxJobBytes = integer(v, 'memory budget', 0, Number.MAX_SAFE_INTEGER)),
    'dead-letter-after': (v) => (options.deadLetterAfter = integer(v, 'dead-letter limit', 0, 2 ** 32 - 1)),
    'history-events': (v) => (options.historyEvents = integer(v, 'history size', 0, MAX_HISTORY_EVENTS)),
    'automation-tick': (v) => (options.automationTickMs = integer(v, 'automation tick', 10, 60_000)),
    policies: (v) => (options.policies = { file: v, doc: policiesFrom(v) }),
    'admin-listen': (v) => (admin.listen = v),
    'admin-port': (v) => (admin.port = integer(v, 'admin port', 0, 65535)),
    'admin-token': (v) => (admin.token = adminToken(v, '--admin-token')),
    'admin-users': (v) => (admin.usersFile = v),
    'admin-allowed-hosts': (v) => (admin.allowedHosts = hostList(v)),
    'admin-attach': (v) => {
      if (parseHostPort(v) === null) throw new UsageError(`--admin-attach wants HOST:PORT, not ${v}`);
      admin.attach.push(v);
    },
    'admin-base-path': (v) => (admin.basePath = basePath(v)),
    'admin-read-only': () => (admin.readOnly = true),
    'no-admin': () => (noAdmin = true),
    'gearman-port': (v) => (gearmanPort = integer(v, 'Gearman port', 0, 65535)),
    'gearman-listen': (v) => (gearmanListen = v),
    'gearman-max-size': (v) => (gearmanMaxSize = jobSize(v, 'maximum Gearman packet size', warnings)),
    'no-gearman': () => (noGearman = true),
    'gearman-round-robin': () => (gearmanRoundRobin = true),
    'gearman-job-retries': (v) => (gearmanJobRetries = integer(v, 'Gearman job retries', 0, 2 ** 32 - 1)),
    keepalive: () => keepAlive(),
    'keepalive-idle': (v) => (keepAlive().idleSec = integer(v, 'keepalive idle time', 1, MAX_KEEPALIVE_SEC)),
    'keepalive-interval': (v) => (keepAlive().intervalSec = integer(v, 'keepalive interval', 1, MAX_KEEPALIVE_SEC)),
    'keepalive-count': (v) => (keepAlive().count = integer(v, 'keepalive probe count', 1, MAX_KEEPALIVE_COUNT)),
    acl: (v) => (options.acl = { file: v, rules: aclFrom(v) }),
    'tls-cert': (v, flag) => (tls.certFile = readableFile(v, flag)),
    'tls-key': (v, flag) => (tls.keyFile = readableFile(v, flag)),
    'tls-ca': (v, flag) => (tls.caFile = readableFile(v, flag)),
    'tls-allow-plain': () => (tls.allowPlain = true),
    'tls-handshake-timeout-ms': (v) => (tls.handshakeTimeoutMs = integer(v, 'TLS handshake timeout', 1, 3_600_000)),
    'tls-max-handshakes': (v) => (tls.maxHandshakes = integer(v, 'TLS handshake limit', 1, 1_000_000)),
  };
  try {
    for (const token of tokens) {
      if (token.kind !== 'option') throw new UsageError(`unknown argument: ${argv[token.index]}`);
      if (!Object.hasOwn(OPTIONS, token.name)) throw new UsageError(`unknown flag: ${token.rawName}`);
      const type = OPTIONS[token.name as keyof typeof OPTIONS].type;
      if (type === 'string' && token.value === undefined) throw new UsageError(`flag requires an argument: ${token.rawName}`);
      if (type === 'boolean' && token.value !== undefined) throw new UsageError(`flag takes no argument: ${token.rawName}`);
      if (token.name === 'help') return { kind: 'help' };
      if (token.name === 'version') return { kind: 'version' };
      FLAGS[token.name as FlagName](token.value ?? '', token.rawName);
      if (LOCAL_STORE_FLAGS.has(token.name)) localStoreFlag = token.rawName;
      if (TLS_ONLY_FLAGS.has(token.name)) tls.flags.push(token.rawName);
    }
    options.tls = tlsOptions(tls);
    if (clusterUrl === null && env.BEANPOLE_CLUSTER_URL) clusterUrl = postgresUrl(env.BEANPOLE_CLUSTER_URL, 'BEANPOLE_CLUSTER_URL');
    if (clusterUrl !== null) {
      if (localStoreFlag !== null) {
        throw new UsageError(`${localStoreFlag} is for a node's own binlog; a --cluster node keeps its jobs in PostgreSQL`);
      }
      if (parseClusterUrl(clusterUrl).hasPassword) {
        warnings.push('the --cluster URL holds a password, which other users can read in ps: use PGPASSWORD or ~/.pgpass');
      }
      if (options.maxJobSize > MAX_CLUSTER_JOB_SIZE) {
        warnings.push(`maximum job size in cluster mode is ${MAX_CLUSTER_JOB_SIZE} bytes`);
        options.maxJobSize = MAX_CLUSTER_JOB_SIZE;
      }
      options.cluster = { url: clusterUrl, leaseMs: clusterLeaseMs, connectTimeoutMs: clusterConnectTimeoutMs };
    }
    // The flag wins over the variable; an empty variable means no token (set but blank in a shell).
    if (!noAdmin && admin.token === null && env.BEANPOLE_ADMIN_TOKEN) admin.token = adminToken(env.BEANPOLE_ADMIN_TOKEN, 'BEANPOLE_ADMIN_TOKEN');
    if (!noAdmin && admin.usersFile !== null) admin.users = usersFrom(admin.usersFile, readUsers);
    if (!noAdmin && admin.token === null && admin.usersFile === null && !isLoopback(admin.listen)) {
      throw new UsageError(
        `--admin-listen ${admin.listen} is reachable from other machines: set --admin-token (or BEANPOLE_ADMIN_TOKEN) or --admin-users`,
      );
    }
  } catch (err) {
    if (err instanceof UsageError) return { kind: 'usage-error', message: err.message };
    throw err;
  }
  if (!noAdmin) options.admin = admin;
  if (!noGearman) {
    const listen = gearmanListen ?? (options.listen.startsWith('unix:') ? '0.0.0.0' : options.listen);
    options.gearman = { listen, port: gearmanPort, maxSize: gearmanMaxSize, roundRobin: gearmanRoundRobin, jobRetries: gearmanJobRetries };
  }
  return { kind: 'run', options, warnings };
}

/** The TLS flags together: a certificate and its key, or none of them. */
function tlsOptions(flags: Partial<TlsOptions> & { flags: string[] }): TlsOptions | null {
  const { certFile, keyFile } = flags;
  if (certFile === undefined && keyFile === undefined) {
    if (flags.flags.length > 0) throw new UsageError(`${flags.flags[0]} needs --tls-cert and --tls-key`);
    return null;
  }
  if (certFile === undefined) throw new UsageError('--tls-key needs --tls-cert');
  if (keyFile === undefined) throw new UsageError('--tls-cert needs --tls-key');
  return {
    certFile,
    keyFile,
    caFile: flags.caFile ?? null,
    allowPlain: flags.allowPlain ?? false,
    handshakeTimeoutMs: flags.handshakeTimeoutMs ?? DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS,
    maxHandshakes: flags.maxHandshakes ?? DEFAULT_TLS_MAX_HANDSHAKES,
  };
}

/** A file the server can read now (it is read at start, and again on SIGHUP). */
function readableFile(path: string, flag: string): string {
  try {
    accessSync(path, fsConstants.R_OK);
  } catch (err) {
    throw new UsageError(`${flag} ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return path;
}

/**
 * A usable token: not empty, and no whitespace at either end, since the server trims the value
 * of `Authorization: Bearer ...` (as HTTP trims header values), so such a token could never match.
 */
function adminToken(value: string, where: string): string {
  if (value.trim() === '') throw new UsageError(`the admin token (${where}) must not be empty or blank`);
  if (value.trim() !== value) throw new UsageError(`the admin token (${where}) must not start or end with whitespace`);
  return value;
}

/** The --policies file's policies; a file that cannot be used is a usage error naming it. */
function policiesFrom(file: string): PolicyFile {
  try {
    return loadPolicyFile(file);
  } catch (err) {
    if (err instanceof PolicyFileError) throw new UsageError(`--policies ${file}: ${err.message}`);
    throw err;
  }
}

/** The --acl file's rules; a file that cannot be used is a usage error. */
function aclFrom(file: string): AclRules {
  try {
    return loadAclFile(file);
  } catch (err) {
    if (err instanceof AclFileError) throw new UsageError(err.message);
    throw err;
  }
}

/** The users of --admin-users FILE, or a usage error naming the file and its problem. */
function usersFrom(file: string, read: (file: string) => AdminUser[]): AdminUser[] {
  try {
    return read(file);
  } catch (err) {
    if (err instanceof UsersFileError) throw new UsageError(`--admin-users ${file}: ${err.message}`);
    throw err;
  }
}

/**
 * A URL path prefix as links will carry it: '/a/b', no trailing slash ('' for '/'). Only
 * characters that need no escaping in a URL path or an HTML attribute, so it is written into the
 * page as it is.
 */
function basePath(value: string): string {
  const trimmed = value.replace(/\/+$/, '');
  if (trimmed === '') return '';
  if (!/^(\/[A-Za-z0-9._~-]+)+$/.test(trimmed) || /\/\.\.?(\/|$)/.test(trimmed)) {
    throw new UsageError(`--admin-base-path wants a path such as /beanpole (letters, digits, . _ ~ -), not ${JSON.stringify(value)}`);
  }
  return trimmed;
}

/** A PostgreSQL connection URL (postgres:// or postgresql://), as the pg driver takes it. */
function postgresUrl(value: string, where: string): string {
  try {
    parseClusterUrl(value);
  } catch (err) {
    if (err instanceof ClusterUrlError) throw new UsageError(`${where} ${err.message}`);
    throw err;
  }
  return value;
}

/** `a,b:8080,[::1]` -> ['a', 'b', '::1']: names compared case-insensitively, ports ignored. */
function hostList(value: string): string[] {
  return value.split(',').map((item) => {
    const name = hostName(item.trim());
    if (name === null) throw new UsageError(`invalid host name in --admin-allowed-hosts: ${JSON.stringify(item)}`);
    return name;
  });
}

/** A size as beanstalkd's -z takes it: above MAX_JOB_SIZE_LIMIT, the limit with a warning. */
function jobSize(value: string, what: string, warnings: string[]): number {
  const size = parseSize(value);
  if (size === null) throw new UsageError(`invalid size: ${value}`);
  if (size <= BigInt(MAX_JOB_SIZE_LIMIT)) return Number(size);
  warnings.push(`${what} was set to ${MAX_JOB_SIZE_LIMIT}`);
  return MAX_JOB_SIZE_LIMIT;
}

function integer(text: string, what: string, min: number, max: number): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`invalid ${what}: ${text}`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`invalid ${what}: ${text}`);
  return n;
}
