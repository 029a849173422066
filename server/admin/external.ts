import jackd, { type JackdClient } from 'jackd';
import { parseHostPort } from '../host-port.js';
import { ApiError } from './errors.js';

/**
 * Other beanstalkd servers the dashboard shows beside this one (`--admin-attach HOST:PORT`, or
 * the "add server" form), through the beanstalkd protocol with the `jackd` client: stats, tubes,
 * the first job of each state (all the protocol can peek), kick, delete, pause and put. Each
 * server has one connection, used by one request at a time (`use` is per connection); every
 * command has a deadline, so an unreachable or silent server answers the dashboard with an error
 * within seconds and never holds a page.
 */

/**
 * jackd is CommonJS whose exports Node's ESM loader cannot name: the default export is the
 * client class itself, while its types describe the module object.
 */
const Jackd = jackd as unknown as typeof JackdClient;

/** How long one command may take, connecting included. */
const COMMAND_TIMEOUT_MS = 3000;
/** How long the list of servers waits for each one's `stats`. */
const PROBE_TIMEOUT_MS = 1500;
/** Servers one dashboard may attach (flags and form together). */
export const MAX_EXTERNAL_SERVERS = 32;
/** Tubes of an external server whose stats the tube list reads. */
const MAX_TUBES_LISTED = 1000;

export type ExternalSource = 'flag' | 'dashboard';

/** beanstalkd's flat YAML (`key: value` lines, or `- item` lines) as a map or a list. */
export function yamlMap(text: string): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const line of text.split('\n')) {
    const m = /^([\w-]+): (.*)$/.exec(line.trim());
    if (m === null) continue;
    const value = m[2]!.replace(/^"(.*)"$/, '$1');
    out[m[1]!] = /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value;
  }
  return out;
}

export function yamlList(text: string): string[] {
  return text
    .split('\n')
    .map((l) => /^- (.*)$/.exec(l.trim())?.[1])
    .filter((v): v is string => v !== undefined);
}

/** A job as an external server shows it: its id, body and stats-job. */
export interface ExternalJob {
  id: number;
  body: Buffer;
  stats: Record<string, string | number>;
}

export class ExternalServer {
  status: 'unknown' | 'up' | 'down' = 'unknown';
  error: string | null = null;
  version: string | null = null;
  private client: JackdClient | null = null;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    readonly id: number,
    readonly host: string,
    readonly port: number,
    readonly source: ExternalSource,
  ) {}

  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /** `stats` with a short deadline: refreshes `status`. */
  async probe(): Promise<void> {
    try {
      const stats = yamlMap(await this.run((c) => c.stats(''), PROBE_TIMEOUT_MS));
      this.version = stats.version === undefined ? null : String(stats.version);
    } catch {
      // run() recorded why.
    }
  }

  stats(): Promise<Record<string, string | number>> {
    return this.run(async (c) => yamlMap(await c.stats('')));
  }

  /** Every tube with its stats-tube (the first MAX_TUBES_LISTED). */
  tubes(): Promise<Record<string, string | number>[]> {
    return this.run(async (c) => {
      const names = yamlList(await c.listTubes('')).slice(0, MAX_TUBES_LISTED);
      const out: Record<string, string | number>[] = [];
      for (const name of names) {
        try {
          out.push(yamlMap(await c.statsTube(name)));
        } catch (err) {
          if (!isNotFound(err)) throw err; // the tube went meanwhile
        }
      }
      return out;
    });
  }

  /** The first job of `state` in `tube`, or null. */
  peek(tube: string, state: 'ready' | 'delayed' | 'buried'): Promise<ExternalJob | null> {
    return this.run(async (c) => {
      await c.use(tube);
      try {
        const job = state === 'ready' ? await c.peekReady() : state === 'delayed' ? await c.peekDelayed() : await c.peekBuried();
        return await withStats(c, job.id, toBuffer(job.payload));
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  job(id: number): Promise<ExternalJob | null> {
    return this.run(async (c) => {
      try {
        const job = await c.peek(String(id));
        return await withStats(c, job.id, toBuffer(job.payload));
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  /** Puts a text body (jackd sends a string as UTF-8; a Buffer it would send as JSON). */
  put(tube: string, body: string, priority: number, delay: number, ttr: number): Promise<number> {
    return this.run(async (c) => {
      await c.use(tube);
      return Number(await c.put(body, { priority, delay, ttr }));
    });
  }

  kick(tube: string, bound: number): Promise<number> {
    return this.run(async (c) => {
      await c.use(tube);
      return c.kick(bound);
    });
  }

  /** False when there is no such job (or it cannot be kicked / deleted). */
  kickJob(id: number): Promise<boolean> {
    return this.run((c) => found(c.kickJob(String(id))));
  }

  deleteJob(id: number): Promise<boolean> {
    return this.run((c) => found(c.delete(String(id))));
  }

  pause(tube: string, seconds: number): Promise<boolean> {
    return this.run((c) => found(pauseTube(c, tube, seconds)));
  }

  close(): void {
    this.drop();
  }

  /**
   * Runs `fn` on the server's connection once the commands before it are done, connecting first
   * if needed; past `timeoutMs` the connection is dropped (its late replies would belong to no
   * one) and the request fails with 504. A refused or broken connection fails with 502.
   */
  private run<T>(fn: (c: JackdClient) => Promise<T>, timeoutMs = COMMAND_TIMEOUT_MS): Promise<T> {
    const result = this.tail.then(() => this.attempt(fn, timeoutMs));
    this.tail = result.catch(() => undefined);
    return result;
  }

  private async attempt<T>(fn: (c: JackdClient) => Promise<T>, timeoutMs: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ApiError(504, 'EXTERNAL_TIMEOUT', `${this.address} did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const value = await Promise.race([this.connected().then(fn), deadline]);
      this.status = 'up';
      this.error = null;
      return value;
    } catch (err) {
      if (isNotFound(err) || isProtocolError(err)) throw new ApiError(409, 'EXTERNAL_REFUSED', `${this.address} answered ${String((err as Error).message).trim()}`);
      this.drop();
      this.status = 'down';
      this.error = err instanceof ApiError ? err.message : `${this.address}: ${(err as Error).message}`;
      throw err instanceof ApiError ? err : new ApiError(502, 'EXTERNAL_UNREACHABLE', this.error);
    } finally {
      clearTimeout(timer);
    }
  }

  private async connected(): Promise<JackdClient> {
    if (this.client !== null && this.client.isConnected()) return this.client;
    this.drop();
    const client = new Jackd();
    this.client = client;
    // jackd listens for errors only while connecting; a later reset must not take the process down.
    client.socket.on('error', () => {
      if (this.client === client) this.drop();
    });
    client.socket.on('close', () => {
      if (this.client === client) this.client = null;
    });
    client.socket.setNoDelay(true);
    await client.connect({ host: this.host, port: this.port });
    return client;
  }

  private drop(): void {
    const client = this.client;
    this.client = null;
    client?.socket.destroy();
  }
}

/**
 * pause-tube through jackd's own command machinery: jackd 2.2.2 (the latest) sends its
 * pause-tube without the line end, so the server never answers it.
 */
function pauseTube(c: JackdClient, tube: string, seconds: number): Promise<void> {
  const command = c.createCommandHandler<[string, number], void>(
    (name: string, delay: number) => Buffer.from(`pause-tube ${name} ${delay}\r\n`, 'ascii'),
    [
      async (reply: Buffer) => {
        const line = reply.toString('ascii');
        if (line !== 'PAUSED') throw new Error(line);
      },
    ],
  );
  return command(tube, seconds);
}

async function withStats(c: JackdClient, id: string, body: Buffer): Promise<ExternalJob> {
  let stats: Record<string, string | number> = {};
  try {
    stats = yamlMap(await c.statsJob(id));
  } catch (err) {
    if (!isNotFound(err)) throw err; // deleted between the two commands: show what was peeked
  }
  return { id: Number(id), body, stats };
}

function toBuffer(payload: Buffer | string): Buffer {
  return typeof payload === 'string' ? Buffer.from(payload, 'latin1') : payload;
}

/** jackd throws the reply line as the message. */
function isNotFound(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOT_FOUND');
}

function isProtocolError(err: unknown): boolean {
  return err instanceof Error && /^(OUT_OF_MEMORY|INTERNAL_ERROR|BAD_FORMAT|UNKNOWN_COMMAND|DRAINING|JOB_TOO_BIG|EXPECTED_CRLF)/.test(err.message);
}

async function found(p: Promise<unknown>): Promise<boolean> {
  try {
    await p;
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/** The attached servers, by id. */
export class ExternalServers {
  private readonly servers = new Map<number, ExternalServer>();
  private nextId = 1;

  /** Adds `address`; a usage problem (bad address, too many, already attached) is a 400 / 409. */
  add(address: string, source: ExternalSource): ExternalServer {
    const parsed = parseHostPort(address);
    if (parsed === null) throw new ApiError(400, 'BAD_REQUEST', `address: not HOST:PORT: ${address}`);
    if (this.servers.size >= MAX_EXTERNAL_SERVERS) throw new ApiError(409, 'TOO_MANY_SERVERS', `at most ${MAX_EXTERNAL_SERVERS} servers can be attached`);
    for (const s of this.servers.values()) {
      if (s.host === parsed.host && s.port === parsed.port) throw new ApiError(409, 'ALREADY_ATTACHED', `${s.address} is attached already`);
    }
    const server = new ExternalServer(this.nextId++, parsed.host, parsed.port, source);
    this.servers.set(server.id, server);
    return server;
  }

  get(id: number): ExternalServer {
    const server = this.servers.get(id);
    if (server === undefined) throw new ApiError(404, 'NOT_FOUND', `no attached server ${id}`);
    return server;
  }

  remove(id: number): void {
    this.get(id).close();
    this.servers.delete(id);
  }

  list(): ExternalServer[] {
    return [...this.servers.values()];
  }

  closeAll(): void {
    for (const s of this.servers.values()) s.close();
  }
}
