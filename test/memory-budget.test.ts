/**
 * Beanpole's memory budget (`--max-job-bytes N`, beyond beanstalkd): the bodies of all live jobs
 * together may use at most N bytes. A put that would exceed it gets `OUT_OF_MEMORY\r\n`, its body
 * bytes are still consumed (so the connection stays in step), and nothing else changes. Only
 * deleting jobs frees room: reserved, buried and delayed jobs keep theirs.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer, type ServerKind } from './support/servers.js';
import { targetKinds } from './support/targets.js';

const BUDGET = 1000;

function put(body: string, opts: { pri?: number; delay?: number } = {}): string {
  return `put ${opts.pri ?? 0} ${opts.delay ?? 0} 120 ${Buffer.byteLength(body, 'latin1')}\r\n${body}\r\n`;
}

function yamlNumber(reply: string, key: string): number {
  const m = new RegExp(`\\n${key}: (\\d+)\\n`).exec(reply);
  if (m === null) throw new Error(`no ${key} in ${JSON.stringify(reply.slice(0, 300))}`);
  return Number(m[1]);
}

/** The counters a refused put must not change. */
async function snapshot(c: RawClient): Promise<Record<string, number>> {
  const s = await c.call('stats\r\n');
  const t = await c.call('stats-tube default\r\n');
  return {
    'current-jobs-ready': yamlNumber(s, 'current-jobs-ready'),
    'current-jobs-reserved': yamlNumber(s, 'current-jobs-reserved'),
    'current-jobs-delayed': yamlNumber(s, 'current-jobs-delayed'),
    'current-jobs-buried': yamlNumber(s, 'current-jobs-buried'),
    'total-jobs': yamlNumber(s, 'total-jobs'),
    'tube current-jobs-ready': yamlNumber(t, 'current-jobs-ready'),
    'tube total-jobs': yamlNumber(t, 'total-jobs'),
  };
}

async function inserted(c: RawClient, body: string, opts: { pri?: number; delay?: number } = {}): Promise<number> {
  const reply = await c.call(put(body, opts));
  expect(reply, `put of ${body.length} bytes`).toMatch(/^INSERTED \d+\r\n$/);
  return Number(reply.slice(9, -2));
}

/** A put that must be refused: its reply, and the reply of the command pipelined right after it. */
async function refused(c: RawClient, body: string): Promise<void> {
  c.send(`${put(body)}list-tube-used\r\n`);
  expect(await c.reply(), `put of ${body.length} bytes over the budget`).toBe('OUT_OF_MEMORY\r\n');
  const next = await c.reply();
  expect(next, 'the command after the refused put (its body must have been consumed)').toMatch(/^USING \S+\r\n$/);
}

/** A fresh server for each test of the enclosing block, with the clients it opened closed after it. */
function serverPerTest(kind: ServerKind, args: string[], env: NodeJS.ProcessEnv = {}): { server: () => RunningServer; connect: () => Promise<RawClient> } {
  let server: RunningServer;
  const clients: RawClient[] = [];
  beforeEach(async () => {
    server = await startServer(kind, args, env);
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await server.stop();
  });
  return {
    server: () => server,
    connect: async () => {
      const c = await RawClient.connect(server.port);
      clients.push(c);
      return c;
    },
  };
}

describe.each(targetKinds().filter((k) => k === 'beanpole'))('memory budget (--max-job-bytes) on %s', (kind) => {
  const { connect } = serverPerTest(kind, ['--max-job-bytes', String(BUDGET)]);

  it('accepts puts up to the budget, then answers OUT_OF_MEMORY and changes nothing', async () => {
    const c = await connect();
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push(await inserted(c, String(i).repeat(100))); // exactly 1000 bytes
    const before = await snapshot(c);
    expect(before['current-jobs-ready']).toBe(10);
    expect(before['total-jobs']).toBe(10);

    await refused(c, 'x'); // one byte over
    await refused(c, 'y'.repeat(100));
    expect(await snapshot(c)).toEqual(before);

    // The refused body is consumed even when it looks like commands, and even when it is split
    // across writes: none of it may run.
    c.send(`put 0 0 120 ${`delete ${ids[0]}\r\n`.length}\r\n`);
    await new Promise((r) => setTimeout(r, 30));
    c.send('dele');
    await new Promise((r) => setTimeout(r, 30));
    c.send(`te ${ids[0]}\r\n\r\nlist-tube-used\r\n`);
    expect(await c.reply()).toBe('OUT_OF_MEMORY\r\n');
    expect(await c.reply()).toBe('USING default\r\n');
    expect(await c.call(`peek ${ids[0]}\r\n`)).toBe(`FOUND ${ids[0]} 100\r\n${'0'.repeat(100)}\r\n`);

    // A body larger than the whole budget (but within max-job-size), in many small writes.
    const big = `${'list-tubes\r\n'.repeat(400)}`;
    c.send(`put 0 0 120 ${big.length}\r\n`);
    for (let off = 0; off < big.length; off += 700) {
      c.send(big.slice(off, off + 700));
      await new Promise((r) => setImmediate(r));
    }
    c.send('\r\nlist-tube-used\r\n');
    expect(await c.reply()).toBe('OUT_OF_MEMORY\r\n');
    expect(await c.reply()).toBe('USING default\r\n');
    expect(c.pending.length).toBe(0);

    // The budget is global: another connection, another tube, is refused too.
    const other = await connect();
    expect(await other.call('use elsewhere\r\n')).toBe('USING elsewhere\r\n');
    await refused(other, 'z');
    expect(await other.call('stats-tube elsewhere\r\n')).toMatch(/\ncurrent-jobs-ready: 0\n[^]*\ntotal-jobs: 0\n/);
    expect(await snapshot(c)).toEqual(before);
  });

  it('frees room when jobs are deleted, and only then', async () => {
    const c = await connect();
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push(await inserted(c, 'a'.repeat(100)));
    await refused(c, 'b');

    // Deleting one 100-byte job makes room for exactly 100 bytes.
    expect(await c.call(`delete ${ids[0]}\r\n`)).toBe('DELETED\r\n');
    await refused(c, 'c'.repeat(101));
    ids[0] = await inserted(c, 'd'.repeat(100));
    await refused(c, 'e');

    // Two deletes: 200 bytes of room, filled by 150 + 50, then full again.
    expect(await c.call(`delete ${ids[1]}\r\n`)).toBe('DELETED\r\n');
    expect(await c.call(`delete ${ids[2]}\r\n`)).toBe('DELETED\r\n');
    ids[1] = await inserted(c, 'f'.repeat(150));
    await refused(c, 'g'.repeat(51));
    ids[2] = await inserted(c, 'h'.repeat(50));
    await refused(c, 'i');

    // Reserved, buried, released-with-delay and kicked jobs still hold their bytes.
    const reserved = await c.call('reserve-with-timeout 0\r\n');
    expect(reserved).toMatch(/^RESERVED \d+ \d+\r\n/);
    const rid = Number(/^RESERVED (\d+)/.exec(reserved)![1]);
    await refused(c, 'j');
    expect(await c.call(`bury ${rid} 0\r\n`)).toBe('BURIED\r\n');
    await refused(c, 'k');
    expect(await c.call('kick 1\r\n')).toBe('KICKED 1\r\n');
    await refused(c, 'l');
    expect(await c.call(`reserve-job ${rid}\r\n`)).toMatch(/^RESERVED /);
    expect(await c.call(`release ${rid} 0 1000\r\n`)).toBe('RELEASED\r\n');
    await refused(c, 'm');

    // Deleting the delayed job frees its bytes.
    const size = Number(/^FOUND \d+ (\d+)/.exec(await c.call(`peek ${rid}\r\n`))![1]);
    expect(await c.call(`delete ${rid}\r\n`)).toBe('DELETED\r\n');
    await inserted(c, 'n'.repeat(size), { delay: 1000 });
    await refused(c, 'o');
    const s = await c.call('stats\r\n');
    expect(yamlNumber(s, 'current-jobs-ready') + yamlNumber(s, 'current-jobs-delayed')).toBe(10);
  });

  it('JOB_TOO_BIG still applies above max-job-size, and one body may fill the whole budget', async () => {
    const c = await connect();
    // Over max-job-size (65535): beanstalkd's JOB_TOO_BIG still applies, after consuming the body.
    const huge = 'q'.repeat(65536);
    c.send(`put 0 0 120 ${huge.length}\r\n${huge}\r\nlist-tube-used\r\n`);
    expect(await c.reply()).toBe('JOB_TOO_BIG\r\n');
    expect(await c.reply()).toBe('USING default\r\n');
    expect(await inserted(c, 'r'.repeat(BUDGET))).toBeGreaterThan(0);
    await refused(c, 's');
  });
});

/**
 * The budget for job and tube records on the V8 heap, derived from the heap limit: under a small
 * heap (NODE_OPTIONS=--max-old-space-size=64) a flood of empty jobs, or of jobs each in a tube
 * of its own, ends in OUT_OF_MEMORY, never in V8's heap exhaustion, and the server keeps serving.
 */
describe.each(targetKinds().filter((k) => k === 'beanpole'))('heap budget under --max-old-space-size=64 on %s', (kind) => {
  const { connect, server } = serverPerTest(kind, [], { NODE_OPTIONS: '--max-old-space-size=64' });

  /**
   * Sends `command(i)` in pipelined batches until a reply is OUT_OF_MEMORY; returns how many
   * were answered `ok`. Bounded: a server that never refuses fails the test at `limit`.
   */
  async function flood(c: RawClient, command: (i: number) => string, ok: RegExp, limit: number): Promise<number> {
    const BATCH = 2000;
    let accepted = 0;
    for (let sent = 0; sent < limit; ) {
      let batch = '';
      for (let i = 0; i < BATCH; i++) batch += command(sent + i);
      c.send(batch);
      let refusedSeen = false;
      for (let i = 0; i < BATCH; i++) {
        const reply = await c.reply(30_000);
        if (reply === 'OUT_OF_MEMORY\r\n') refusedSeen = true;
        else if (ok.test(reply)) accepted++;
        else expect.fail(`unexpected reply ${JSON.stringify(reply)}`);
      }
      sent += BATCH;
      if (refusedSeen) return accepted;
    }
    return expect.fail(`no OUT_OF_MEMORY after ${limit} commands`);
  }

  it('refuses empty jobs with OUT_OF_MEMORY before the heap runs out, and keeps serving', async () => {
    const c = await connect();
    const jobs = await flood(c, () => 'put 0 0 60 0\r\n\r\n', /^INSERTED \d+\r\n$/, 2_000_000);
    // A 64 MiB heap holds tens of thousands of job records, not millions.
    expect(jobs).toBeGreaterThan(20_000);
    expect(await c.call('put 0 0 60 0\r\n\r\n')).toBe('OUT_OF_MEMORY\r\n');
    // Everything else still works: another client, stats, reserve, delete; a delete makes room.
    const other = await connect();
    expect(yamlNumber(await other.call('stats\r\n'), 'current-jobs-ready')).toBe(jobs);
    const reserved = await other.call('reserve-with-timeout 0\r\n');
    expect(reserved).toMatch(/^RESERVED \d+ 0\r\n\r\n$/);
    expect(await other.call(`delete ${/^RESERVED (\d+)/.exec(reserved)![1]}\r\n`)).toBe('DELETED\r\n');
    expect(await other.call('put 0 0 60 0\r\n\r\n')).toMatch(/^INSERTED \d+\r\n$/);
    expect(server().process.exitCode).toBeNull();
  });

  it('refuses new tubes (use, watch) and jobs in them with OUT_OF_MEMORY, as beanstalkd words it', async () => {
    const c = await connect();
    const name = (i: number): string => `tube-${i}-${'x'.repeat(60)}`;
    // Each job in a tube of its own: the tubes' records count too.
    const jobs = await flood(c, (i) => `use ${name(i)}\r\nput 0 0 60 0\r\n\r\n`, /^(USING \S+|INSERTED \d+)\r\n$/, 2_000_000);
    expect(jobs).toBeGreaterThan(5_000);
    const other = await connect();
    expect(await other.call('use brand-new-tube\r\n')).toBe('OUT_OF_MEMORY\r\n');
    expect(await other.call('watch brand-new-tube\r\n')).toBe('OUT_OF_MEMORY\r\n');
    expect(await other.call('list-tube-used\r\n')).toBe('USING default\r\n');
    // Existing tubes are still usable.
    expect(await other.call(`use ${name(0)}\r\n`)).toBe(`USING ${name(0)}\r\n`);
    expect(await other.call(`watch ${name(0)}\r\n`)).toBe('WATCHING 2\r\n');
    expect(server().process.exitCode).toBeNull();
  });
});
