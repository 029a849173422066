/**
 * How the doors' answers are batched into socket writes, on the real server: a worker's result
 * and its next request are answered together, whether they came in one write or in two. Clients
 * that are worker and client on one connection (node-gearman) depend on it: they close when the
 * result arrives, and reconnect when an answer comes after that. The beanstalkd door answers a
 * pipelined batch in one write too.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { requestPacket } from './support/gearman-client.js';
import { GEARMAN_IN_CLUSTER, startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

let server: ServerProcess;
let port: number;

/** In memory, and with a binlog (whose replies wait until their records are written); a cluster node takes no -b. */
const MODES: readonly (readonly [string, boolean])[] = GEARMAN_IN_CLUSTER ? [['cluster node', false]] : [['in memory', false], ['with -b', true]];

/** A raw connection that keeps each chunk the socket delivers, as it came. */
class ChunkClient {
  readonly chunks: Buffer[] = [];
  private waiter: (() => void) | null = null;
  ended = false;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.waiter?.();
    });
    socket.on('end', () => {
      this.ended = true;
      this.waiter?.();
    });
  }

  static connect(to = port): Promise<ChunkClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(to, '127.0.0.1', () => resolve(new ChunkClient(socket)));
      socket.setNoDelay(true);
      socket.once('error', reject);
    });
  }

  /** Writes one request packet; resolves once the kernel has taken it. */
  request(type: number, ...args: string[]): Promise<void> {
    return new Promise((resolve) => this.socket.write(requestPacket(type, ...args), () => resolve()));
  }

  /** Writes several request packets in one write; resolves once the kernel has taken them. */
  requests(...packets: Buffer[]): Promise<void> {
    return new Promise((resolve) => this.socket.write(Buffer.concat(packets), () => resolve()));
  }

  /** Writes raw bytes in one write. */
  raw(bytes: string): Promise<void> {
    return new Promise((resolve) => this.socket.write(bytes, () => resolve()));
  }

  /** Waits until `n` chunks have come, or the server closed. */
  async chunk(n: number): Promise<void> {
    const deadline = Date.now() + 5000;
    while (this.chunks.length < n && !this.ended) {
      if (Date.now() > deadline) throw new Error(`only ${this.chunks.length} chunks came`);
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 50);
      });
    }
  }
}

/** The packet types in `bytes`, in order. */
function types(bytes: Buffer): number[] {
  const out: number[] = [];
  for (let at = 0; at + 12 <= bytes.length; at += 12 + bytes.readUInt32BE(at + 8)) out.push(bytes.readUInt32BE(at + 4));
  return out;
}

describe.each(MODES)('%s', (_mode, withBinlog) => {
  let binlogDir: string | null = null;

  beforeAll(async () => {
    binlogDir = withBinlog ? await mkdtemp(path.join(tmpdir(), 'beanpole-batching-')) : null;
    ({ server, port } = await startGearmanServer(binlogDir === null ? [] : ['-b', binlogDir]));
  });

  afterAll(async () => {
    await server.stop();
    if (binlogDir !== null) await rm(binlogDir, { recursive: true, force: true });
  });

  describe('Gearman answers in one write', () => {
    it("answers a worker's WORK_COMPLETE and the GRAB_JOB it writes next together, with the result for its own client", async () => {
      const c = await ChunkClient.connect();
      const fn = `batch-${process.pid}`;
      await c.request(PACKET.CAN_DO, fn);
      await c.request(PACKET.SUBMIT_JOB, fn, '', 'x');
      await c.chunk(1);
      await c.request(PACKET.GRAB_JOB);
      await c.chunk(2);
      expect(types(c.chunks[0]!)).toEqual([PACKET.JOB_CREATED]);
      expect(types(c.chunks[1]!)).toEqual([PACKET.JOB_ASSIGN]);
      const handle = c.chunks[0]!.toString('latin1', 12);
      // Two writes, the second once the first has left, as node-gearman sends them.
      await c.request(PACKET.WORK_COMPLETE, handle, 'done');
      await c.request(PACKET.GRAB_JOB);
      // With a database too, where the GRAB_JOB is answered a statement later: the result waits for it.
      await c.chunk(3);
      expect(types(c.chunks[2]!)).toEqual([PACKET.WORK_COMPLETE, PACKET.NO_JOB]);
      c.socket.destroy();
    });

    it("answers a worker's WORK_COMPLETE and GRAB_JOB written in one write in one read, with the result for its own client", async () => {
      const c = await ChunkClient.connect();
      const fn = `batch-one-${process.pid}`;
      await c.requests(requestPacket(PACKET.CAN_DO, fn), requestPacket(PACKET.SUBMIT_JOB, fn, '', 'x'), requestPacket(PACKET.GRAB_JOB));
      let bytes = Buffer.alloc(0);
      for (let n = 1; types(bytes).length < 2; n++) {
        await c.chunk(n);
        bytes = Buffer.concat(c.chunks);
      }
      expect(types(bytes)).toEqual([PACKET.JOB_CREATED, PACKET.JOB_ASSIGN]);
      const handle = bytes.toString('latin1', 12, 12 + bytes.readUInt32BE(8));
      const seen = c.chunks.length;
      await c.requests(requestPacket(PACKET.WORK_COMPLETE, handle, 'done'), requestPacket(PACKET.GRAB_JOB));
      // With a database too: the result waits for the GRAB_JOB's answer.
      await c.chunk(seen + 1);
      expect(c.chunks).toHaveLength(seen + 1);
      expect(types(c.chunks[seen]!)).toEqual([PACKET.WORK_COMPLETE, PACKET.NO_JOB]);
      c.socket.destroy();
    });

    it('still sends a worker its own result when it asks for nothing after it', async () => {
      const c = await ChunkClient.connect();
      const fn = `batch-alone-${process.pid}`;
      await c.requests(requestPacket(PACKET.CAN_DO, fn), requestPacket(PACKET.SUBMIT_JOB, fn, '', 'x'), requestPacket(PACKET.GRAB_JOB));
      let bytes = Buffer.alloc(0);
      for (let n = 1; types(bytes).length < 2; n++) {
        await c.chunk(n);
        bytes = Buffer.concat(c.chunks);
      }
      const handle = bytes.toString('latin1', 12, 12 + bytes.readUInt32BE(8));
      const seen = c.chunks.length;
      await c.request(PACKET.WORK_COMPLETE, handle, 'done');
      // No request follows: the held result leaves once the wait for one is over.
      await c.chunk(seen + 1);
      expect(types(c.chunks[seen]!)).toEqual([PACKET.WORK_COMPLETE]);
      c.socket.destroy();
    });

    it("forwards a worker's WORK_DATA, WORK_STATUS and WORK_COMPLETE sent in one write to the waiting client in one read, and answers the worker's next GRAB_JOB in one", async () => {
      const client = await ChunkClient.connect();
      const worker = await ChunkClient.connect();
      const fn = `batch-fwd-${process.pid}`;
      await client.request(PACKET.SUBMIT_JOB, fn, '', 'x');
      await client.chunk(1);
      expect(types(client.chunks[0]!)).toEqual([PACKET.JOB_CREATED]);
      const handle = client.chunks[0]!.toString('latin1', 12);
      await worker.requests(requestPacket(PACKET.CAN_DO, fn), requestPacket(PACKET.GRAB_JOB));
      await worker.chunk(1);
      expect(types(worker.chunks[0]!)).toEqual([PACKET.JOB_ASSIGN]);
      await worker.requests(
        requestPacket(PACKET.WORK_DATA, handle, 'part'),
        requestPacket(PACKET.WORK_STATUS, handle, '1', '2'),
        requestPacket(PACKET.WORK_COMPLETE, handle, 'done'),
        requestPacket(PACKET.GRAB_JOB),
      );
      await worker.chunk(2);
      expect(types(worker.chunks[1]!)).toEqual([PACKET.NO_JOB]);
      const forwarded = [PACKET.WORK_DATA, PACKET.WORK_STATUS, PACKET.WORK_COMPLETE];
      if (GEARMAN_IN_CLUSTER) {
        for (let n = 2; types(Buffer.concat(client.chunks.slice(1))).length < 3; n++) await client.chunk(n);
        expect(types(Buffer.concat(client.chunks.slice(1)))).toEqual(forwarded);
      } else {
        await client.chunk(2);
        expect(types(client.chunks[1]!)).toEqual(forwarded);
      }
      expect(worker.chunks).toHaveLength(2);
      client.socket.destroy();
      worker.socket.destroy();
    });
  });

  describe('beanstalkd answers in one write', () => {
    it('answers a put and a reserve written in one write in one read', async () => {
      const c = await ChunkClient.connect((server.address as { port: number }).port);
      const tube = `batch-${process.pid}`;
      await c.raw(`use ${tube}\r\nwatch ${tube}\r\nignore default\r\n`);
      for (let n = 1; Buffer.concat(c.chunks).toString().split('\r\n').length < 4; n++) await c.chunk(n);
      expect(Buffer.concat(c.chunks).toString()).toBe(`USING ${tube}\r\nWATCHING 2\r\nWATCHING 1\r\n`);
      const seen = c.chunks.length;
      await c.raw('put 0 0 60 5\r\nhello\r\nreserve-with-timeout 0\r\n');
      const expected = /^INSERTED (\d+)\r\nRESERVED \1 5\r\nhello\r\n$/;
      if (GEARMAN_IN_CLUSTER) {
        // A cluster node's put and reserve are answered by the database one after the other.
        for (let n = seen + 1; !expected.test(Buffer.concat(c.chunks.slice(seen)).toString()); n++) await c.chunk(n);
      } else {
        await c.chunk(seen + 1);
        expect(c.chunks[seen]!.toString()).toMatch(expected);
      }
      expect(c.chunks.slice(seen).map(String).join('')).toMatch(expected);
      c.socket.destroy();
    });
  });
});
