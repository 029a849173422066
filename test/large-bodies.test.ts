/**
 * Bodies far larger than the input flow-control limit (a few MiB of unparsed commands): with
 * `-z` raised, puts of 8 MiB, 64 MiB and 1 GiB complete whether the body arrives in one write
 * or slowly in 64 KiB pieces, other clients are served meanwhile, the body is not held many
 * times over, and it comes back byte for byte. The "serially" cases follow a client library's
 * own test ("put and reserve large jobs serially") and run against beanstalkd too, when installed.
 */
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';
import { differentialKinds } from './support/targets.js';

const MiB = 1 << 20;
const GiB = 1 << 30;
const PIECE = 64 * 1024;

/** `size` bytes of a repeating, non-trivial pattern (CR and LF bytes included). */
function patternBody(size: number): Buffer {
  const block = Buffer.alloc(PIECE);
  for (let i = 0; i < block.length; i++) block[i] = (i * 31 + (i >> 8)) & 0xff;
  const body = Buffer.allocUnsafe(size);
  if (size > 0) body.fill(block);
  return body;
}

/** The server's peak resident memory (VmHWM), in bytes. */
function peakRss(server: RunningServer): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.process.pid}/status`, 'latin1'));
  return Number(m![1]) * 1024;
}

/** What came back for a RESERVED/FOUND reply: its line, and its body's length and checksum. */
interface BodyReply {
  line: string;
  length: number;
  crc: number;
}

/**
 * A client for huge replies: bodies are checksummed as they stream in, never accumulated, so a
 * 1 GiB reply costs the test no memory.
 */
class StreamingClient {
  private line = '';
  private body: { line: string; left: number; length: number; crc: number } | null = null;
  private readonly replies: (string | BodyReply)[] = [];
  private wake: (() => void) | null = null;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.consume(chunk));
    socket.on('close', () => this.wake?.());
  }

  static connect(port: number): Promise<StreamingClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      socket.once('connect', () => resolve(new StreamingClient(socket)));
      socket.once('error', reject);
    });
  }

  private consume(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.body !== null) {
        const n = Math.min(this.body.left, chunk.length - at);
        // The body's own bytes are checksummed; its final CRLF is checked separately.
        const bodyEnd = Math.min(at + n, at + Math.max(0, this.body.left - 2));
        if (bodyEnd > at) this.body.crc = crc32(chunk.subarray(at, bodyEnd), this.body.crc);
        this.body.left -= n;
        at += n;
        if (this.body.left === 0) {
          this.replies.push({ line: this.body.line, length: this.body.length, crc: this.body.crc });
          this.body = null;
          this.wake?.();
        }
        continue;
      }
      const eol = chunk.indexOf(10, at);
      const end = eol < 0 ? chunk.length : eol + 1;
      this.line += chunk.toString('latin1', at, end);
      at = end;
      if (eol < 0) continue;
      const line = this.line;
      this.line = '';
      const m = /^(?:RESERVED|FOUND) \d+ (\d+)\r\n$/.exec(line);
      if (m === null) {
        this.replies.push(line);
        this.wake?.();
      } else {
        this.body = { line, left: Number(m[1]) + 2, length: Number(m[1]), crc: 0 };
      }
    }
  }

  /** The next reply: a line, or a body reply. */
  async next(): Promise<string | BodyReply> {
    while (this.replies.length === 0) {
      if (this.socket.destroyed) throw new Error('connection closed');
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    return this.replies.shift()!;
  }

  /** Writes `data`, waiting for the socket to drain when it asks to. */
  async write(data: string | Buffer): Promise<void> {
    if (!this.socket.write(data)) await new Promise((resolve) => this.socket.once('drain', resolve));
  }

  destroy(): void {
    this.socket.destroy();
  }
}

describe('large bodies (-z 1073741824)', () => {
  let server: RunningServer;
  const clients: { destroy(): void }[] = [];

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await server?.stop();
  });

  async function start(): Promise<void> {
    server = await startServer('beanpole', ['-z', String(GiB)]);
  }

  async function streaming(): Promise<StreamingClient> {
    const c = await StreamingClient.connect(server.port);
    clients.push(c);
    return c;
  }

  /** Reserves the job that was just put and checks it is `body`, byte for byte. */
  async function reserveAndCheck(worker: StreamingClient, id: number, body: Buffer): Promise<void> {
    await worker.write('reserve-with-timeout 0\r\n');
    const reply = await worker.next();
    expect(typeof reply).toBe('object');
    const got = reply as BodyReply;
    expect(got.line).toBe(`RESERVED ${id} ${body.length}\r\n`);
    expect(got.length).toBe(body.length);
    expect(got.crc).toBe(crc32(body));
    await worker.write(`delete ${id}\r\n`);
    expect(await worker.next()).toBe('DELETED\r\n');
  }

  for (const size of [8 * MiB, 64 * MiB]) {
    it(`takes a ${size / MiB} MiB body sent slowly in 64 KiB pieces while another client is served`, async () => {
      await start();
      const producer = await streaming();
      const other = await RawClient.connect(server.port);
      clients.push(other);
      expect(await other.call('use other\r\n')).toBe('USING other\r\n');
      expect(await other.call('watch other\r\n')).toBe('WATCHING 2\r\n');
      const body = patternBody(size);
      await producer.write(`put 0 0 60 ${size}\r\n`);
      let served = 0;
      for (let at = 0; at < size; at += PIECE) {
        await producer.write(body.subarray(at, at + PIECE));
        // Between two pieces another client's put, reserve and delete all complete.
        const put = await other.call('put 0 0 60 5\r\nhello\r\n');
        expect(put).toMatch(/^INSERTED \d+\r\n$/);
        expect(await other.call('reserve-with-timeout 0\r\n')).toMatch(/^RESERVED \d+ 5\r\nhello\r\n$/);
        expect(await other.call(`delete ${put.slice(9, -2)}\r\n`)).toBe('DELETED\r\n');
        served++;
      }
      await producer.write('\r\n');
      const inserted = await producer.next();
      expect(inserted).toMatch(/^INSERTED \d+\r\n$/);
      expect(served).toBe(size / PIECE);
      await reserveAndCheck(producer, Number((inserted as string).slice(9, -2)), body);
    });
  }

  it('takes a 1 GiB body in one write and gives it back byte for byte, holding it at most about three times', async () => {
    await start();
    const before = peakRss(server);
    const producer = await streaming();
    const body = patternBody(GiB);
    await producer.write(Buffer.concat([Buffer.from(`put 0 0 60 ${GiB}\r\n`), body.subarray(0, PIECE)]));
    await producer.write(body.subarray(PIECE));
    await producer.write('\r\n');
    const inserted = await producer.next();
    expect(inserted).toMatch(/^INSERTED \d+\r\n$/);
    await reserveAndCheck(producer, Number((inserted as string).slice(9, -2)), body);
    // The stored body and one copy on its way out, plus slack: never a copy per read chunk.
    expect(peakRss(server) - before).toBeLessThan(3 * GiB);
  });

  it('keeps a 64 MiB body in the binlog (-b) across a restart', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-large-'));
    try {
      server = await startServer('beanpole', ['-z', String(GiB), '-b', dir]);
      const producer = await streaming();
      const body = patternBody(64 * MiB);
      await producer.write(`put 0 0 60 ${body.length}\r\n`);
      for (let at = 0; at < body.length; at += 4 * MiB) await producer.write(body.subarray(at, at + 4 * MiB));
      await producer.write('\r\n');
      const inserted = await producer.next();
      expect(inserted).toMatch(/^INSERTED \d+\r\n$/);
      producer.destroy();
      await server.stop();
      server = await startServer('beanpole', ['-z', String(GiB), '-b', dir]);
      await reserveAndCheck(await streaming(), Number((inserted as string).slice(9, -2)), body);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.each(differentialKinds())('put and reserve large jobs serially (a client library test) on %s', (kind) => {
  let server: RunningServer;
  const clients: StreamingClient[] = [];

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await server.stop();
  });

  /** A JSON object of 100,000 random keys, as the library's test makes (about 4.5 MB). */
  function bigJson(): Buffer {
    const values: Record<string, string> = {};
    for (let i = 0; i < 100_000; i++) values[Math.random().toString()] = Math.random().toString();
    return Buffer.from(JSON.stringify(values));
  }

  async function connect(): Promise<StreamingClient> {
    const c = await StreamingClient.connect(server.port);
    clients.push(c);
    return c;
  }

  async function setUp(): Promise<{ producer: StreamingClient; worker: StreamingClient; body: Buffer }> {
    server = await startServer(kind, ['-z', String(32 * MiB)]);
    const producer = await connect();
    const worker = await connect();
    const tube = `t${Math.random().toString().slice(2)}`;
    await producer.write(`use ${tube}\r\n`);
    expect(await producer.next()).toBe(`USING ${tube}\r\n`);
    await worker.write(`watch ${tube}\r\nignore default\r\n`);
    expect(await worker.next()).toBe('WATCHING 2\r\n');
    expect(await worker.next()).toBe('WATCHING 1\r\n');
    return { producer, worker, body: bigJson() };
  }

  async function reserveOne(worker: StreamingClient, body: Buffer): Promise<void> {
    await worker.write('reserve-with-timeout 0\r\n');
    const got = (await worker.next()) as BodyReply;
    expect(got.line).toMatch(new RegExp(`^RESERVED \\d+ ${body.length}\\r\\n$`));
    expect(got.crc).toBe(crc32(body));
  }

  it('puts and reserves three jobs one after another', async () => {
    const { producer, worker, body } = await setUp();
    for (let i = 0; i < 3; i++) {
      await producer.write(Buffer.concat([Buffer.from(`put 0 0 180 ${body.length}\r\n`), body, Buffer.from('\r\n')]));
      expect(await producer.next()).toMatch(/^INSERTED \d+\r\n$/);
      await reserveOne(worker, body);
    }
  });

  it('puts three jobs in one pipeline, then reserves them', async () => {
    const { producer, worker, body } = await setUp();
    const put = Buffer.concat([Buffer.from(`put 0 0 180 ${body.length}\r\n`), body, Buffer.from('\r\n')]);
    await producer.write(Buffer.concat([put, put, put]));
    for (let i = 0; i < 3; i++) expect(await producer.next()).toMatch(/^INSERTED \d+\r\n$/);
    for (let i = 0; i < 3; i++) await reserveOne(worker, body);
  });
});
