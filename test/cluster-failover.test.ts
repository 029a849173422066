/**
 * Failover: three cluster nodes on one PostgreSQL, producers and workers spread over them, and a
 * random node killed with SIGKILL and started again every couple of seconds (seeded: the rounds
 * are the same on every run). Checked at the end, and along the way:
 * - no acknowledged put is lost: every INSERTED id was DELETED by a worker or is still there;
 * - no acknowledged delete comes back: no DELETED id is ever reserved again;
 * - every job a killed node's clients held is ready again (or reserved by someone else) within
 *   the lease and a heartbeat;
 * - and the same for Gearman background jobs on the same nodes: every acknowledged submit
 *   (JOB_CREATED) is completed or still queued at the end, and no job whose WORK_COMPLETE was
 *   acted on (an ECHO_REQ after it was answered) is handed out again.
 * FAILOVER_ROUNDS sets the rounds (10 here; `npm run test:failover` runs 100) and FAILOVER_SEED
 * the seed.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { PACKET } from '../server/protocol/gearman/packets.js';
import { freshDatabase } from './support/cluster-db.js';
import { GearmanTestClient } from './support/gearman-client.js';
import { startGearmanServer } from './support/gearman-server.js';
import { Prng } from './support/prng.js';
import { RawClient } from './support/raw-client.js';
import type { ServerProcess } from './support/servers.js';

const pgUrl = inject('pgUrl');
const ROUNDS = Number(process.env.FAILOVER_ROUNDS ?? '10');
const SEED = Number(process.env.FAILOVER_SEED ?? '20261125');
const LEASE_MS = 1000;
/** A dead node's jobs must be back within its lease plus a heartbeat and this much slack. */
const BACK_WITHIN_MS = LEASE_MS + LEASE_MS / 5 + 1500;
const NODES = 3;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Slot {
  server: ServerProcess | null;
  port: number;
  gearmanPort: number;
}

/** What the clients saw acknowledged. */
interface Ledger {
  inserted: Map<number, string>;
  deleted: Set<number>;
  /** Deletes sent whose answer never came (the node died): the job may be gone or not. */
  deleteUnanswered: Set<number>;
  /** Ids reserved after their delete was acknowledged (must stay empty). */
  resurrected: number[];
  /** Per node slot: jobs its workers hold right now (reserved, not yet deleted). */
  holding: Map<number, Set<number>>;
  /** Gearman: handles of acknowledged submits, and of jobs whose WORK_COMPLETE was acted on. */
  submitted: Set<string>;
  completed: Set<string>;
  /** WORK_COMPLETE sent but the echo after it never answered (the node died): done or not. */
  completeUnanswered: Set<string>;
  /** Handles handed out again after their completion was acted on (must stay empty). */
  reassigned: string[];
}

class Cluster {
  readonly slots: Slot[] = [];
  private url = '';

  async start(url: string): Promise<void> {
    this.url = url;
    for (let i = 0; i < NODES; i++) this.slots.push({ server: null, port: 0, gearmanPort: 0 });
    await Promise.all(this.slots.map((_, i) => this.startNode(i)));
  }

  async startNode(i: number): Promise<void> {
    const { server, port } = await startGearmanServer(['--cluster', this.url, '--cluster-lease-ms', String(LEASE_MS)]);
    this.slots[i] = { server, port: (server.address as { port: number }).port, gearmanPort: port };
  }

  kill(i: number): void {
    const s = this.slots[i]!.server;
    this.slots[i]!.server = null;
    s?.signal('SIGKILL');
    void s?.stop();
  }

  /** A live node's beanstalkd port (or Gearman's), or null while it is down. */
  port(i: number, protocol: 'beanstalk' | 'gearman' = 'beanstalk'): number | null {
    const slot = this.slots[i]!;
    if (slot.server === null) return null;
    return protocol === 'beanstalk' ? slot.port : slot.gearmanPort;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.server?.stop()));
  }
}

/**
 * A client loop that reconnects to its node slot (or any live one) whenever its connection drops:
 * C is the protocol's client (beanstalkd's or Gearman's).
 */
abstract class Loop<C extends { destroy(): void }> {
  protected client: C | null = null;
  stopped = false;

  constructor(
    protected readonly cluster: Cluster,
    protected slot: number,
    protected readonly ledger: Ledger,
    private readonly protocol: 'beanstalk' | 'gearman',
  ) {}

  /** Connects to `port` and gets the connection ready for the loop's steps. */
  protected abstract open(port: number): Promise<C>;

  /** False once the connection is known to be closed. */
  protected usable(_c: C): boolean {
    return true;
  }

  protected async connection(): Promise<C> {
    for (;;) {
      if (this.client !== null && this.usable(this.client)) return this.client;
      this.client = null;
      for (let k = 0; k < NODES; k++) {
        const slot = (this.slot + k) % NODES;
        const port = this.cluster.port(slot, this.protocol);
        if (port === null) continue;
        try {
          this.client = await this.open(port);
          this.slot = slot;
          return this.client;
        } catch {
          // that node is going or gone: the next one
        }
      }
      await sleep(50);
    }
  }

  abstract step(): Promise<void>;

  async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.step();
      } catch {
        // The node went away mid-command: whatever was in flight is unknown, never counted.
        this.client?.destroy();
        this.client = null;
      }
    }
    this.client?.destroy();
  }
}

abstract class Actor extends Loop<RawClient> {
  constructor(cluster: Cluster, home: number, ledger: Ledger) {
    super(cluster, home, ledger, 'beanstalk');
  }

  protected open(port: number): Promise<RawClient> {
    return RawClient.connect(port);
  }

  protected override usable(c: RawClient): boolean {
    return !c.closed;
  }
}

class Producer extends Actor {
  private n = 0;

  async step(): Promise<void> {
    const c = await this.connection();
    const body = `p${this.slot}-${this.n++}-${Date.now()}`;
    const reply = await c.call(`put 0 0 60 ${body.length}\r\n${body}\r\n`, 3000);
    const m = /^INSERTED (\d+)\r\n$/.exec(reply);
    if (m !== null) this.ledger.inserted.set(Number(m[1]), body);
    await sleep(5);
  }
}

class Worker extends Actor {
  async step(): Promise<void> {
    const c = await this.connection();
    const slot = this.slot;
    const reply = await c.call('reserve-with-timeout 1\r\n', 3000);
    const m = /^RESERVED (\d+) \d+\r\n/.exec(reply);
    if (m === null) return;
    const id = Number(m[1]);
    if (this.ledger.deleted.has(id)) this.ledger.resurrected.push(id);
    const held = this.ledger.holding.get(slot)!;
    held.add(id);
    await sleep(20); // working on it
    this.ledger.deleteUnanswered.add(id);
    const done = await c.call(`delete ${id}\r\n`, 3000);
    this.ledger.deleteUnanswered.delete(id);
    held.delete(id);
    if (done === 'DELETED\r\n') this.ledger.deleted.add(id);
  }
}

/** A Gearman client loop: a worker or a producer of the `failover` function. */
abstract class GearmanActor extends Loop<GearmanTestClient> {
  constructor(cluster: Cluster, home: number, ledger: Ledger) {
    super(cluster, home, ledger, 'gearman');
  }

  protected async open(port: number): Promise<GearmanTestClient> {
    const c = await GearmanTestClient.connect(port);
    c.request(PACKET.CAN_DO, 'failover');
    return c;
  }
}

class GearmanProducer extends GearmanActor {
  private n = 0;

  async step(): Promise<void> {
    const c = await this.connection();
    const unique = `g${this.slot}-${this.n++}-${Date.now()}`;
    c.request(PACKET.SUBMIT_JOB_BG, 'failover', unique, unique);
    const [type, handle] = await c.args(1, 3000);
    if (type === PACKET.JOB_CREATED) this.ledger.submitted.add(handle!);
    await sleep(10);
  }
}

class GearmanWorker extends GearmanActor {
  async step(): Promise<void> {
    const c = await this.connection();
    c.request(PACKET.GRAB_JOB);
    const [type, handle] = await c.args(3, 3000);
    if (type !== PACKET.JOB_ASSIGN) return void (await sleep(50));
    if (this.ledger.completed.has(handle!)) this.ledger.reassigned.push(handle!);
    await sleep(20); // working on it
    this.ledger.completeUnanswered.add(handle!);
    c.request(PACKET.WORK_COMPLETE, handle!, 'done');
    c.request(PACKET.ECHO_REQ, 'acted on?');
    const [echo] = await c.args(1, 3000);
    if (echo === PACKET.ECHO_RES) {
      this.ledger.completeUnanswered.delete(handle!);
      this.ledger.completed.add(handle!);
    }
  }
}

const cluster = new Cluster();
afterAll(() => cluster.stopAll());

describe.skipIf(pgUrl === null)('cluster failover', () => {
  it(`${ROUNDS} rounds of SIGKILL and restart of a random node under load (seed ${SEED})`, async () => {
    const rng = new Prng(SEED);
    await cluster.start(await freshDatabase(pgUrl!, 'failover'));
    const ledger: Ledger = {
      inserted: new Map(),
      deleted: new Set(),
      deleteUnanswered: new Set(),
      resurrected: [],
      holding: new Map(),
      submitted: new Set(),
      completed: new Set(),
      completeUnanswered: new Set(),
      reassigned: [],
    };
    for (let i = 0; i < NODES; i++) ledger.holding.set(i, new Set());
    const actors: (Actor | GearmanActor)[] = [];
    for (let i = 0; i < NODES; i++) actors.push(new Producer(cluster, i, ledger), new Worker(cluster, i, ledger), new Worker(cluster, i, ledger));
    // Gearman's producer on one node and its worker on the next: every job crosses nodes.
    for (let i = 0; i < NODES; i++) actors.push(new GearmanProducer(cluster, i, ledger), new GearmanWorker(cluster, (i + 1) % NODES, ledger));
    const running = actors.map((a) => a.run());
    const late: string[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        await sleep(800 + rng.int(1200));
        const victim = rng.int(NODES);
        const held = [...ledger.holding.get(victim)!];
        const killedAt = Date.now();
        cluster.kill(victim);
        ledger.holding.get(victim)!.clear();
        // Check from a node that is up (not the victim's slot).
        const watchSlot = (victim + 1) % NODES;
        const watcher = await RawClient.connect(cluster.port(watchSlot)!);
        for (const id of held) {
          // The dead node changes nothing more: the reserve count now is its reservation's.
          let baseline = -1;
          for (;;) {
            const stats = await watcher.call(`stats-job ${id}\r\n`, 3000);
            const reserves = Number(/reserves: (\d+)\n/.exec(stats)?.[1] ?? -1);
            if (baseline < 0) baseline = reserves;
            // Ready again, taken by another worker since, or already done with.
            if (stats === 'NOT_FOUND\r\n' || !/state: reserved/.test(stats) || reserves > baseline) break;
            if (Date.now() - killedAt > BACK_WITHIN_MS) {
              late.push(`round ${round}: job ${id} still held ${Date.now() - killedAt} ms after its node died`);
              break;
            }
            await sleep(50);
          }
        }
        watcher.destroy();
        await cluster.startNode(victim);
      }
    } finally {
      for (const a of actors) a.stopped = true;
      await Promise.all(running);
    }

    // Drain what is left through one node, until no job is left in any state: jobs the stopped
    // clients held come back as their connections' closes are seen and the last leases run out.
    const drain = await RawClient.connect(cluster.port(0)!);
    const left = new Set<number>();
    const drainUntil = Date.now() + 5 * BACK_WITHIN_MS;
    for (;;) {
      const reply = await drain.call('reserve-with-timeout 1\r\n', 5000);
      const m = /^RESERVED (\d+) \d+\r\n/.exec(reply);
      if (m !== null) {
        const id = Number(m[1]);
        left.add(id);
        expect(await drain.call(`delete ${id}\r\n`)).toBe('DELETED\r\n');
        continue;
      }
      const stats = await drain.call('stats\r\n');
      if (/current-jobs-reserved: 0\n/.test(stats) || Date.now() > drainUntil) break;
    }
    const unaccounted = [...ledger.inserted.keys()].filter((id) => !ledger.deleted.has(id) && !left.has(id) && !ledger.deleteUnanswered.has(id));
    const states = await Promise.all(unaccounted.map(async (id) => `${id}: ${(await drain.call(`stats-job ${id}\r\n`)).split('\n').slice(2, 4).join(' ')}`));
    drain.destroy();
    // Every acknowledged put was acknowledged deleted, drained here, or deleted by a delete whose
    // answer was lost with its node.
    expect(states).toEqual([]);

    expect(late).toEqual([]);
    expect(ledger.resurrected).toEqual([]);
    for (const id of left) expect(ledger.deleted.has(id), `deleted job ${id} came back`).toBe(false);
    expect(ledger.inserted.size).toBeGreaterThan(ROUNDS * 20);
    expect(ledger.deleted.size).toBeGreaterThan(ROUNDS * 10);

    // Gearman: what is left queued is grabbed and completed here; then every acknowledged
    // submit was completed, and nothing completed was handed out again.
    const g = await GearmanTestClient.connect(cluster.port(0, 'gearman')!);
    g.request(PACKET.CAN_DO, 'failover');
    const gDrainUntil = Date.now() + 5 * BACK_WITHIN_MS;
    for (;;) {
      g.request(PACKET.GRAB_JOB);
      const [type, handle] = await g.args(3, 5000);
      if (type === PACKET.JOB_ASSIGN) {
        if (ledger.completed.has(handle!)) ledger.reassigned.push(handle!);
        g.request(PACKET.WORK_COMPLETE, handle!, 'drained');
        ledger.completed.add(handle!);
        continue;
      }
      g.send('status\n');
      const status = await g.adminReply(false);
      // FUNCTION TOTAL RUNNING WORKERS: done once no job of it is queued or running anywhere.
      if (/^failover\t0\t/m.test(status) || Date.now() > gDrainUntil) break;
      await sleep(100);
    }
    g.destroy();
    // Every acknowledged submit was completed (acted on), drained here, or completed by a worker
    // whose node died before it could say so.
    expect([...ledger.submitted].filter((h) => !ledger.completed.has(h) && !ledger.completeUnanswered.has(h))).toEqual([]);
    expect(ledger.reassigned).toEqual([]);
    expect(ledger.submitted.size).toBeGreaterThan(ROUNDS * 20);
    // A round takes up to 2 s of load and a node's restart; the drain at most 5 leases.
  }, ROUNDS * 5000 + 60_000);
});
