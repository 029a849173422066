/**
 * With -b DIR, Gearman's background jobs survive kill -9 and a restart: function, unique id,
 * priority, run-at time and body, in the same order; completed ones stay gone; foreground jobs
 * (which die with their clients) do not come back; beanstalkd's jobs in the same directory are
 * untouched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { RawClient } from './support/raw-client.js';
import { startGearmanServer } from './support/gearman-server.js';
import { freePort, type ServerProcess } from './support/servers.js';

const dirs: string[] = [];
const servers: ServerProcess[] = [];
const clients: GearmanTestClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function start(dir: string, port: number, args: string[] = []): Promise<ServerProcess> {
  const { server } = await startGearmanServer(['-b', dir, ...args], port);
  servers.push(server);
  return server;
}

async function kill9(s: ServerProcess): Promise<void> {
  const exited = new Promise((resolve) => s.process.once('exit', resolve));
  s.signal('SIGKILL');
  await exited;
  servers.splice(servers.indexOf(s), 1);
}

async function connect(port: number): Promise<GearmanTestClient> {
  const c = await GearmanTestClient.connect(port);
  clients.push(c);
  return c;
}

async function submit(c: GearmanTestClient, type: number, ...args: string[]): Promise<string> {
  c.request(type, ...args);
  const [t, handle] = await c.args(1);
  expect(t).toBe(PACKET.JOB_CREATED);
  return handle!;
}

describe('Gearman with -b', () => {
  it('keeps a background job that --gearman-job-retries dropped gone after kill -9', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-gearman-b-'));
    dirs.push(dir);
    const port = await freePort();
    const first = await start(dir, port, ['--gearman-job-retries', '1']);
    const c = await connect(port);
    const dropped = await submit(c, PACKET.SUBMIT_JOB_BG, 'retry-fn', 'dropped', 'x');
    const w = await connect(port);
    w.request(PACKET.CAN_DO, 'retry-fn');
    w.request(PACKET.GRAB_JOB);
    expect((await w.args(3))[1]).toBe(dropped);
    w.destroy();
    // Once the worker's leave is handled the job is gone (GET_STATUS: unknown).
    let known = '1';
    for (let i = 0; i < 200 && known === '1'; i++) {
      c.request(PACKET.GET_STATUS, dropped);
      known = (await c.args(5))[2]!;
      if (known === '1') await new Promise((r) => setTimeout(r, 10));
    }
    expect(known).toBe('0');
    const kept = await submit(c, PACKET.SUBMIT_JOB_BG, 'retry-fn', 'kept', 'y');
    await kill9(first);
    await start(dir, port, ['--gearman-job-retries', '1']);
    const again = await connect(port);
    for (const [handle, expected] of [[dropped, '0'], [kept, '1']] as const) {
      again.request(PACKET.GET_STATUS, handle);
      expect((await again.args(5))[2], handle).toBe(expected);
    }
  });

  it('brings back every acknowledged background job after kill -9, in order, and nothing else', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-gearman-b-'));
    dirs.push(dir);
    const port = await freePort();
    const first = await start(dir, port);
    const beanstalk = await RawClient.connect((first.address as { port: number }).port);
    expect(await beanstalk.call('put 5 0 60 4\r\nkept\r\n')).toBe('INSERTED 1\r\n');
    beanstalk.destroy();

    const c = await connect(port);
    const types = [PACKET.SUBMIT_JOB_BG, PACKET.SUBMIT_JOB_HIGH_BG, PACKET.SUBMIT_JOB_LOW_BG];
    const rank = { [PACKET.SUBMIT_JOB_HIGH_BG]: 0, [PACKET.SUBMIT_JOB_BG]: 1, [PACKET.SUBMIT_JOB_LOW_BG]: 2 } as Record<number, number>;
    const submitted: { handle: string; rank: number; seq: number; unique: string; data: string }[] = [];
    for (let i = 0; i < 300; i++) {
      const type = types[i % 3]!;
      const unique = i % 5 === 0 ? `u-${i}` : '';
      const data = `job ${i}\0with a NUL`;
      submitted.push({ handle: await submit(c, type, 'persist', unique, data), rank: rank[type]!, seq: i, unique, data });
    }
    // A foreground job and a job to complete before the crash.
    const fg = await connect(port);
    await submit(fg, PACKET.SUBMIT_JOB, 'persist', 'fg-unique', 'foreground');
    const w = await connect(port);
    w.request(PACKET.CAN_DO, 'persist');
    w.request(PACKET.GRAB_JOB_UNIQ);
    const [, grabbed] = await w.args(4);
    w.request(PACKET.WORK_COMPLETE, grabbed!, 'done');
    w.request(PACKET.ECHO_REQ, 'sync');
    await w.packet();
    // A job that runs an hour from now.
    const later = Math.floor(Date.now() / 1000) + 3600;
    const delayed = await submit(c, PACKET.SUBMIT_JOB_EPOCH, 'persist', 'later', String(later), 'delayed');

    await kill9(first);
    const second = await start(dir, port);

    const expected = submitted
      .filter((j) => j.handle !== grabbed)
      .sort((a, b) => a.rank - b.rank || a.seq - b.seq)
      .map((j) => [PACKET.JOB_ASSIGN_UNIQ, j.handle, 'persist', j.unique, j.data]);
    const w2 = await connect(port);
    w2.request(PACKET.CAN_DO, 'persist');
    const got: unknown[] = [];
    for (;;) {
      w2.request(PACKET.GRAB_JOB_UNIQ);
      const p = await w2.packet();
      if (p.type === PACKET.NO_JOB) break;
      const [type, ...rest] = [p.type, ...splitFour(p.data)];
      got.push([type, ...rest]);
    }
    expect(got).toEqual(expected);
    // The delayed job is still waiting for its time, and its unique id still coalesces.
    const c2 = await connect(port);
    expect(await submit(c2, PACKET.SUBMIT_JOB_BG, 'persist', 'later', 'again')).toBe(delayed);
    const status = await connect(port);
    status.send('status\n');
    expect((await status.adminReply(false)).split('\n')).toContain(`persist\t${expected.length + 1}\t${expected.length}\t1`);
    // beanstalkd's job is there, with its id.
    const b2 = await RawClient.connect((second.address as { port: number }).port);
    expect(await b2.call('peek 1\r\n')).toBe('FOUND 1 4\r\nkept\r\n');
    b2.destroy();
  });
});

/** JOB_ASSIGN_UNIQ's data: handle, function, unique, then the rest (which may hold NULs). */
function splitFour(data: Buffer): string[] {
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < 3; i++) {
    const nul = data.indexOf(0, at);
    out.push(data.toString('latin1', at, nul));
    at = nul + 1;
  }
  out.push(data.toString('latin1', at));
  return out;
}
