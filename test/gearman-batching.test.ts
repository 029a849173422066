/**
 * How the Gearman door's answers are batched into socket writes, on the real server: a worker's
 * result and its next request are answered together. Clients that are worker and client on one
 * connection (node-gearman) depend on it: they close when the result arrives, and reconnect when
 * an answer comes after that.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { requestPacket } from './support/gearman-client.js';
import { startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

let server: ServerProcess;
let port: number;

beforeAll(async () => {
  ({ server, port } = await startGearmanServer());
});

afterAll(async () => {
  await server.stop();
});

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

  static connect(): Promise<ChunkClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(new ChunkClient(socket)));
      socket.setNoDelay(true);
      socket.once('error', reject);
    });
  }

  /** Writes one request packet; resolves once the kernel has taken it. */
  request(type: number, ...args: string[]): Promise<void> {
    return new Promise((resolve) => this.socket.write(requestPacket(type, ...args), () => resolve()));
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
});
