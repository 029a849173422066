import net from 'node:net';
import { once } from 'node:events';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { immediateDurability } from '../engine/journal.js';
import { ClientLink, type LinkReader } from './client-link.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A connected pair over real TCP: the server side wrapped in a ClientLink, the client side raw. */
async function linkedPair(): Promise<{ link: ClientLink; client: net.Socket }> {
  const server = net.createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[net.Socket]>;
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const [socket] = await accepted;
  const link = new ClientLink(socket, { halfClosed: () => undefined, ended: () => undefined }, { log: pino({ level: 'silent' }), ops: { onActivity: () => undefined, durability: immediateDurability } }, Buffer.from('ERR\r\n'), Date.now);
  const reader: LinkReader = { write: () => undefined, pause: () => undefined, resume: () => undefined, paused: false, buffered: 0 };
  link.start(reader);
  cleanups.push(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  return { link, client };
}

describe('ClientLink output', () => {
  // The reply buffer reuses its memory once a write is taken whole; a write the socket had to
  // queue must stay untouched until it is sent, or a slow client would read later replies in it.
  it('delivers every reply intact to a client that reads nothing until the socket backs up', async () => {
    const { link, client } = await linkedPair();
    client.pause();
    const expected: Buffer[] = [];
    let queuedTurns = 0;
    for (let i = 0; queuedTurns < 50; i++) {
      const reply = Buffer.alloc(3000, 0x41 + (i % 26));
      reply.writeUInt32BE(i, 0);
      expected.push(reply);
      link.out.bytes(reply);
      link.out.flush();
      if (link.backlog > 0) queuedTurns++;
      if (i > 20_000) throw new Error('the socket never backed up');
    }
    const want = Buffer.concat(expected);
    const got: Buffer[] = [];
    let length = 0;
    client.on('data', (chunk: Buffer) => {
      got.push(chunk);
      length += chunk.length;
    });
    client.resume();
    while (length < want.length) await once(client, 'data');
    expect(Buffer.concat(got).equals(want)).toBe(true);
  });
});
