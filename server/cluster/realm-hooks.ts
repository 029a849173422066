/**
 * What a realm adds to the shared store (cluster-store.ts): the beanstalkd realm adds nothing
 * (NO_HOOKS); the Gearman realm (gearman-hooks.ts) coalesces unique submits, relays WORK_*
 * packets between nodes and drops jobs nobody waits for. The store calls its realm's hooks at
 * these points and keeps no realm's logic of its own.
 */
import type pg from 'pg';
import type { Logger } from 'pino';
import type { JobBytes, JobUpdate, JobWatcher, NewJob, Result } from '../operations/operations.js';
import type { DeletedRow, DeleteRequest, ReservedRow } from './batched.js';
import type { Queryable } from './pool.js';
import type { ClusterPolicies } from './tube-policies.js';
import type { WakeupHandlers } from './wakeups.js';

/** What a realm's hooks use of their store. */
export interface HookedStore {
  readonly pool: pg.Pool;
  readonly log: Logger;
  readonly nodeId: number;
  now(): number;
  readonly policies: Pick<ClusterPolicies, 'queueCap' | 'sql'>;
  /** Bodies of `bytes` were committed (negative: removed). */
  addedBytes(bytes: number): void;
  jobsReady(tubes: Iterable<string>, tellOthers: boolean): void;
  delayedDue(at: number): void;
  /** Tells node `node` ('*': every node) that packets wait for its clients. */
  updatesFor(node: number | '*'): void;
  /** This node's watchers of job `id` hear `update`. */
  report(id: number, update: JobUpdate): number;
  detachWatcher(id: number, watcher: JobWatcher): number;
  /** The jobs this node's clients watch. */
  watchedIds(): Iterable<number>;
  jobEnded(id: number): void;
  failed<T>(err: unknown): Result<T>;
}

export interface RealmHooks {
  /** News of other nodes the realm listens for besides ready and due jobs and policies. */
  readonly handlers: Partial<WakeupHandlers>;
  /** Once the store serves (it listens, it polls). */
  start(): Promise<void>;
  /** A put the realm makes with a statement of its own; null: the turn's batch takes it. */
  insert(tube: string, job: NewJob, conn: number): Promise<Result<JobBytes>> | null;
  /** A client of this node reserved a job. */
  taken(row: ReservedRow): void;
  /** A job a client here took went back before it was answered (or the client left). */
  untaken(id: number): void;
  /** What a turn's deletes must wait for first; null: nothing. */
  beforeDeletes(): Promise<void> | null;
  /** The statement of a turn's deletes when the realm sends one of its own; null: the plain one. */
  runDeletes(requests: DeleteRequest[]): Promise<DeletedRow[]> | null;
  /** An operator removed jobs (a delete, a clear) through this node. */
  operatorRemoved(): void;
  /** Client `conn` of this node left, after what it held was given back. */
  clientLeft(conn: number): Promise<void>;
  /** A node's (null: every gone node's) reservations were given back in `db`'s transaction. */
  reclaim(db: Queryable, node: number | null): Promise<void>;
  /** What else the realm looks at in the store's slow poll. */
  poll(): Promise<void>;
}

/** The beanstalkd realm's: the store's own behaviour, nothing added. */
export const NO_HOOKS: RealmHooks = {
  handlers: {},
  start: async () => {},
  insert: () => null,
  taken: () => {},
  untaken: () => {},
  beforeDeletes: () => null,
  runDeletes: () => null,
  operatorRemoved: () => {},
  clientLeft: async () => {},
  reclaim: async () => {},
  poll: async () => {},
};
