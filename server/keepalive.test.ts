import net from 'node:net';
import { getKeepAliveInterval, getKeepAliveProbes } from 'net-keepalive';
import { afterEach, describe, expect, it } from 'vitest';
import { keepAliveTuner, type SocketTuner } from './keepalive.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

/** A real accepted socket of a real listener, tuned by `tune`: what the tuner set, read back with getsockopt. */
async function acceptedWith(tune: SocketTuner): Promise<{ intervalMs: number; probes: number }> {
  const accepted = new Promise<net.Socket>((resolve) => {
    const server = net.createServer((socket) => {
      tune(socket);
      resolve(socket);
    });
    open.push({ close: () => server.close() });
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      client.on('error', () => undefined);
      open.push({ close: () => client.destroy() });
    });
  });
  const socket = await accepted;
  open.push({ close: () => socket.destroy() });
  return { intervalMs: getKeepAliveInterval(socket), probes: getKeepAliveProbes(socket) };
}

describe('keepAliveTuner', () => {
  it('sets TCP_KEEPINTVL and TCP_KEEPCNT on an accepted socket', async () => {
    const tune = await keepAliveTuner({ idleSec: 7, intervalSec: 3, count: 4 }, () => undefined);
    expect(await acceptedWith(tune)).toMatchObject({ intervalMs: 3000, probes: 4 });
  });

  it('leaves the OS setting of what was not asked for', async () => {
    const untouched = await acceptedWith(() => undefined);
    const tune = await keepAliveTuner({ idleSec: null, intervalSec: null, count: 5 }, () => undefined);
    const tuned = await acceptedWith(tune);
    expect(tuned.probes).toBe(5);
    expect(tuned.intervalMs).toBe(untouched.intervalMs);
  });
});
