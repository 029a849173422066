import net from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { readThroughSharedBuffer } from './shared-read-buffer.js';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A server whose one accepted socket reads through the shared buffer; resolves with it and what it reads. */
async function accepting(): Promise<{ port: number; accepted: Promise<{ socket: net.Socket; engaged: boolean; reads: string[] }> }> {
  let resolveAccepted!: (v: { socket: net.Socket; engaged: boolean; reads: string[] }) => void;
  const accepted = new Promise<{ socket: net.Socket; engaged: boolean; reads: string[] }>((r) => (resolveAccepted = r));
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    sockets.push(socket);
    const reads: string[] = [];
    const engaged = readThroughSharedBuffer(socket, (chunk) => reads.push(chunk.toString('latin1')));
    resolveAccepted({ socket, engaged, reads });
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as net.AddressInfo).port, accepted };
}

const until = async (check: () => boolean): Promise<void> => {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
};

describe('readThroughSharedBuffer', () => {
  // On another Node the server falls back to 'data' events and still works; this test says when
  // the faster path is gone, so that it is noticed rather than lost quietly.
  it('engages on this Node for an accepted socket, and delivers the bytes read', async () => {
    const { port, accepted } = await accepting();
    const client = net.connect(port, '127.0.0.1');
    const { socket, engaged, reads } = await accepted;
    expect(engaged).toBe(true);
    expect(socket.listenerCount('data')).toBe(0);
    client.write('put 0 0 60 5\r\nhello\r\n');
    await until(() => reads.join('').length === 21);
    expect(reads.join('')).toBe('put 0 0 60 5\r\nhello\r\n');
    client.destroy();
  });

  // That nothing is read while paused is the server's flow control, tested end to end in
  // test/output-limit.test.ts and test/stall.test.ts.
  it('delivers after a pause and resume, and reports the peer half-closing', async () => {
    const { port, accepted } = await accepting();
    const client = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const { socket, reads } = await accepted;
    const ended = once(socket, 'end');
    socket.pause();
    expect(socket.isPaused()).toBe(true);
    client.write('stats\r\n');
    socket.resume();
    await until(() => reads.length > 0);
    expect(reads.join('')).toBe('stats\r\n');
    client.end();
    await ended;
    socket.end();
    client.destroy();
  });

  it('is not applied twice to the same socket', async () => {
    const { port, accepted } = await accepting();
    const client = net.connect(port, '127.0.0.1');
    const { socket } = await accepted;
    expect(readThroughSharedBuffer(socket, () => undefined)).toBe(false);
    client.destroy();
  });
});
