/**
 * The operations interface lets a store answer later (a database will). This runs the real
 * beanstalk front door, on a real socket, over the in-memory store wrapped so that every
 * operation that may be asynchronous answers with a promise settled a random number of turns
 * later, and checks that a pipelined conversation gets byte for byte the replies the plain
 * in-memory store gives, in command order.
 */
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { FakeClock } from '../server/engine/clock.js';
import { Engine } from '../server/engine/engine.js';
import { immediateDurability } from '../server/engine/journal.js';
import { MemoryOperations } from '../server/operations/memory-operations.js';
import type { ClientDelegate, ClientOperations, Operations } from '../server/operations/operations.js';
import { BeanstalkServer } from '../server/protocol/beanstalk/server.js';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { LocalGearmanRegistry } from '../server/gearman/registry.js';
import { GearmanServer } from '../server/protocol/gearman/server.js';
import { TEST_SERVER_INFO as INFO } from '../server/testing.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { RawClient } from './support/raw-client.js';


/** Methods that answer at once by contract (no promise allowed), on both interfaces. */
const IMMEDIATE = new Set([
  'isTooBig',
  'now',
  'count',
  'onDraining',
  'attachWatcher',
  'detachWatcher',
  'watcherCount',
  'report',
  'usedTube',
  'watchedTubes',
  'admitPut',
  'setHold',
  'halfClose',
  'onActivity',
]);

let turnSeed = 12345;
/** A promise of `value` settled 0 to 3 turns of the event loop later. */
function later<T>(value: T): Promise<T> {
  turnSeed = (turnSeed * 1103515245 + 12345) % 2 ** 31;
  let turns = turnSeed % 4;
  return new Promise((resolve) => {
    const step = (): void => {
      if (turns-- <= 0) resolve(value);
      else setImmediate(step);
    };
    step();
  });
}

/**
 * A promise of `value` settled on the next turn together with every other answer of this turn,
 * in one callback, as a database statement answers a batch of clients' commands.
 */
let batch: (() => void)[] = [];
function batched<T>(value: T): Promise<T> {
  return new Promise((resolve) => {
    if (batch.length === 0) {
      setImmediate(() => {
        const settled = batch;
        batch = [];
        for (const settle of settled) settle();
      });
    }
    batch.push(() => resolve(value));
  });
}

/** `target` with every method not in IMMEDIATE answering through a promise (`settle`). */
function deferred<T extends object>(target: T, settle: <V>(value: V) => Promise<V> = later): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const member: unknown = Reflect.get(obj, prop, receiver);
      if (typeof member !== 'function' || IMMEDIATE.has(String(prop))) {
        return typeof member === 'function' ? member.bind(obj) : member;
      }
      const method = member as (...args: unknown[]) => unknown;
      return (...args: unknown[]): unknown => {
        const result = method.apply(obj, args);
        return result instanceof Promise ? result.then(settle) : settle(result);
      };
    },
  });
}

/** The in-memory operations as an asynchronous store would answer them. */
function asynchronous(ops: Operations, settle: <V>(value: V) => Promise<V> = later): Operations {
  const wrapped = deferred(ops, settle);
  return new Proxy(wrapped, {
    get(obj, prop, receiver) {
      if (prop === 'connect') {
        return (delegate: ClientDelegate, peer: string): ClientOperations => deferred(ops.connect(delegate, peer), settle);
      }
      return Reflect.get(obj, prop, receiver);
    },
  });
}

const servers: BeanstalkServer[] = [];
const gearmanServers: GearmanServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const s of gearmanServers.splice(0)) await s.close();
});

async function serve(async: boolean, settle: <V>(value: V) => Promise<V> = later): Promise<number> {
  const engine = new Engine({ clock: new FakeClock(1_700_000_000_000), maxJobSize: 1000 });
  const memory = new MemoryOperations({ engine, durability: immediateDurability, onActivity: () => undefined });
  const server = new BeanstalkServer({
    ops: async ? asynchronous(memory, settle) : memory,
    info: INFO,
    log: pino({ level: 'silent' }),
  });
  servers.push(server);
  const where = await server.listen('127.0.0.1', 0);
  return Number(where.split(':').pop());
}

/** A pipelined conversation touching every command, sent in one write; ends with quit. */
function conversation(): string {
  let s = 'use work\r\nwatch work\r\nignore default\r\n';
  for (let i = 0; i < 30; i++) s += `put ${i % 3} 0 ${i % 2} ${String(i).length}\r\n${i}\r\n`;
  s += 'put 0 0 1 2000\r\n' + 'x'.repeat(2000) + '\r\n'; // JOB_TOO_BIG
  s += 'peek-ready\r\npeek 3\r\nstats-job 3\r\nstats-tube work\r\nlist-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\n';
  for (let i = 0; i < 10; i++) s += 'reserve-with-timeout 0\r\n';
  s += 'bury 1 5\r\nbury 2 5\r\nrelease 3 1 0\r\ndelete 4\r\ntouch 5\r\nrelease 6 0 10\r\npeek-buried\r\npeek-delayed\r\n';
  s += 'kick 1\r\nkick 10\r\nkick-job 6\r\nreserve-job 7\r\npause-tube work 0\r\nstats-tube nowhere\r\ndelete 999\r\n';
  s += 'reserve\r\nignore work\r\nwatch other\r\nlist-tubes-watched\r\nbogus\r\nquit\r\n';
  return s;
}

describe('a beanstalk connection over a store that answers later', () => {
  it('gets the same replies, in command order, as over the in-memory store', async () => {
    const outputs: string[] = [];
    for (const async of [false, true]) {
      const port = await serve(async);
      const c = await RawClient.connect(port);
      c.send(conversation());
      outputs.push(await c.waitClosed(10_000));
    }
    expect(outputs[0]).toContain('JOB_TOO_BIG\r\n');
    expect(outputs[0]!.match(/\r\n/g)!.length).toBeGreaterThan(70);
    expect(outputs[1]).toBe(outputs[0]);
  });

  it('keeps a large pipeline in order and serves a blocked reserve when a job arrives', async () => {
    const port = await serve(true);
    const worker = await RawClient.connect(port);
    worker.send('reserve\r\nlist-tube-used\r\n');
    const producer = await RawClient.connect(port);
    let s = '';
    for (let i = 0; i < 500; i++) s += `put 0 0 60 ${String(i).length}\r\n${i}\r\n`;
    producer.send(s);
    for (let i = 0; i < 500; i++) expect(await producer.reply()).toBe(`INSERTED ${i + 1}\r\n`);
    expect(await worker.reply()).toBe('RESERVED 1 1\r\n0\r\n');
    expect(await worker.reply()).toBe('USING default\r\n');
    worker.destroy();
    producer.destroy();
  });

  it('sends the replies to answers that came in one turn in one socket write', async () => {
    // A statement answering 40 pipelined puts settles 40 promises in one callback: their
    // replies leave together (a write each would cost a system call and a wake-up each).
    const port = await serve(true, batched);
    const producer = await RawClient.connect(port);
    // The server's writes to this client (client and server share this process, so the
    // client's reads would merge them whatever the server did).
    const clientPort = producer.socket.localPort;
    const write = net.Socket.prototype.write;
    let writes = 0;
    const spy = vi.spyOn(net.Socket.prototype, 'write').mockImplementation(function (this: net.Socket, ...args: Parameters<net.Socket['write']>) {
      if (this.remotePort === clientPort) writes++;
      return write.apply(this, args);
    });
    try {
      producer.send(`put 0 0 60 1\r\nx\r\n`.repeat(40));
      for (let i = 0; i < 40; i++) expect(await producer.reply()).toBe(`INSERTED ${i + 1}\r\n`);
    } finally {
      spy.mockRestore();
    }
    // The parser reads the whole pipeline at once and the store answers it in one turn: one
    // write, or a few if the pipeline arrived in pieces; never one per reply.
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThanOrEqual(3);
    producer.destroy();
  });

  it('keeps reading after a reserve that a job ends before the store has said it waits', async () => {
    // The store answers 'waiting' 0-3 turns late; a put sent at once often lands in between.
    const port = await serve(true);
    const producer = await RawClient.connect(port);
    for (let i = 0; i < 30; i++) {
      const worker = await RawClient.connect(port);
      worker.send('reserve\r\nlist-tube-used\r\n');
      producer.send('put 0 0 60 1\r\nx\r\n');
      expect(await producer.reply()).toMatch(/^INSERTED \d+\r\n$/);
      expect(await worker.reply()).toMatch(/^RESERVED \d+ 1\r\nx\r\n$/);
      expect(await worker.reply()).toBe('USING default\r\n');
      worker.end();
      expect(await worker.waitClosed()).toBe('');
    }
    producer.destroy();
  });
});

/**
 * Sockets read into one shared buffer, so a packet's bytes are valid only while it is handled:
 * whatever the answer of a store that answers later needs must have been copied. Here the store
 * holds every answer until the test opens a gate, and another client's packet is read (over the
 * same buffer) meanwhile.
 */
describe('a Gearman connection over a store that answers later', () => {
  it("keeps a WORK_STATUS's values and a GET_STATUS's handle while other clients' bytes are read", async () => {
    let gate: Promise<void> = Promise.resolve();
    const gated = <V>(value: V): Promise<V> => gate.then(() => value);
    const engine = new Engine({ clock: new FakeClock(1_700_000_000_000), maxJobSize: 1000 });
    const memory = new MemoryOperations({ engine, durability: immediateDurability, onActivity: () => undefined });
    const ops = asynchronous(memory, gated);
    const registry = new LocalGearmanRegistry(ops, 'test');
    const server = new GearmanServer({ ops, registry, log: pino({ level: 'silent' }), version: 'test', pid: 1, logLevel: 'silent', roundRobin: false, shutdown: () => undefined });
    gearmanServers.push(server);
    const port = Number((await server.listen('127.0.0.1', 0)).split(':').pop());
    const client = await GearmanTestClient.connect(port);
    const worker = await GearmanTestClient.connect(port);
    const other = await GearmanTestClient.connect(port);

    client.request(PACKET.SUBMIT_JOB, 'fn', '', 'data');
    const [, handle] = await client.args(1);
    worker.request(PACKET.CAN_DO, 'fn');
    worker.request(PACKET.GRAB_JOB);
    expect((await worker.packet()).type).toBe(PACKET.JOB_ASSIGN);

    // Each answer waits at the gate while another client's packet is read into the same buffer.
    const whileHeld = async (send: () => void): Promise<void> => {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      send();
      other.request(PACKET.ECHO_REQ, 'Z'.repeat(64));
      expect((await other.packet()).type).toBe(PACKET.ECHO_RES);
      open();
    };

    await whileHeld(() => worker.request(PACKET.WORK_STATUS, handle!, '3', '7'));
    const update = await client.packet();
    expect(update.type).toBe(PACKET.WORK_STATUS);
    expect(update.data.toString('latin1')).toBe(`${handle}\u00003\u00007`);

    await whileHeld(() => client.request(PACKET.GET_STATUS, handle!));
    const status = await client.packet();
    expect(status.type).toBe(PACKET.STATUS_RES);
    expect(status.data.toString('latin1')).toBe(`${handle}\u00001\u00001\u00003\u00007`);

    // A function with a queue limit: the submit waits for the tube's counts before it is made.
    client.send('maxqueue capped 10\n');
    expect(await client.adminReply(true)).toBe('OK\r\n');
    await whileHeld(() => client.request(PACKET.SUBMIT_JOB_BG, 'capped', 'u1', 'payload'));
    expect((await client.packet()).type).toBe(PACKET.JOB_CREATED);
    worker.request(PACKET.CAN_DO, 'capped');
    worker.request(PACKET.GRAB_JOB_UNIQ);
    const assigned = await worker.packet();
    expect(assigned.type).toBe(PACKET.JOB_ASSIGN_UNIQ);
    expect(assigned.data.toString('latin1').split('\0').slice(1)).toEqual(['capped', 'u1', 'payload']);
    for (const c of [client, worker, other]) c.destroy();
  });
});
