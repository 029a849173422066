/**
 * The operations over PostgreSQL (cluster mode): every node given the same database serves the
 * same tubes and jobs. The node keeps no job of its own; what it keeps is about its connections
 * (watch lists, the reservations they hold, blocked reserves) and its command counters.
 *
 * - Puts of the same turn of the event loop go in one multi-row INSERT (put-batch.ts).
 * - A reserve probes each watched tube's head (sql.ts) and locks it with SKIP LOCKED.
 * - A blocked reserve waits here; jobs made ready on this node wake it at once, on other nodes
 *   by a notification (wakeups.ts), and a slow poll covers lost notifications.
 * - Delayed jobs become ready when due: every node times the soonest one it knows of (due-timer.ts).
 * - TTRs: the node whose client holds a job times its deadline (cluster-client.ts); any node
 *   expires a reservation more than OVERDUE_GRACE_MS late, whoever holds it.
 * - A dead node's reservations come back when its lease runs out (node-lease.ts).
 *
 * The store ties together modules of one concept each: the dashboard's changes
 * (admin-changes.ts), the reads of jobs (job-reads.ts) and of tubes' counts (tube-counts.ts),
 * the waiting clients (dispatch.ts), the body budget and the tables' care; a realm's additions
 * come through its hooks (realm-hooks.ts).
 */
import type { Logger } from 'pino';
import type pg from 'pg';
import type { JobHistoryDto } from '../../shared/history.js';
import { immediateDurability } from '../engine/journal.js';
import { fail, ok } from '../common/result.js';
import { COUNTED_COMMANDS } from '../engine/stats.js';
import { JobWatchers } from '../engine/watchers.js';
import type {
  ClientDelegate,
  ClientOperations,
  ConnectOptions,
  CountedCommand,
  Durability,
  JobBytes,
  JobChange,
  JobPage,
  JobScan,
  JobSnapshot,
  JobState,
  JobUpdate,
  JobView,
  JobWatcher,
  NewJob,
  Operations,
  QueuedState,
  Result,
  ServerCounts,
  SessionView,
  TubeCounts,
  TubeSettings,
  TubeAges,
  TubeSettingsView,
  TubePolicyView,
} from '../operations/operations.js';
import { ClusterClient } from './cluster-client.js';
import type { ClientStore } from './client-store.js';
import type { CountsRow } from './job-row.js';
import type { ClusterNode, RealmMember } from './cluster-node.js';
import { run, type Queryable } from './pool.js';
import { PutBatch } from './put-batch.js';
import { BEANSTALK_REALM, type Realm } from './realm.js';
import { NO_HOOKS, type HookedStore, type RealmHooks } from './realm-hooks.js';
import { STATE } from './schema.js';
import { clusterSql, type ClusterSql, type Statement } from './sql.js';
import { TurnBatch } from './turn-batch.js';
import { Wakeups, type WakeupHandlers } from './wakeups.js';
import { BodyBudget } from './body-budget.js';
import { deleteArrays, type DeletedRow, type DeleteRequest, type LocalTube, type ReservedRow, type ReserveRequest } from './batched.js';
import { TableCare } from './table-care.js';
import { ReserveDispatch } from './dispatch.js';
import type { TubePolicy } from '../../shared/policy.js';
import { ClusterPolicies } from './tube-policies.js';
import { policySql } from './policy-sql.js';
import { DueTimer } from './due-timer.js';
import { TubeCountReader, referenced } from './tube-counts.js';
import { JobReads } from './job-reads.js';
import { AdminChanges } from './admin-changes.js';

/** Waiting reserves look again this often even without news (a lost notification). */
const SAFETY_POLL_MS = 1000;
/** A reservation this late is expired by any node (its holder's own timer did not). */
const OVERDUE_GRACE_MS = 1000;

export interface ClusterStoreOptions {
  maxJobSize: number;
  /** Budget for the bodies of every job in the cluster, both realms (--max-job-bytes); null: no budget but the disk. */
  maxJobBytes: number | null;
  /** The dead-letter limit of tubes without their own (0: off). */
  deadLetterAfter: number;
  /** The job history ring's size (--history-events; 0: none). */
  historyEvents: number;
}

/**
 * The store of one realm on this node; `H` is the realm's hooks (realm-hooks.ts: the
 * beanstalkd realm's add nothing, the Gearman realm's are gearman-hooks.ts).
 */
export class ClusterStore<H extends RealmHooks = RealmHooks> implements Operations, RealmMember, ClientStore<ClusterClient>, HookedStore {
  readonly durability: Durability = immediateDurability;
  readonly maxJobSize: number;
  readonly pool: pg.Pool;
  /** The batched puts, reserves and deletes: where they run and which statements (ClusterNode.hotPool). */
  readonly hot: { pool: pg.Pool; put: Statement; reserveMany: Statement; deleteMany: Statement };
  readonly sql: ClusterSql;
  readonly log: Logger;
  readonly defaultDeadLetterAfter: number;
  /** Command counters of this node (stats' cmd-*), and its timeouts. */
  readonly commands: Record<CountedCommand, number>;
  jobTimeouts = 0;
  totalConnections = 0;
  readonly startedAt: number;
  readonly now: () => number;
  private readonly puts: PutBatch;
  private readonly bodyBudget: BodyBudget;
  private readonly tables: TableCare;
  /** This node's copy of the tube policies, and their statements (tube-policies.ts). */
  readonly policies: ClusterPolicies;
  /**
   * Reserves and deletes of one turn, from every client of this node, one statement each. One
   * reserve statement at a time: a second one in flight probes the same queue heads, finds
   * them locked by the first and reads past them, so two cost more than one twice the size
   * (the 1-node pipelined cycle did 13-17% more jobs with one; BENCHMARKS.md).
   */
  readonly reserves = new TurnBatch<ReserveRequest, ReservedRow | null>(
    (requests) => this.reserveMany(requests),
    (r) => r.conn,
    { maxInFlight: 1 },
  );

  readonly deletes = new TurnBatch<DeleteRequest, { tube: string } | null>(
    (requests) => this.deleteMany(requests),
    (r) => r.client,
  );
  private readonly wakeups: Wakeups;
  private readonly clients = new Map<number, ClusterClient>();
  private readonly localTubes = new Map<string, LocalTube>();
  /** Clients blocked in reserve (or asleep), oldest first. */
  private nextClientId = 1;
  private isDraining = false;
  private readonly drainListeners = new Set<() => void>();
  private readonly watchers = new JobWatchers();
  /** What the realm adds at each of its hooks (the Gearman realm's Gearman-only operations too). */
  readonly hooks: H;
  /** This node's waiting clients and the news that wakes them (dispatch.ts). */
  private readonly dispatch: ReserveDispatch<ClusterClient>;
  /** The timing of delayed jobs' promotion. */
  private readonly due: DueTimer;
  /** The tubes' counts, and the reads of jobs. */
  private readonly counts: TubeCountReader;
  private readonly reads: JobReads;
  private readonly changes: AdminChanges;
  private pollTimer: NodeJS.Timeout | null = null;
  private polling = false;
  private closed = false;

  private constructor(
    readonly node: ClusterNode,
    readonly realm: Realm,
    private readonly o: ClusterStoreOptions,
    hooksOf: (store: HookedStore) => H,
  ) {
    this.log = node.log;
    this.now = node.now;
    this.startedAt = this.now();
    this.maxJobSize = o.maxJobSize;
    this.defaultDeadLetterAfter = o.deadLetterAfter;
    this.pool = node.pool;
    this.sql = clusterSql(realm);
    const recorded = node.hotPool !== node.pool;
    this.hot = {
      pool: node.hotPool,
      put: recorded ? this.sql.putRecorded : this.sql.put,
      reserveMany: recorded ? this.sql.reserveManyRecorded : this.sql.reserveMany,
      deleteMany: recorded ? this.sql.deleteManyRecorded : this.sql.deleteMany,
    };
    this.commands = Object.fromEntries(COUNTED_COMMANDS.map((c) => [c, 0])) as Record<CountedCommand, number>;
    this.puts = new PutBatch(this);
    this.dispatch = new ReserveDispatch(node.log);
    this.bodyBudget = new BodyBudget(this.pool, this.sql, () => node.id, o.maxJobBytes);
    this.tables = new TableCare(this.pool, this.sql, realm.tables.jobs, this.now);
    this.policies = new ClusterPolicies(this.pool, policySql(realm), node.log);
    this.hooks = hooksOf(this);
    this.due = new DueTimer(this.pool, this.sql, this.now, { jobsReady: (tubes) => this.jobsReady(tubes, true), passed: () => this.wake(null) }, node.log);
    this.counts = new TubeCountReader(this.pool, this.sql, this.localTubes, this.now, o.deadLetterAfter);
    this.reads = new JobReads({
      pool: this.pool,
      sql: this.sql,
      get nodeId() {
        return node.id;
      },
      historyEvents: o.historyEvents,
      tubeExists: async (tube) => (await this.tube(tube)) !== undefined,
      peerOf: (conn) => this.clients.get(conn)?.peer,
    });
    this.changes = new AdminChanges(this);
    // Each realm has a channel of its own: a node hears only of the jobs its clients can take.
    this.wakeups = new Wakeups(node.database, realm === BEANSTALK_REALM ? 'beanpole' : `${realm.prefix}wakeups`, () => node.id, this.wakeupHandlers(), node.log);
  }

  /** What this realm does with the other nodes' news. */
  private wakeupHandlers(): WakeupHandlers {
    return { ready: (tubes) => this.wake(tubes), due: (at) => this.armDue(at), policies: () => this.policies.refresh(() => this.wake(null)), ...this.hooks.handlers };
  }

  /** Serves the beanstalkd realm on `node`: listens for the other nodes' news and starts its timers. */
  static async join(node: ClusterNode, options: ClusterStoreOptions): Promise<ClusterStore> {
    return ClusterStore.started(new ClusterStore(node, BEANSTALK_REALM, options, () => NO_HOOKS));
  }

  /** Serves `realm` on `node` with the realm's hooks, made over the store (`hooksOf`) and started once it serves. */
  static async joinRealm<H extends RealmHooks>(node: ClusterNode, options: ClusterStoreOptions, realm: Realm, hooksOf: (store: HookedStore) => H): Promise<ClusterStore<H>> {
    const store = await ClusterStore.started(new ClusterStore(node, realm, options, hooksOf));
    await store.hooks.start();
    return store;
  }

  private static async started<H extends RealmHooks>(store: ClusterStore<H>): Promise<ClusterStore<H>> {
    await store.wakeups.start();
    try {
      await store.bodyBudget.sync();
      await store.policies.load();
    } catch (err) {
      // Not joined yet, so the node's close would not end its notification connection.
      await store.wakeups.close().catch(() => undefined);
      throw err;
    }
    store.node.join(store);
    store.pollTimer = setInterval(() => void store.poll(), SAFETY_POLL_MS);
    store.pollTimer.unref();
    void store.poll();
    return store;
  }

  get nodeId(): number {
    return this.node.id;
  }

  get draining(): boolean {
    return this.isDraining;
  }

  setDraining(): void {
    if (this.isDraining) return;
    this.isDraining = true;
    for (const fn of this.drainListeners) fn();
  }

  onDraining(fn: () => void): () => void {
    this.drainListeners.add(fn);
    return () => this.drainListeners.delete(fn);
  }

  isTooBig(bytes: number): boolean {
    return bytes > this.maxJobSize;
  }

  /** True when a body of `bytes` would take the cluster over --max-job-bytes (body-budget.ts). */
  overBudget(bytes: number): boolean {
    return this.bodyBudget.over(bytes);
  }

  /** Bodies of `bytes` were committed (a put) or removed (negative: a delete). */
  addedBytes(bytes: number): void {
    this.bodyBudget.added(bytes);
  }

  // ---- RealmMember: the node's lease acts for every realm ---------------------------------------

  connections(): number {
    return this.clients.size;
  }

  async reclaim(db: Queryable, node: number | null): Promise<void> {
    const rows = await run<{ tube: string }>(db, node === null ? this.sql.reclaimGone : this.sql.reclaimNode, node === null ? [] : [node]);
    if (rows.length > 0) this.jobsReady(rows.map((r) => r.tube), true);
    await this.hooks.reclaim(db, node);
  }

  async forgetNodes(db: Queryable, cutoff: number): Promise<void> {
    await run(db, this.sql.foldTotals, [cutoff]);
  }

  othersCounted(others: number): void {
    this.wakeups.othersCounted(others);
  }

  async stop(): Promise<void> {
    this.closed = true;
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.due.stop();
    this.policies.close();
    for (const client of this.clients.values()) client.stopTimers();
  }

  async close(): Promise<void> {
    // The node gave back what its clients held (reclaim): the other nodes hear of it first.
    await this.wakeups.close();
  }

  // ---- clients ---------------------------------------------------------------------------------

  connect(delegate: ClientDelegate, peer: string, options: ConnectOptions = {}): ClientOperations {
    const client = new ClusterClient(this, this.nextClientId++, delegate, peer, options);
    this.clients.set(client.id, client);
    this.totalConnections++;
    return client;
  }

  forget(client: ClusterClient): void {
    this.clients.delete(client.id);
    this.dispatch.delete(client);
  }

  /**
   * Forgets a tube's local facts once no client here uses or watches it (its per-node command
   * counts go with them, as beanstalkd's go with the tube), so tubes named once do not pile up.
   */
  releaseTube(name: string): void {
    const t = this.localTubes.get(name);
    if (t !== undefined && !referenced(t)) this.localTubes.delete(name);
  }

  /** This node's clients' references to a tube (use, watch, wait), which keep it listed. */
  localTube(name: string): LocalTube {
    let t = this.localTubes.get(name);
    if (t === undefined) this.localTubes.set(name, (t = { using: 0, watching: 0, waiting: 0, deletes: 0, pauses: 0 }));
    return t;
  }

  addWaiter(client: ClusterClient): void {
    this.dispatch.add(client);
  }

  removeWaiter(client: ClusterClient): void {
    this.dispatch.delete(client);
  }

  useUpIds(n: number): void {
    this.puts.useUpIds(n);
  }

  /** Connections gone whose jobs could not be given back yet (the database was unreachable). */
  private readonly unreleased: { node: number; conn: number }[] = [];

  /**
   * What a closed connection held is ready again; if the database cannot be reached now, the
   * poll tries again each second (the node's lease does not run out while it lives, so nothing
   * else would give the jobs back before their TTRs).
   */
  async giveBackConnection(node: number, conn: number): Promise<boolean> {
    try {
      const rows = await run<{ tube: string }>(this.pool, this.sql.releaseConnection, [node, conn]);
      if (rows.length > 0) this.jobsReady(rows.map((r) => r.tube), true);
      return true;
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: giving back a closed connection\'s jobs failed; trying again');
      this.unreleased.push({ node, conn });
      return false;
    }
  }

  /** Queues a put for this turn's batch (`conn`: the client putting it, 0 for the dashboard). */
  insert(tube: string, job: NewJob, conn = 0): Promise<Result<JobBytes>> {
    const own = this.hooks.insert(tube, job, conn);
    if (own !== null) return own;
    const cap = this.policies.queueCap(tube);
    return cap === null ? this.puts.add(tube, job, conn) : this.puts.addUnderCap(tube, job, cap);
  }

  /** A client of this node left, after what it held was given back (the Gearman realm: what it waited on). */
  clientLeft(conn: number): Promise<void> {
    return this.hooks.clientLeft(conn);
  }

  /**
   * Jobs became ready in `tubes` through this node: its own waiters look now, the other nodes'
   * once the change is committed (it is when this is called) and they hear of it.
   */
  jobsReady(tubes: Iterable<string>, tellOthers: boolean): void {
    const set = new Set(tubes);
    if (tellOthers) for (const tube of set) this.wakeups.jobsReady(tube);
    this.wake(set);
  }

  delayedDue(at: number): void {
    this.wakeups.delayedDue(at);
    this.armDue(at);
  }

  /**
   * A reservation in `tube` ended, its job now in `state` (due at `dueAt` when delayed; null:
   * gone). Waiters look again where it is ready, and where the tube's cap may have a free place.
   */
  reservationEnded(tube: string, state: number | null, dueAt = 0): void {
    if (state === STATE.delayed) this.delayedDue(dueAt);
    if (state === STATE.ready || this.policies.capped(tube)) this.jobsReady([tube], true);
  }

  /** News for the waiters: they look for jobs in these tubes (null: in any tube). */
  wake(tubes: Set<string> | null): void {
    this.dispatch.wake(tubes);
  }

  /** Bumped whenever waiting clients are woken. */
  get wakeGeneration(): number {
    return this.dispatch.generation;
  }

  /** One turn's reserves: one statement per set of watched tubes, the clients in the order they asked. */
  private async reserveMany(requests: ReserveRequest[]): Promise<(ReservedRow | null | Error)[]> {
    const now = this.now();
    const groups = new Map<string, number[]>();
    requests.forEach((r, i) => {
      if (!r.live()) return; // its client stopped waiting, or left
      const key = r.tubes.join('\n');
      const group = groups.get(key);
      if (group === undefined) groups.set(key, [i]);
      else group.push(i);
    });
    const out: (ReservedRow | null | Error)[] = requests.map(() => null);
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        // A statement that fails fails its own requests only. Tubes with a cap or a rate go
        // through their gates, where the history trigger records the reserves.
        const tubes = requests[indexes[0]!]!.tubes;
        const gated = this.policies.gates(tubes);
        const rows = await run<ReservedRow & { rn: number }>(gated ? this.pool : this.hot.pool, gated ? this.policies.sql.reserveGated : this.hot.reserveMany, [
          tubes,
          this.nodeId,
          indexes.map((i) => requests[i]!.conn),
          now,
          indexes.map((i) => requests[i]!.hold),
          indexes.length,
        ]);
        if (gated && rows.length < indexes.length) this.policies.retryRated(tubes, (rated) => this.wake(rated));
        // By position, not by connection: a client may be in one batch twice (its own reserve,
        // and an offer made while it still waited), and each request gets its own job.
        for (const row of rows) out[indexes[row.rn - 1]!] = row;
      }).map((p, g) =>
        p.catch((err: unknown) => {
          for (const i of [...groups.values()][g]!) out[i] = err instanceof Error ? err : new Error(String(err));
        }),
      ),
    );
    return out;
  }

  /** A client of this node reserved a job (the Gearman realm notes the abandoned ones). */
  taken(row: ReservedRow): void {
    this.hooks.taken(row);
  }

  /** A job a client here took went back before it was answered (or the client left). */
  untaken(id: number): void {
    this.hooks.untaken(id);
  }

  /** One turn's deletes by clients, in one statement (the Gearman realm's sends final packets with it). */
  private async deleteMany(requests: DeleteRequest[]): Promise<({ tube: string } | null)[]> {
    // The Gearman realm: a job's last packets on their way first.
    const first = this.hooks.beforeDeletes();
    if (first !== null) await first;
    // A job a client asks to delete twice in one turn (pipelined) is deleted by its first
    // request; the later one finds it gone, as it would one after the other.
    const seen = new Set<string>();
    const sent = new Set(requests.filter((r) => !seen.has(`${r.id}:${r.client}`) && seen.add(`${r.id}:${r.client}`)));
    const batch = [...sent];
    const rows = await (this.hooks.runDeletes(batch) ?? run<DeletedRow>(this.hot.pool, this.hot.deleteMany, deleteArrays(batch)));
    this.addedBytes(-rows.reduce((n, row) => n + row.bytes, 0));
    for (const row of rows) if (this.policies.capped(row.tube)) this.reservationEnded(row.tube, null);
    const done = new Map(rows.map((row) => [`${row.id}:${row.client}`, row]));
    return requests.map((r) => (sent.has(r) ? (done.get(`${r.id}:${r.client}`) ?? null) : null));
  }

  /** The slow safety net: overdue reservations, due delayed jobs, and waiters look at every tube. */
  private async poll(): Promise<void> {
    // A slow database must not pile polls on top of each other.
    if (this.closed || this.polling) return;
    this.polling = true;
    try {
      await this.pollOnce();
    } finally {
      this.polling = false;
    }
  }

  private async pollOnce(): Promise<void> {
    const unreleased = this.unreleased.splice(0);
    for (let i = 0; i < unreleased.length; i++) {
      if (await this.giveBackConnection(unreleased[i]!.node, unreleased[i]!.conn)) continue;
      this.unreleased.push(...unreleased.slice(i + 1)); // the failed one queued itself again
      break;
    }
    try {
      const expired = await run<{ tube: string; state: number; due_at: number }>(this.pool, this.sql.expireOverdue, [
        this.now(),
        OVERDUE_GRACE_MS,
        this.defaultDeadLetterAfter,
      ]);
      for (const row of expired) this.reservationEnded(row.tube, row.state, row.due_at);
      await this.policies.load();
      await this.due.promote();
      await this.bodyBudget.sync();
      // The ring: every node with history trims to its size (the smallest one wins).
      if (this.o.historyEvents > 0) await run(this.pool, this.sql.trimHistory, [this.o.historyEvents]);
      await this.tables.tidy();
      await this.hooks.poll();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: poll failed');
    }
    if (this.dispatch.size > 0) this.wake(null);
  }

  // ---- delayed jobs (due-timer.ts) ---------------------------------------------------------------

  /** Times the promotion of delayed jobs for `at`, if sooner than what is timed now. */
  armDue(at: number): void {
    this.due.arm(at);
  }

  // ---- reads (job-reads.ts, tube-counts.ts) --------------------------------------------------------

  peek(id: number): Promise<JobBytes | undefined> {
    return this.reads.peek(id);
  }

  job(id: number): Promise<JobSnapshot | undefined> {
    return this.reads.job(id);
  }

  jobHistory(id: number): Promise<JobHistoryDto> {
    return this.reads.jobHistory(id);
  }

  visitJobs(ids: Iterable<number>, visit: (id: number, view: JobView | undefined) => void): Promise<void> {
    return this.reads.visitJobs(ids, visit);
  }

  eachJob(visit: (job: JobSnapshot) => void): Promise<void> {
    return this.reads.eachJob(visit);
  }

  scanJobs(): JobScan {
    return this.reads.scanJobs();
  }

  listJobs(tube: string, state: JobState, limit: number, cursor: string | null): Promise<JobPage<JobSnapshot> | undefined> {
    return this.reads.listJobs(tube, state, limit, cursor);
  }

  nextInList(id: number): Promise<number | null> {
    return this.reads.nextInList(id);
  }

  tubeNames(): Promise<string[]> {
    return this.counts.names();
  }

  tube(name: string): Promise<TubeCounts | undefined> {
    return this.counts.tube(name);
  }

  /** Every tube's counts, reused for a second (the dashboard asks four times a second). */
  tubes(fresh = false): Promise<TubeCounts[]> {
    return this.counts.tubes(fresh);
  }

  /** A database times its own deadlines (a delayed job's, a reservation's): nothing to re-arm. */
  onActivity(): void {}

  async readyAges(nearShare: number): Promise<Map<string, TubeAges>> {
    const rows = await run<{ tube: string; oldest_ready: number | null; near_ttr: number }>(this.pool, this.sql.readyAges, [this.now(), nearShare]);
    return new Map(rows.map((r) => [r.tube, { oldestReadyCreatedAt: r.oldest_ready ?? Number.POSITIVE_INFINITY, nearTtr: r.near_ttr }]));
  }

  watcherCount(id: number): number {
    return this.watchers.count(id);
  }

  async serverCounts(): Promise<ServerCounts> {
    const [[row], names] = await Promise.all([run<CountsRow & { total_jobs: number }>(this.pool, this.sql.serverCounts, []), this.tubeNames()]);
    let producers = 0;
    let workers = 0;
    let waiting = 0;
    for (const c of this.clients.values()) {
      if (c.producer) producers++;
      if (c.worker) workers++;
      if (c.isWaiting) waiting++;
    }
    return {
      urgent: row!.urgent,
      ready: row!.ready,
      reserved: row!.reserved,
      delayed: row!.delayed,
      buried: row!.buried,
      jobTimeouts: this.jobTimeouts,
      totalJobs: row!.total_jobs,
      tubes: names.length,
      currentConnections: this.clients.size,
      totalConnections: this.totalConnections,
      producers,
      workers,
      waiting,
      draining: this.isDraining,
      startedAt: this.startedAt,
      maxJobSize: this.maxJobSize,
      operations: { ...this.commands },
    };
  }

  sessions(): SessionView[] {
    return [...this.clients.values()].map((c) => c.view());
  }

  closeConnection(id: number): Result<void> {
    const client = this.clients.get(id);
    if (client === undefined) return fail('NOT_FOUND');
    client.delegate.disconnect();
    return ok(undefined);
  }

  count(operation: CountedCommand): void {
    this.commands[operation]++;
  }

  // ---- changes (the dashboard's, admin-changes.ts; the protocol's go through a client) ------------

  put(tube: string, job: NewJob): Promise<Result<JobSnapshot>> {
    return this.changes.put(tube, job);
  }

  delete(id: number): Promise<Result<void>> {
    return this.changes.delete(id);
  }

  kickJob(id: number): Promise<Result<JobSnapshot>> {
    return this.changes.kickJob(id);
  }

  kick(tube: string, bound: number): Promise<Result<number>> {
    return this.changes.kick(tube, bound);
  }

  /** Kicks up to `bound` of `tube`'s buried jobs, or its delayed ones when none is buried. */
  kickIn(tube: string, bound: number): Promise<number> {
    return this.changes.kickIn(tube, bound);
  }

  pauseTube(tube: string, delayMs: number): Promise<Result<TubeCounts>> {
    return this.changes.pauseTube(tube, delayMs);
  }

  tubeSettings(tube: string): Promise<TubeSettingsView> {
    return this.changes.tubeSettings(tube);
  }

  setTubeSettings(tube: string, settings: TubeSettings | null): Promise<Result<TubeSettingsView>> {
    return this.changes.setTubeSettings(tube, settings);
  }

  tubePolicy(tube: string): Promise<TubePolicyView> {
    return this.changes.tubePolicy(tube);
  }

  setTubePolicy(tube: string, policy: TubePolicy | null): Promise<Result<TubePolicyView>> {
    return this.changes.setTubePolicy(tube, policy);
  }

  editJob(id: number, change: JobChange): Promise<Result<JobSnapshot>> {
    return this.changes.editJob(id, change);
  }

  clear(tube: string, state: QueuedState): Promise<Result<number>> {
    return this.changes.clear(tube, state);
  }

  move(tube: string, state: QueuedState, to: string, limit: number): Promise<Result<number>> {
    return this.changes.move(tube, state, to, limit);
  }

  /** A tube's policy was set here: the other nodes hear of it. */
  policySet(): void {
    this.wakeups.policySet();
  }

  operatorRemoved(): void {
    this.hooks.operatorRemoved();
  }

  // ---- news of a job (this node's watchers: a cluster relays none between nodes yet) ------------

  attachWatcher(id: number, watcher: JobWatcher): boolean {
    this.watchers.attach(id, watcher);
    return true;
  }

  detachWatcher(id: number, watcher: JobWatcher): number {
    return this.watchers.detach(id, watcher);
  }

  report(id: number, update: JobUpdate): number {
    return this.watchers.report(id, update);
  }

  watchedIds(): Iterable<number> {
    return this.watchers.ids();
  }

  updatesFor(node: number | '*'): void {
    this.wakeups.updatesFor(node);
  }

  /** Job `id` was deleted through this node: its watchers here hear no more of it. */
  jobEnded(id: number): void {
    this.watchers.end(id);
  }

  /** A statement failed (the database is unreachable, a timeout): the command answers INTERNAL_ERROR. */
  failed<T>(err: unknown): Result<T> {
    this.log.warn({ err: (err as Error).message }, 'cluster: a statement failed');
    return fail('INTERNAL_ERROR');
  }
}
