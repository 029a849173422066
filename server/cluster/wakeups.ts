/**
 * News between nodes over LISTEN/NOTIFY, one channel per realm: "jobs are ready in these tubes"
 * (a reserve waiting on another node takes them within milliseconds), "a delayed job is due at
 * T" (each node times its promotion of delayed jobs), "a tube's policy changed" (each node
 * reads the policies again) and, for Gearman, "node N has WORK_* packets waiting" (its
 * clients' foreground jobs run on other nodes). A notification is sent after the change
 * committed, from a connection of its own: a NOTIFY inside the put's transaction would make
 * every commit wait on PostgreSQL's notification queue lock, one at a time.
 *
 * Notifications can be lost (a listener reconnecting): the store also polls slowly, and after
 * a reconnect it treats every tube as having news.
 *
 * A node with nobody to tell sends nothing: every NOTIFY wakes the listening backends and costs
 * the node a statement, and a lone node (the common deployment over an HA PostgreSQL) is its
 * own only listener, which ignores its own news. The heartbeat counts the other live nodes
 * (othersCounted); a node that joins says hello on the channel, so the nodes already there
 * speak again at once rather than at their next heartbeat.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { connectionConfig } from './pool.js';
import type { PrimaryFinder } from './primary-finder.js';

/** NOTIFY payloads must stay under 8000 bytes. */
const MAX_PAYLOAD = 7000;
const RECONNECT_MS = 500;
/** The listening connection is checked this often: a dead one would otherwise go unnoticed. */
const LISTENER_CHECK_MS = 5000;
/**
 * Heartbeats in a row that must count no other node before a node goes quiet: one count may
 * have been taken before a newcomer registered and come back after its hello.
 */
const QUIET_AFTER_COUNTS = 2;

export interface WakeupHandlers {
  /** Jobs became ready in these tubes (null: any tube, after notifications may have been lost). */
  ready(tubes: Set<string> | null): void;
  /** A delayed job is due at this time (epoch ms). */
  due(at: number): void;
  /** Packets wait in the database for this node's clients (Gearman's relay). */
  updates?(): void;
  /** A tube's policy changed (read them again). */
  policies?(): void;
}

export class Wakeups {
  private listener: pg.Client | null = null;
  private sender: pg.Client | null = null;
  private readyTubes = new Set<string>();
  private soonestDue = Number.POSITIVE_INFINITY;
  /** Nodes told that packets wait for them ('*': every node, to look at its clients' jobs). */
  private readonly updatedNodes = new Set<number | '*'>();
  /** A policy changed here since the last notification. */
  private policiesChanged = false;
  /** This node's hello is still to be sent (it has just begun to listen). */
  private hello = false;
  /** Heartbeats in a row that counted no other node, none heard from since (QUIET_AFTER_COUNTS). */
  private aloneCounts = 0;
  private flushQueued = false;
  /** The notification in flight, if any: news made meanwhile waits for it and goes in the next. */
  private sending: Promise<void> | null = null;
  private closed = false;
  /** close() has begun: its own last send carries what news is left, no other send starts. */
  private closing = false;

  constructor(
    private readonly database: PrimaryFinder,
    private readonly channel: string,
    private readonly nodeTag: () => number,
    private readonly handlers: WakeupHandlers,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    this.hello = true;
    this.queueFlush();
  }

  /**
   * The heartbeat counted `others` live nodes besides this one. Once none have been counted
   * QUIET_AFTER_COUNTS times in a row, and none said hello meanwhile, news is no longer sent.
   */
  othersCounted(others: number): void {
    this.aloneCounts = others > 0 ? 0 : this.aloneCounts + 1;
  }

  /** True when no other node listens, as far as this one knows: its news is dropped, not sent. */
  private get alone(): boolean {
    return this.aloneCounts >= QUIET_AFTER_COUNTS;
  }

  /** Tells the other nodes, on a later turn (news of one turn goes in one notification). */
  jobsReady(tube: string): void {
    if (this.alone) return;
    this.readyTubes.add(tube);
    this.queueFlush();
  }

  delayedDue(at: number): void {
    if (this.alone) return;
    if (at < this.soonestDue) this.soonestDue = at;
    this.queueFlush();
  }

  /** A tube's policy was set here (committed): the other nodes read the policies again. */
  policySet(): void {
    if (this.alone) return;
    this.policiesChanged = true;
    this.queueFlush();
  }

  /** Packets for `node`'s clients were committed ('*': jobs ended that any node's clients may wait on). */
  updatesFor(node: number | '*'): void {
    if (this.alone) return;
    this.updatedNodes.add(node);
    this.queueFlush();
  }

  async close(): Promise<void> {
    // News not sent yet goes first (a leaving node's clients' jobs are ready for the others).
    this.closing = true;
    while (this.sending !== null) await this.sending;
    this.flushQueued = false;
    await this.send(this.payloads());
    this.closed = true;
    await Promise.all([this.listener?.end().catch(() => undefined), this.sender?.end().catch(() => undefined)]);
  }

  /**
   * One notification at a time: under load, news of every turn made while one is in flight
   * goes together in the next, so a busy node sends one NOTIFY per round trip, not one per turn
   * (each wakes every listening backend and node).
   */
  private queueFlush(): void {
    if (this.flushQueued || this.closed || this.closing) return;
    this.flushQueued = true;
    if (this.sending === null) setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    if (this.closed || this.closing) return;
    const sent = this.send(this.payloads()).finally(() => {
      this.sending = null;
      if (this.flushQueued) setImmediate(this.flush);
    });
    this.sending = sent;
  };

  /** "<node> h", "<node> r <tube> <tube>...", "<node> d <ms>", "<node> u <node>" and "<node> p", tab-separated, split to fit. */
  private payloads(): string[] {
    const tag = String(this.nodeTag());
    const out: string[] = [];
    if (this.hello) out.push(`${tag}\th`);
    this.hello = false;
    // News made before this node went quiet is dropped with the rest.
    if (this.alone) {
      this.clearNews();
      return out;
    }
    if (this.policiesChanged) out.push(`${tag}\tp`);
    for (const node of this.updatedNodes) out.push(`${tag}\tu\t${node}`);
    if (this.soonestDue !== Number.POSITIVE_INFINITY) out.push(`${tag}\td\t${this.soonestDue}`);
    let line = `${tag}\tr`;
    for (const tube of this.readyTubes) {
      if (line.length + tube.length + 1 > MAX_PAYLOAD) {
        out.push(line);
        line = `${tag}\tr`;
      }
      line += `\t${tube}`;
    }
    if (this.readyTubes.size > 0) out.push(line);
    this.clearNews();
    return out;
  }

  private clearNews(): void {
    this.policiesChanged = false;
    this.updatedNodes.clear();
    this.soonestDue = Number.POSITIVE_INFINITY;
    this.readyTubes.clear();
  }

  private async send(payloads: string[]): Promise<void> {
    if (payloads.length === 0 || this.closed) return;
    try {
      if (this.sender === null) {
        const sender = new this.database.Client(connectionConfig());
        sender.on('error', () => {
          if (this.sender === sender) this.sender = null;
        });
        await sender.connect();
        this.sender = sender;
      }
      await this.sender.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [this.channel, payloads]);
    } catch (err) {
      // The other nodes' slow poll finds the jobs anyway.
      this.log.warn({ err: (err as Error).message }, 'cluster: could not notify the other nodes');
      await this.sender?.end().catch(() => undefined);
      this.sender = null;
    }
  }

  private async listen(): Promise<void> {
    const client = new this.database.Client(connectionConfig());
    client.on('notification', (msg) => {
      if (msg.channel === this.channel && msg.payload !== undefined) this.received(msg.payload);
    });
    // A restart of PostgreSQL may end the connection with an error or without one: either way,
    // once, listen again.
    let lost = false;
    const onLost = (why: string): void => {
      if (lost || this.closed) return;
      lost = true;
      this.log.warn({ err: why }, 'cluster: the notification connection failed; reconnecting');
      void client.end().catch(() => undefined);
      if (this.listener === client) this.listener = null;
      this.reconnectSoon();
    };
    client.on('error', (err) => onLost(err.message));
    client.on('end', () => onLost('connection ended'));
    const check = setInterval(() => {
      if (lost || this.closed) return clearInterval(check);
      client.query('SELECT 1').catch((err: unknown) => onLost((err as Error).message));
    }, LISTENER_CHECK_MS);
    check.unref();
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch (err) {
      lost = true; // the caller tries again; the handlers above must not as well
      void client.end().catch(() => undefined);
      throw err;
    }
    this.listener = client;
  }

  private reconnectSoon(): void {
    if (this.closed) return;
    setTimeout(() => {
      if (this.closed) return;
      this.listen().then(
        // What was sent while this node was not listening is lost: look at every tube, and
        // tell the nodes that went quiet meanwhile that this one listens again.
        () => {
          this.hello = true;
          this.queueFlush();
          this.handlers.ready(null);
          this.handlers.updates?.();
          this.handlers.policies?.();
        },
        (err: unknown) => {
          this.log.warn({ err: (err as Error).message }, 'cluster: cannot listen for notifications yet');
          this.reconnectSoon();
        },
      );
    }, RECONNECT_MS).unref();
  }

  private received(payload: string): void {
    const parts = payload.split('\t');
    // A node's own news was acted on when it was made.
    if (parts[0] === String(this.nodeTag())) return;
    if (parts[1] === 'h') {
      // A node joined: it hears this node's news from now on.
      this.aloneCounts = 0;
    } else if (parts[1] === 'd') {
      const at = Number(parts[2]);
      if (Number.isFinite(at)) this.handlers.due(at);
    } else if (parts[1] === 'r') {
      this.handlers.ready(new Set(parts.slice(2)));
    } else if (parts[1] === 'p') {
      this.handlers.policies?.();
    } else if (parts[1] === 'u' && (parts[2] === '*' || parts[2] === String(this.nodeTag()))) {
      this.handlers.updates?.();
    }
  }
}
