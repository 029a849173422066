/**
 * The Gearman front door against the real server process on ephemeral ports: every packet
 * type, the text admin protocol, coalescing, wake-ups, CAN_DO_TIMEOUT, requeue on disconnect,
 * and Gearman's jobs staying invisible to beanstalkd clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient, requestPacket } from './support/gearman-client.js';
import { RawClient } from './support/raw-client.js';
import { startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

let server: ServerProcess;
let port: number;
const open: GearmanTestClient[] = [];

beforeAll(async () => {
  ({ server, port } = await startGearmanServer());
});

afterAll(async () => {
  for (const c of open.splice(0)) c.destroy();
  await server.stop();
});

async function connect(): Promise<GearmanTestClient> {
  const c = await GearmanTestClient.connect(port);
  open.push(c);
  return c;
}

/** A unique function name per test, so tests do not see each other's jobs. */
let fnCount = 0;
const fn = (): string => `fn-${process.pid}-${++fnCount}`;

async function submit(c: GearmanTestClient, type: number, f: string, unique: string, data: string | Buffer): Promise<string> {
  c.request(type, f, unique, data);
  const [t, handle] = await c.args(1);
  expect(t).toBe(PACKET.JOB_CREATED);
  return handle!;
}

async function worker(...functions: string[]): Promise<GearmanTestClient> {
  const w = await connect();
  for (const f of functions) w.request(PACKET.CAN_DO, f);
  return w;
}

async function grabUniq(w: GearmanTestClient): Promise<[number, ...string[]]> {
  w.request(PACKET.GRAB_JOB_UNIQ);
  return w.args(4);
}

async function admin(command: string, single = false): Promise<string> {
  const c = await connect();
  c.send(`${command}\n`);
  const reply = await c.adminReply(single);
  c.destroy();
  return reply;
}

describe('Gearman: packets', () => {
  it('echoes, takes the exceptions option and refuses others, and answers bad packets with ERROR', async () => {
    const c = await connect();
    c.request(PACKET.ECHO_REQ, Buffer.from('a\0b'));
    const echo = await c.packet();
    expect([echo.type, echo.data.toString('latin1')]).toEqual([PACKET.ECHO_RES, 'a\0b']);
    c.request(PACKET.OPTION_REQ, 'exceptions');
    expect(await c.args(1)).toEqual([PACKET.OPTION_RES, 'exceptions']);
    c.request(PACKET.OPTION_REQ, 'bogus');
    expect((await c.args(2))[0]).toBe(PACKET.ERROR);
    c.request(PACKET.JOB_CREATED, 'H:x:1');
    expect((await c.args(2)).slice(0, 2)).toEqual([PACKET.ERROR, 'INVALID_COMMAND']);
    c.request(99);
    expect((await c.args(2))[0]).toBe(PACKET.ERROR);
    const res = requestPacket(PACKET.ECHO_REQ, 'x');
    res.write('RES', 1, 'latin1');
    c.send(res);
    expect((await c.args(2)).slice(0, 2)).toEqual([PACKET.ERROR, 'INVALID_MAGIC']);
    // Still serving after all of that.
    c.request(PACKET.ECHO_REQ, 'ok');
    expect(await c.args(1)).toEqual([PACKET.ECHO_RES, 'ok']);
  });

  it('closes a connection whose packet has a bad magic, and nobody else notices', async () => {
    const bad = await connect();
    const good = await connect();
    bad.send(Buffer.from('\0XYZ\0\0\0\x10\0\0\0\0'));
    await bad.waitClosed();
    good.request(PACKET.ECHO_REQ, 'fine');
    expect(await good.args(1)).toEqual([PACKET.ECHO_RES, 'fine']);
  });

  it('runs a background job: JOB_CREATED, JOB_ASSIGN_UNIQ with function, unique and data, and it is gone after WORK_COMPLETE', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, 'u-1', Buffer.from('pay\0load'));
    expect(handle.length).toBeLessThanOrEqual(63);
    const w = await worker(f);
    expect(await grabUniq(w)).toEqual([PACKET.JOB_ASSIGN_UNIQ, handle, f, 'u-1', 'pay\0load']);
    w.request(PACKET.WORK_COMPLETE, handle, 'done');
    // WORK_COMPLETE has no answer: an echo tells the worker its packets before it were acted on
    // (a cluster node deletes the job with a statement, which another connection can overtake).
    w.request(PACKET.ECHO_REQ, 'sync');
    expect(await w.args(1)).toEqual([PACKET.ECHO_RES, 'sync']);
    c.request(PACKET.GET_STATUS, handle);
    expect(await c.args(5)).toEqual([PACKET.STATUS_RES, handle, '0', '0', '0', '0']);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
  });

  it('forwards WORK_* packets byte for byte, in order, to the client of a foreground job', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB, f, '', 'in');
    const w = await worker(f);
    w.request(PACKET.GRAB_JOB);
    expect(await w.args(3)).toEqual([PACKET.JOB_ASSIGN, handle, f, 'in']);
    w.request(PACKET.WORK_DATA, handle, Buffer.from('d\x001'));
    w.request(PACKET.WORK_WARNING, handle, 'careful');
    w.request(PACKET.WORK_STATUS, handle, '1', '2');
    w.request(PACKET.WORK_COMPLETE, handle, Buffer.from('r\0esult'));
    expect(await c.args(2)).toEqual([PACKET.WORK_DATA, handle, 'd\x001']);
    expect(await c.args(2)).toEqual([PACKET.WORK_WARNING, handle, 'careful']);
    expect(await c.args(3)).toEqual([PACKET.WORK_STATUS, handle, '1', '2']);
    expect(await c.args(2)).toEqual([PACKET.WORK_COMPLETE, handle, 'r\0esult']);
  });

  it('hands out HIGH before NORMAL before LOW, first in first out within each', async () => {
    const f = fn();
    const c = await connect();
    const low = await submit(c, PACKET.SUBMIT_JOB_LOW_BG, f, '', 'low');
    const n1 = await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'n1');
    const high = await submit(c, PACKET.SUBMIT_JOB_HIGH_BG, f, '', 'high');
    const n2 = await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'n2');
    const w = await worker(f);
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [, handle] = await grabUniq(w);
      order.push(handle!);
      w.request(PACKET.WORK_COMPLETE, handle!, '');
    }
    expect(order).toEqual([high, n1, n2, low]);
  });

  it('coalesces submits with the same function and unique id: one run, every client gets the result', async () => {
    const f = fn();
    const a = await connect();
    const b = await connect();
    const h1 = await submit(a, PACKET.SUBMIT_JOB, f, 'same', 'x');
    const h2 = await submit(b, PACKET.SUBMIT_JOB, f, 'same', 'y');
    expect(h2).toBe(h1);
    const other = await submit(b, PACKET.SUBMIT_JOB_BG, `${f}-other`, 'same', 'z');
    expect(other).not.toBe(h1);
    const w = await worker(f);
    const [, handle, , , data] = await grabUniq(w);
    expect([handle, data]).toEqual([h1, 'x']);
    w.request(PACKET.WORK_COMPLETE, h1, 'both');
    expect(await a.args(2)).toEqual([PACKET.WORK_COMPLETE, h1, 'both']);
    expect(await b.args(2)).toEqual([PACKET.WORK_COMPLETE, h1, 'both']);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
    // After it finished, the same unique id makes a new job.
    const h3 = await submit(a, PACKET.SUBMIT_JOB_BG, f, 'same', 'again');
    expect(h3).not.toBe(h1);
  });

  it('wakes each sleeping worker that can do the function with one NOOP, and no other', async () => {
    const f = fn();
    const sleepers = [await worker(f), await worker(f)];
    const busy = await worker(f);
    const elsewhere = await worker(`${f}-x`);
    for (const s of [...sleepers, elsewhere]) s.request(PACKET.PRE_SLEEP);
    await new Promise((r) => setTimeout(r, 50));
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'wake');
    for (const s of sleepers) expect((await s.packet()).type).toBe(PACKET.NOOP);
    expect(await busy.silentFor(100)).toBe(true);
    expect(await elsewhere.silentFor(0)).toBe(true);
    // A worker that goes to sleep while a job waits is woken at once.
    const late = await worker(f);
    late.request(PACKET.PRE_SLEEP);
    expect((await late.packet()).type).toBe(PACKET.NOOP);
    // A worker asleep before it registers the function is woken once it does.
    const f2 = fn();
    const early = await worker();
    early.request(PACKET.PRE_SLEEP);
    await submit(c, PACKET.SUBMIT_JOB_BG, f2, '', 'later');
    early.request(PACKET.CAN_DO, f2);
    expect((await early.packet()).type).toBe(PACKET.NOOP);
  });

  it('puts a job back at the head of its queue when its worker disconnects, under the same handle', async () => {
    const f = fn();
    const c = await connect();
    const first = await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'first');
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'second');
    const w1 = await worker(f);
    expect((await grabUniq(w1))[1]).toBe(first);
    w1.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const w2 = await worker(f);
    expect((await grabUniq(w2))[1]).toBe(first);
  });

  it('requeues a job that overruns CAN_DO_TIMEOUT, and answers the late result with JOB_NOT_FOUND', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'slow');
    const w = await connect();
    w.request(PACKET.CAN_DO_TIMEOUT, f, '100');
    expect((await grabUniq(w))[1]).toBe(handle);
    let running = '1';
    for (let i = 0; i < 100 && running === '1'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      c.request(PACKET.GET_STATUS, handle);
      running = (await c.args(5))[3]!;
    }
    expect(running).toBe('0');
    w.request(PACKET.WORK_COMPLETE, handle, 'late');
    expect((await w.args(2)).slice(0, 2)).toEqual([PACKET.ERROR, 'JOB_NOT_FOUND']);
    const w2 = await worker(f);
    expect((await grabUniq(w2))[1]).toBe(handle);
  });

  it('drops a foreground job whose only client left before it started', async () => {
    const f = fn();
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB, f, '', 'orphan');
    c.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const w = await worker(f);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
  });

  it('keeps a background job that a foreground submit joined when that client leaves', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, 'bg-first', 'x');
    const fg = await connect();
    expect(await submit(fg, PACKET.SUBMIT_JOB, f, 'bg-first', 'y')).toBe(handle);
    fg.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const w = await worker(f);
    expect((await grabUniq(w))[1]).toBe(handle);
  });

  it('does not run again a foreground job whose client left while it ran and whose worker then left', async () => {
    const f = fn();
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB, f, '', 'abandoned');
    const w1 = await worker(f);
    await grabUniq(w1);
    c.destroy();
    await new Promise((r) => setTimeout(r, 50));
    w1.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const w2 = await worker(f);
    w2.request(PACKET.GRAB_JOB);
    expect((await w2.packet()).type).toBe(PACKET.NO_JOB);
  });

  it('does not hand a sleeping worker the job of a connection that was its client and its worker and left while running it', async () => {
    const f = fn();
    // Workers asleep on the function: the job coming back to the queue wakes them at once.
    const sleepers = await Promise.all([worker(f), worker(f), worker(f)]);
    for (const w of sleepers) {
      w.request(PACKET.ECHO_REQ, 'registered');
      expect(await w.args(1)).toEqual([PACKET.ECHO_RES, 'registered']);
      w.request(PACKET.PRE_SLEEP);
    }
    const both = await worker(f);
    await submit(both, PACKET.SUBMIT_JOB, f, '', 'for itself');
    both.request(PACKET.GRAB_JOB);
    expect((await both.args(3))[0]).toBe(PACKET.JOB_ASSIGN);
    both.destroy();
    // The job comes back to the queue and wakes the sleepers, who grab at once; none is given
    // it: its only client has gone, so the first take drops it.
    for (const w of sleepers) expect((await w.packet()).type).toBe(PACKET.NOOP);
    for (const w of sleepers) w.request(PACKET.GRAB_JOB);
    for (const w of sleepers) expect((await w.packet()).type).toBe(PACKET.NO_JOB);
  });

  it('answers GET_STATUS with what WORK_STATUS said, from any connection', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'x');
    c.request(PACKET.GET_STATUS, handle);
    expect(await c.args(5)).toEqual([PACKET.STATUS_RES, handle, '1', '0', '0', '0']);
    const w = await worker(f);
    await grabUniq(w);
    w.request(PACKET.WORK_STATUS, handle, '3', '7');
    await new Promise((r) => setTimeout(r, 50));
    const other = await connect();
    other.request(PACKET.GET_STATUS, handle);
    expect(await other.args(5)).toEqual([PACKET.STATUS_RES, handle, '1', '1', '3', '7']);
    other.request(PACKET.GET_STATUS, 'H:nowhere:1');
    expect(await other.args(5)).toEqual([PACKET.STATUS_RES, 'H:nowhere:1', '0', '0', '0', '0']);
  });

  it('tells a client without the exceptions option that the job failed, and one with it the exception', async () => {
    const f = fn();
    const plain = await connect();
    const keen = await connect();
    keen.request(PACKET.OPTION_REQ, 'exceptions');
    await keen.packet();
    const h1 = await submit(plain, PACKET.SUBMIT_JOB, f, '', 'a');
    const h2 = await submit(keen, PACKET.SUBMIT_JOB, f, '', 'b');
    const w = await worker(f);
    for (const h of [h1, h2]) {
      expect((await grabUniq(w))[1]).toBe(h);
      w.request(PACKET.WORK_EXCEPTION, h, 'boom');
    }
    const failed = await plain.packet();
    expect([failed.type, failed.data.toString('latin1')]).toEqual([PACKET.WORK_FAIL, `${h1}\0`]);
    expect(await keen.args(2)).toEqual([PACKET.WORK_EXCEPTION, h2, 'boom']);
  });

  it('answers GRAB_JOB_ALL with JOB_ASSIGN_UNIQ, as gearmand does without a reducer', async () => {
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, 'uu', 'data');
    const w = await worker(f);
    w.request(PACKET.GRAB_JOB_ALL);
    expect(await w.args(4)).toEqual([PACKET.JOB_ASSIGN_UNIQ, handle, f, 'uu', 'data']);
  });

  it('runs SUBMIT_JOB_EPOCH at its time: a past one now, a future one not before', async () => {
    const f = fn();
    const c = await connect();
    c.request(PACKET.SUBMIT_JOB_EPOCH, f, '', '1000', 'past');
    const [, past] = await c.args(1);
    const soon = Math.floor(Date.now() / 1000) + 2;
    c.request(PACKET.SUBMIT_JOB_EPOCH, f, '', String(soon), 'future');
    const [, future] = await c.args(1);
    const w = await worker(f);
    expect((await grabUniq(w))[1]).toBe(past);
    w.request(PACKET.GRAB_JOB);
    expect((await w.packet()).type).toBe(PACKET.NO_JOB);
    let got: string | undefined;
    while (got === undefined && Date.now() < (soon + 3) * 1000) {
      await new Promise((r) => setTimeout(r, 100));
      const [type, handle] = await grabUniq(w).then((a) => a, () => [0] as [number]);
      if (type === PACKET.JOB_ASSIGN_UNIQ) got = handle;
    }
    expect(got).toBe(future);
    expect(Date.now()).toBeGreaterThanOrEqual(soon * 1000);
  });
});

describe('Gearman: text admin protocol', () => {
  it('status counts queued and running jobs and registered workers per function', async () => {
    const f = fn();
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', '1');
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', '2');
    const w = await worker(f);
    await grabUniq(w);
    const status = await admin('status');
    expect(status.endsWith('.\n')).toBe(true);
    expect(status.split('\n')).toContain(`${f}\t2\t1\t1`);
  });

  it('workers lists connections with client ids and functions', async () => {
    const f = fn();
    const w = await worker(f, `${f}-b`);
    w.request(PACKET.SET_CLIENT_ID, 'my-worker');
    w.request(PACKET.ECHO_REQ, 'sync');
    await w.packet();
    const lines = (await admin('workers')).split('\n');
    expect(lines.some((l) => / 127\.0\.0\.1 my-worker : /.test(l) && l.endsWith(` ${f} ${f}-b`))).toBe(true);
  });

  it('maxqueue limits a function: a submit beyond it gets ERROR and is not queued', async () => {
    const f = fn();
    expect(await admin(`maxqueue ${f} 1`, true)).toBe('OK\r\n');
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', '1');
    c.request(PACKET.SUBMIT_JOB_BG, f, '', '2');
    expect((await c.args(2))[0]).toBe(PACKET.ERROR);
    expect((await admin('status')).split('\n')).toContain(`${f}\t1\t0\t0`);
    expect(await admin(`MAXQUEUE ${f}`, true)).toBe('OK\r\n');
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', '2');
  });

  it('verbose names the log level in gearmand\'s words', async () => {
    expect(await admin('verbose', true)).toBe('OK INFO\n');
  });

  it('maxqueue with a limit per priority refuses only the submits over their own limit', async () => {
    const f = fn();
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'n1');
    expect(await admin(`maxqueue ${f} 3 1 0`, true)).toBe('OK\r\n');
    c.request(PACKET.SUBMIT_JOB_BG, f, '', 'n2');
    expect(await c.args(2)).toEqual([PACKET.ERROR, 'QUEUE_ERROR', 'Job queue is full']);
    await submit(c, PACKET.SUBMIT_JOB_HIGH_BG, f, '', 'h1');
    await submit(c, PACKET.SUBMIT_JOB_LOW_BG, f, '', 'l1');
    await submit(c, PACKET.SUBMIT_JOB_LOW_BG, f, '', 'l2');
    expect((await admin('prioritystatus')).split('\n')).toContain(`${f}\t1\t1\t2\t0`);
    expect(await admin(`maxqueue ${f} 1 2 3 4`, true)).toMatch(/^ERR INVALID_ARGUMENTS /);
  });

  it('version, getpid, show jobs, show unique jobs, cancel job, and ERR for the unknown', async () => {
    expect(await admin('version', true)).toMatch(/^OK \S+\n$/);
    expect(await admin('getpid', true)).toBe(`OK ${server.process.pid}\n`);
    const f = fn();
    const c = await connect();
    const handle = await submit(c, PACKET.SUBMIT_JOB_BG, f, 'unique-one', 'x');
    expect((await admin('show jobs')).split('\n')).toContain(`${handle}\t0\t0\t1`);
    expect((await admin('show unique jobs')).split('\n')).toContain('unique-one');
    expect(await admin(`cancel job ${handle}`, true)).toBe('OK\r\n');
    c.request(PACKET.GET_STATUS, handle);
    expect((await c.args(5))[2]).toBe('0');
    expect(await admin('bogus', true)).toBe('ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n');
    expect(await admin(`cancel job ${handle}`, true)).toBe('ERR UNKNOWN_JOB\r\n');
  });
});

describe('Gearman: hostile input', () => {
  it('survives random and mutated packets on many connections while a well-behaved client is served', async () => {
    let seed = 20261125;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const good = await connect();
    const types = [0, 1, 2, 3, 4, 7, 9, 12, 13, 15, 16, 18, 22, 23, 26, 30, 33, 36, 39, 99, 2 ** 31];
    for (let round = 0; round < 20; round++) {
      const bad = await connect();
      let bytes = Buffer.alloc(0);
      for (let i = 0; i < 50; i++) {
        const choice = rand(4);
        let piece: Buffer;
        if (choice === 0) piece = Buffer.from(Array.from({ length: rand(40) }, () => rand(256)));
        else if (choice === 1) piece = Buffer.from(`${['status', 'workers', 'show jobs', 'maxqueue x 1', 'bogus', 'cancel job H:x:1'][rand(6)]}\n`);
        else {
          const args = Array.from({ length: rand(5) }, () => Buffer.from(Array.from({ length: rand(10) }, () => rand(256))));
          piece = requestPacket(types[rand(types.length)]!, ...args);
          // Sometimes lie about the size.
          if (choice === 3 && piece.length >= 12) piece.writeUInt32BE(rand(2 ** 20), 8);
        }
        bytes = Buffer.concat([bytes, piece]);
      }
      bad.send(bytes);
      good.request(PACKET.ECHO_REQ, `round ${round}`);
      expect(await good.args(1)).toEqual([PACKET.ECHO_RES, `round ${round}`]);
      bad.destroy();
    }
    const after = await connect();
    after.request(PACKET.ECHO_REQ, 'alive');
    expect(await after.args(1)).toEqual([PACKET.ECHO_RES, 'alive']);
  });
});

describe('Gearman: --gearman-max-size', () => {
  it('bounds job data by its own limit, not by -z, and a worker can send back as much as was submitted', async () => {
    const limited = await startGearmanServer(['-z', '100', '--gearman-max-size', '2000']);
    const c = await GearmanTestClient.connect(limited.port);
    const w = await GearmanTestClient.connect(limited.port);
    try {
      const f = fn();
      const tooLarge = [PACKET.ERROR, 'ARGUMENT_TOO_LARGE', 'Packet is larger than the server accepts'];
      // 2,000 bytes of data (far over -z 100) with the longest unique id: taken.
      const data = Buffer.alloc(2000, 'd');
      c.request(PACKET.SUBMIT_JOB, f, 'u'.repeat(64), data);
      const [, handle] = await c.args(1);
      // One byte more is refused, and the connection carries on.
      c.request(PACKET.SUBMIT_JOB_BG, f, '', Buffer.alloc(2001, 'd'));
      expect(await c.args(2)).toEqual(tooLarge);
      // So is a packet over the limit and the room for its other arguments (refused as it arrives).
      c.request(PACKET.ECHO_REQ, Buffer.alloc(2000 + 1025, 'e'));
      expect(await c.args(2)).toEqual(tooLarge);
      c.request(PACKET.ECHO_REQ, 'still here');
      expect(await c.args(1)).toEqual([PACKET.ECHO_RES, 'still here']);
      // A worker echoes the whole data back under the job's handle, which may be longer than the function name.
      w.request(PACKET.CAN_DO, f);
      w.request(PACKET.GRAB_JOB);
      expect(await w.args(3)).toEqual([PACKET.JOB_ASSIGN, handle, f, data.toString('latin1')]);
      w.request(PACKET.WORK_COMPLETE, handle!, data);
      expect(await c.args(2)).toEqual([PACKET.WORK_COMPLETE, handle, data.toString('latin1')]);
    } finally {
      c.destroy();
      w.destroy();
      await limited.server.stop();
    }
  });
});

describe('Gearman beside beanstalkd', () => {
  it("keeps Gearman's jobs and functions out of every beanstalkd reply", async () => {
    const f = fn();
    const c = await connect();
    await submit(c, PACKET.SUBMIT_JOB_BG, f, '', 'hidden');
    const b = await RawClient.connect((server.address as { port: number }).port);
    expect(await b.call('list-tubes\r\n')).toBe('OK 14\r\n---\n- default\n\r\n');
    expect(await b.call('peek 1\r\n')).toBe('NOT_FOUND\r\n');
    const stats = await b.call('stats\r\n');
    expect(stats).toContain('\ncurrent-jobs-ready: 0\n');
    expect(stats).toContain('\ntotal-jobs: 0\n');
    expect(await b.call('put 0 0 1 1\r\nx\r\n')).toBe('INSERTED 1\r\n');
    b.destroy();
  });
});
