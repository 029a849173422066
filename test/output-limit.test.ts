/**
 * Replies are copied into a connection's output buffer, so a client that pipelines many peeks of
 * a big job without reading must not make the server build up gigabytes: command parsing stops
 * once about 8 MiB of replies wait, and continues as the client reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';
import { yamlNumber } from './support/yaml-fields.js';

const BODY = 60_000;
const PEEKS = 2000; // 120 MB of replies if all were made at once

describe('output limit', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer('beanpole');
  });
  afterAll(async () => {
    await srv.stop();
  });

  it('stops parsing a pipeline of big peeks until the client reads, then answers every one', async () => {
    const producer = await RawClient.connect(srv.port);
    expect(await producer.call(`put 0 0 60 ${BODY}\r\n${'p'.repeat(BODY)}\r\n`)).toMatch(/^INSERTED (\d+)\r\n$/);
    const reader = await RawClient.connect(srv.port);
    reader.socket.pause(); // reads nothing for now
    reader.send('peek 1\r\n'.repeat(PEEKS));
    await new Promise((r) => setTimeout(r, 1000));
    const peeksWhileStalled = yamlNumber(await producer.call('stats\r\n'), 'cmd-peek');
    // About 8 MiB of replies (140 peeks) plus what the kernel's socket buffers hold.
    expect(peeksWhileStalled).toBeGreaterThan(0);
    expect(peeksWhileStalled).toBeLessThan(PEEKS / 2);
    reader.socket.resume();
    for (let i = 0; i < PEEKS; i++) {
      expect(await reader.reply(10_000)).toBe(`FOUND 1 ${BODY}\r\n${'p'.repeat(BODY)}\r\n`);
    }
    expect(yamlNumber(await producer.call('stats\r\n'), 'cmd-peek')).toBe(PEEKS);
    reader.destroy();
    producer.destroy();
  });
});
