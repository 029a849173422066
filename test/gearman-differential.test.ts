/**
 * Differential tests of the Gearman door: the same conversations, packet for packet, against
 * Debian's gearmand 1.1.20 and against Beanpole, in the same run; the transcripts of what each
 * server answered must be equal. Handles differ by host name and counter, so each transcript
 * names a handle by the order it first appeared in (H#1, H#2 ...). Only conversations whose
 * answers the protocol document specifies are compared (gearmand's known departures from it,
 * such as its unenforced `maxqueue`, are covered in gearman.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { hasGearmand, startGearmand, type Gearmand } from './support/gearmand.js';
import { startGearmanServer } from './support/gearman-server.js';
import type { ServerProcess } from './support/servers.js';

const HAS_GEARMAND = await hasGearmand();

let beanpole: ServerProcess;
let beanpolePort: number;
let gearmand: Gearmand;

beforeAll(async () => {
  if (!HAS_GEARMAND) return;
  ({ server: beanpole, port: beanpolePort } = await startGearmanServer());
  gearmand = await startGearmand();
});

afterAll(async () => {
  await beanpole?.stop();
  await gearmand?.stop();
});

/** One conversation with one server: connections, and the transcript of what came back. */
class Talk {
  readonly lines: string[] = [];
  private readonly handles: string[] = [];
  private readonly clients: GearmanTestClient[] = [];

  constructor(
    private readonly port: number,
    /** Makes function names unique per conversation, so cases never see each other's jobs. */
    private readonly prefix: string,
  ) {}

  fn(n = 0): string {
    return `${this.prefix}-${n}`;
  }

  async conn(): Promise<GearmanTestClient> {
    const c = await GearmanTestClient.connect(this.port);
    this.clients.push(c);
    return c;
  }

  /** The n-th handle seen (1-based), as the server spelled it. */
  handle(n: number): string {
    return this.handles[n - 1]!;
  }

  /** Reads one packet and writes it to the transcript with handles and names made comparable. */
  async read(c: GearmanTestClient, label: string): Promise<void> {
    const p = await c.packet();
    let text = p.data.toString('latin1');
    text = text.replace(/H:[^\0\s]*:\d+/g, (h) => {
      if (!this.handles.includes(h)) this.handles.push(h);
      return `H#${this.handles.indexOf(h) + 1}`;
    });
    text = text.split(this.prefix).join('F');
    this.lines.push(`${label} <- ${p.type} ${JSON.stringify(text)}`);
  }

  /**
   * Sends a text admin command and writes its reply to the transcript: of a listing, only the
   * lines of this conversation's functions (others' functions and their order differ by server).
   */
  async admin(c: GearmanTestClient, label: string, command: string, single: boolean): Promise<void> {
    c.send(`${command.split('F').join(this.prefix)}\r\n`);
    const reply = await c.adminReply(single);
    const lines = single ? [reply] : reply.split('\n').filter((l) => l.startsWith(this.prefix) || l === '.');
    this.lines.push(`${label} <- ${JSON.stringify(lines.join('\n').split(this.prefix).join('F'))}`);
  }

  /** Waits a moment so packets sent on different connections arrive in the intended order. */
  async settle(): Promise<void> {
    await new Promise((r) => setTimeout(r, 30));
  }

  close(): void {
    for (const c of this.clients) c.destroy();
  }
}

type Conversation = (t: Talk) => Promise<void>;

const CONVERSATIONS: Record<string, Conversation> = {
  'echo of binary data, and the exceptions option': async (t) => {
    const c = await t.conn();
    c.request(PACKET.ECHO_REQ, Buffer.from([0, 1, 2, 0, 255]));
    await t.read(c, 'c');
    c.request(PACKET.OPTION_REQ, 'exceptions');
    await t.read(c, 'c');
    c.request(PACKET.OPTION_REQ, 'nope');
    await t.read(c, 'c');
  },
  'a response type sent as a request': async (t) => {
    const c = await t.conn();
    c.request(PACKET.JOB_CREATED, 'H:x:1');
    await t.read(c, 'c');
    c.request(PACKET.NOOP);
    await t.read(c, 'c');
    c.request(PACKET.ECHO_RES, 'x');
    await t.read(c, 'c');
  },
  'a background job from submit to completion, with GET_STATUS at each step': async (t) => {
    const c = await t.conn();
    const w = await t.conn();
    c.request(PACKET.SUBMIT_JOB_BG, t.fn(), 'uniq', 'data\0bytes');
    await t.read(c, 'c');
    c.request(PACKET.GET_STATUS, t.handle(1));
    await t.read(c, 'c');
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.GRAB_JOB_UNIQ);
    await t.read(w, 'w');
    w.request(PACKET.WORK_STATUS, t.handle(1), '5', '10');
    await t.settle();
    c.request(PACKET.GET_STATUS, t.handle(1));
    await t.read(c, 'c');
    w.request(PACKET.WORK_COMPLETE, t.handle(1), 'result');
    await t.settle();
    c.request(PACKET.GET_STATUS, t.handle(1));
    await t.read(c, 'c');
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
  },
  'a foreground job streams WORK_* packets to its client in order': async (t) => {
    const c = await t.conn();
    const w = await t.conn();
    c.request(PACKET.SUBMIT_JOB, t.fn(), '', 'in');
    await t.read(c, 'c');
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
    w.request(PACKET.WORK_DATA, t.handle(1), Buffer.from('chunk\0one'));
    w.request(PACKET.WORK_WARNING, t.handle(1), 'warn');
    w.request(PACKET.WORK_STATUS, t.handle(1), '1', '3');
    w.request(PACKET.WORK_COMPLETE, t.handle(1), 'end');
    for (let i = 0; i < 4; i++) await t.read(c, 'c');
  },
  'priorities: high, normal, low, first in first out within each': async (t) => {
    const c = await t.conn();
    const w = await t.conn();
    const order: [number, string][] = [
      [PACKET.SUBMIT_JOB_LOW_BG, 'l1'],
      [PACKET.SUBMIT_JOB_BG, 'n1'],
      [PACKET.SUBMIT_JOB_HIGH_BG, 'h1'],
      [PACKET.SUBMIT_JOB_LOW_BG, 'l2'],
      [PACKET.SUBMIT_JOB_HIGH_BG, 'h2'],
      [PACKET.SUBMIT_JOB_BG, 'n2'],
    ];
    for (const [type, data] of order) {
      c.request(type, t.fn(), '', data);
      await t.read(c, 'c');
    }
    w.request(PACKET.CAN_DO, t.fn());
    for (let i = 0; i < 7; i++) {
      w.request(PACKET.GRAB_JOB);
      await t.read(w, 'w');
    }
  },
  'two clients with the same unique id share one job and its result': async (t) => {
    const a = await t.conn();
    const b = await t.conn();
    const w = await t.conn();
    a.request(PACKET.SUBMIT_JOB, t.fn(), 'shared', 'first');
    await t.read(a, 'a');
    b.request(PACKET.SUBMIT_JOB, t.fn(), 'shared', 'second');
    await t.read(b, 'b');
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.GRAB_JOB_UNIQ);
    await t.read(w, 'w');
    w.request(PACKET.WORK_COMPLETE, t.handle(1), 'for both');
    await t.read(a, 'a');
    await t.read(b, 'b');
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
  },
  'a sleeping worker is woken by a job for its function': async (t) => {
    const w = await t.conn();
    const c = await t.conn();
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.PRE_SLEEP);
    await t.settle();
    c.request(PACKET.SUBMIT_JOB_BG, t.fn(), '', 'x');
    await t.read(c, 'c');
    await t.read(w, 'w');
    w.request(PACKET.GRAB_JOB_ALL);
    await t.read(w, 'w');
  },
  'CANT_DO and RESET_ABILITIES take functions away': async (t) => {
    const c = await t.conn();
    const w = await t.conn();
    c.request(PACKET.SUBMIT_JOB_BG, t.fn(1), '', 'one');
    await t.read(c, 'c');
    c.request(PACKET.SUBMIT_JOB_BG, t.fn(2), '', 'two');
    await t.read(c, 'c');
    w.request(PACKET.CAN_DO, t.fn(1));
    w.request(PACKET.CANT_DO, t.fn(1));
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
    w.request(PACKET.CAN_DO, t.fn(2));
    w.request(PACKET.RESET_ABILITIES);
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
    w.request(PACKET.CAN_DO, t.fn(2));
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
  },
  'WORK_EXCEPTION with and without the exceptions option': async (t) => {
    const plain = await t.conn();
    const keen = await t.conn();
    const w = await t.conn();
    keen.request(PACKET.OPTION_REQ, 'exceptions');
    await t.read(keen, 'keen');
    plain.request(PACKET.SUBMIT_JOB, t.fn(), '', 'a');
    await t.read(plain, 'plain');
    keen.request(PACKET.SUBMIT_JOB, t.fn(), '', 'b');
    await t.read(keen, 'keen');
    w.request(PACKET.CAN_DO, t.fn());
    for (const n of [1, 2]) {
      w.request(PACKET.GRAB_JOB);
      await t.read(w, 'w');
      w.request(PACKET.WORK_EXCEPTION, t.handle(n), 'boom');
    }
    await t.read(plain, 'plain');
    await t.read(keen, 'keen');
  },
  'results for a job the worker does not hold': async (t) => {
    const w = await t.conn();
    for (const type of [PACKET.WORK_COMPLETE, PACKET.WORK_FAIL, PACKET.WORK_STATUS, PACKET.WORK_DATA, PACKET.WORK_WARNING]) {
      const args = type === PACKET.WORK_STATUS ? ['H:nowhere:1', '1', '2'] : type === PACKET.WORK_FAIL ? ['H:nowhere:1'] : ['H:nowhere:1', 'x'];
      w.request(type, ...args);
      await t.read(w, 'w');
    }
  },
  'GET_STATUS_UNIQUE: unknown, queued with its waiting clients, running with its status, and a background job': async (t) => {
    const a = await t.conn();
    const b = await t.conn();
    const w = await t.conn();
    const u = `${t.fn()}-u`;
    a.request(PACKET.GET_STATUS_UNIQUE, `${u}-none`);
    await t.read(a, 'a');
    a.request(PACKET.SUBMIT_JOB, t.fn(), u, 'x');
    await t.read(a, 'a');
    b.request(PACKET.SUBMIT_JOB, t.fn(), u, 'y');
    await t.read(b, 'b');
    b.request(PACKET.GET_STATUS_UNIQUE, u);
    await t.read(b, 'b');
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
    w.request(PACKET.WORK_STATUS, t.handle(1), '3', '7');
    w.request(PACKET.ECHO_REQ, 'sync');
    await t.read(w, 'w');
    await t.settle(); // a cluster node records the status when its statement commits
    a.request(PACKET.GET_STATUS_UNIQUE, u);
    await t.read(a, 'a');
    a.request(PACKET.SUBMIT_JOB_BG, t.fn(1), `${u}-bg`, 'z');
    await t.read(a, 'a');
    a.request(PACKET.GET_STATUS_UNIQUE, `${u}-bg`);
    await t.read(a, 'a');
  },
  'SUBMIT_REDUCE_JOB and SUBMIT_REDUCE_JOB_BACKGROUND: queued as the function, coalesced by unique id': async (t) => {
    const c = await t.conn();
    const w = await t.conn();
    c.request(PACKET.SUBMIT_REDUCE_JOB_BACKGROUND, t.fn(), 'r1', 'reducer', 'aggregator', 'd1');
    await t.read(c, 'c');
    c.request(PACKET.SUBMIT_REDUCE_JOB_BACKGROUND, t.fn(), 'r1', '', '', 'again');
    await t.read(c, 'c');
    c.request(PACKET.SUBMIT_REDUCE_JOB, t.fn(), 'r2', 'reducer', 'aggregator', 'd2\0bytes');
    await t.read(c, 'c');
    c.request(PACKET.GET_STATUS_UNIQUE, 'r2');
    await t.read(c, 'c');
    w.request(PACKET.CAN_DO, t.fn());
    w.request(PACKET.GRAB_JOB);
    await t.read(w, 'w');
    w.request(PACKET.GRAB_JOB_UNIQ);
    await t.read(w, 'w');
    w.request(PACKET.WORK_COMPLETE, t.handle(2), 'done');
    await t.read(c, 'c');
  },
  'text admin: create function, prioritystatus, maxqueue per priority, drop function': async (t) => {
    const c = await t.conn();
    const admin = await t.conn();
    await t.admin(admin, 'admin', 'create function F-0', true);
    await t.admin(admin, 'admin', 'status', false);
    await t.admin(admin, 'admin', 'prioritystatus', false);
    await t.admin(admin, 'admin', 'maxqueue F-0 1 2', true);
    for (const type of [PACKET.SUBMIT_JOB_HIGH_BG, PACKET.SUBMIT_JOB_HIGH_BG, PACKET.SUBMIT_JOB_BG, PACKET.SUBMIT_JOB_BG, PACKET.SUBMIT_JOB_LOW_BG, PACKET.SUBMIT_JOB_LOW_BG, PACKET.SUBMIT_JOB_LOW_BG]) {
      c.request(type, t.fn(), '', 'x');
      await t.read(c, 'c');
    }
    await t.admin(admin, 'admin', 'prioritystatus', false);
    await t.admin(admin, 'admin', 'maxqueue F-0 0', true);
    c.request(PACKET.SUBMIT_JOB_HIGH_BG, t.fn(), '', 'x');
    await t.read(c, 'c');
    await t.admin(admin, 'admin', 'create function', true);
    await t.admin(admin, 'admin', 'drop', true);
    await t.admin(admin, 'admin', 'drop function F-none', true);
    await t.admin(admin, 'admin', 'drop function F-0', true);
    await t.admin(admin, 'admin', 'status', false);
    const w = await t.conn();
    w.request(PACKET.CAN_DO, t.fn(1));
    w.request(PACKET.ECHO_REQ, 'sync');
    await t.read(w, 'w');
    await t.admin(admin, 'admin', 'drop function F-1', true);
    await t.admin(admin, 'admin', 'prioritystatus', false);
  },
  'GET_STATUS of an unknown handle': async (t) => {
    const c = await t.conn();
    c.request(PACKET.GET_STATUS, 'H:nowhere:99');
    await t.read(c, 'c');
  },
};

describe.skipIf(!HAS_GEARMAND)('Gearman: the same conversations against gearmand and Beanpole', () => {
  let n = 0;
  it.each(Object.keys(CONVERSATIONS))('%s', async (name) => {
    const transcripts: string[][] = [];
    n++;
    for (const port of [gearmand.port, beanpolePort]) {
      const talk = new Talk(port, `diff-${process.pid}-${n}-${port}`);
      try {
        await CONVERSATIONS[name]!(talk);
      } finally {
        talk.close();
      }
      transcripts.push(talk.lines);
    }
    expect(transcripts[1], 'Beanpole (expected: gearmand)').toEqual(transcripts[0]);
  });
});

/**
 * A conversation against a gearmand and a Beanpole started for it with flags of their own,
 * filtered to the lines `keep` selects; the transcripts, gearmand's first.
 */
async function withFlags(beanpoleArgs: string[], gearmandArgs: string[], prefix: string, conversation: Conversation): Promise<string[][]> {
  const { server, port } = await startGearmanServer(beanpoleArgs);
  const reference = await startGearmand(gearmandArgs);
  const transcripts: string[][] = [];
  try {
    for (const p of [reference.port, port]) {
      const t = new Talk(p, `${prefix}-${process.pid}-${p}`);
      try {
        await conversation(t);
      } finally {
        t.close();
      }
      transcripts.push(t.lines);
    }
  } finally {
    await server.stop();
    await reference.stop();
  }
  return transcripts;
}

describe.skipIf(!HAS_GEARMAND)('Gearman: --gearman-job-retries against gearmand --job-retries', () => {
  it('drops a job at its second failure: its client gets WORK_FAIL, and the handle is unknown after', async () => {
    const [reference, ours] = await withFlags(['--gearman-job-retries', '2'], ['--job-retries=2'], 'retries', async (t) => {
      const c = await t.conn();
      c.request(PACKET.SUBMIT_JOB, t.fn(), '', 'fg');
      await t.read(c, 'c');
      c.request(PACKET.SUBMIT_JOB_BG, t.fn(1), 'bg-u', 'bg');
      await t.read(c, 'c');
      for (let failure = 1; failure <= 2; failure++) {
        // One worker per job: the order in which a worker's several jobs are requeued differs.
        for (const f of [0, 1]) {
          const w = await t.conn();
          w.request(PACKET.CAN_DO, t.fn(f));
          w.request(PACKET.GRAB_JOB);
          await t.read(w, 'w');
          w.destroy();
          await t.settle();
        }
      }
      await t.read(c, 'c');
      for (const n of [1, 2]) {
        c.request(PACKET.GET_STATUS, t.handle(n));
        await t.read(c, 'c');
      }
      c.request(PACKET.GET_STATUS_UNIQUE, 'bg-u');
      await t.read(c, 'c');
    });
    expect(ours, 'Beanpole (expected: gearmand)').toEqual(reference);
    expect(reference).toContain('c <- 14 "H#1"');
  });
});

describe.skipIf(!HAS_GEARMAND)('Gearman: --gearman-round-robin against gearmand --round-robin', () => {
  let rrBeanpole: ServerProcess | undefined;
  let rrGearmand: Gearmand | undefined;
  afterAll(async () => {
    await rrBeanpole?.stop();
    await rrGearmand?.stop();
  });

  it('a worker of three functions gets them in turn, the last registered first', async () => {
    let rrPort: number;
    ({ server: rrBeanpole, port: rrPort } = await startGearmanServer(['--gearman-round-robin']));
    rrGearmand = await startGearmand(['--round-robin']);
    const transcripts: string[][] = [];
    for (const port of [rrGearmand.port, rrPort]) {
      const t = new Talk(port, `rr-${process.pid}-${port}`);
      try {
        const c = await t.conn();
        const w = await t.conn();
        const jobs: [number, number, string][] = [
          [PACKET.SUBMIT_JOB_BG, 0, 'a1'],
          [PACKET.SUBMIT_JOB_BG, 0, 'a2'],
          [PACKET.SUBMIT_JOB_BG, 0, 'a3'],
          [PACKET.SUBMIT_JOB_BG, 1, 'b1'],
          [PACKET.SUBMIT_JOB_BG, 1, 'b2'],
          [PACKET.SUBMIT_JOB_HIGH_BG, 2, 'c1'],
          [PACKET.SUBMIT_JOB_BG, 2, 'c2'],
        ];
        for (const [type, f, data] of jobs) {
          c.request(type, t.fn(f), '', data);
          await t.read(c, 'c');
        }
        for (const f of [0, 1, 2]) w.request(PACKET.CAN_DO, t.fn(f));
        for (let i = 0; i <= jobs.length; i++) {
          w.request(PACKET.GRAB_JOB);
          await t.read(w, 'w');
        }
      } finally {
        t.close();
      }
      transcripts.push(t.lines.filter((l) => l.startsWith('w')));
    }
    expect(transcripts[1], 'Beanpole (expected: gearmand)').toEqual(transcripts[0]);
    expect(transcripts[0]!.map((l) => /\\u0000(\w+)"$/.exec(l)?.[1] ?? l)).toEqual(['c1', 'b1', 'a1', 'c2', 'b2', 'a2', 'a3', 'w <- 10 ""']);
  });
});
