import type pg from 'pg';
import type { Logger } from 'pino';
import type { JobBytes, NewJob, Result } from '../operations/operations.js';
import type { DeleteRequest, LocalTube, ReservedRow, ReserveRequest } from './batched.js';
import type { ClusterSql } from './sql.js';
import type { ClusterPolicies } from './tube-policies.js';
import type { TurnBatch } from './turn-batch.js';

/**
 * What one connected client (`C`, a ClusterClient) uses of its node's store: the database, the
 * batched reserves and deletes, the node's view of each tube, the waiting list, the news of
 * ready jobs, and the limits. The store implements it; a client knows nothing else of it.
 */
export interface ClientStore<C> {
  readonly pool: pg.Pool;
  readonly sql: ClusterSql;
  /** The tube policies as this node knows them, and their statements (a sleeper wakes only for a job it could take). */
  readonly policies: Pick<ClusterPolicies, 'gates' | 'sql'>;
  readonly log: Logger;
  readonly nodeId: number;
  now(): number;
  readonly draining: boolean;
  readonly defaultDeadLetterAfter: number;
  isTooBig(bytes: number): boolean;
  /** True when a body of `bytes` would take the cluster over --max-job-bytes. */
  overBudget(bytes: number): boolean;
  /** Reserves of one turn, from every client of this node, in one statement. */
  readonly reserves: TurnBatch<ReserveRequest, ReservedRow | null>;
  /** Deletes of one turn, in one statement. */
  readonly deletes: TurnBatch<DeleteRequest, { tube: string } | null>;
  /** Puts a job (batched with the turn's other puts); `conn` is the putting client. */
  insert(tube: string, job: NewJob, conn: number): Promise<Result<JobBytes>>;
  /** Takes up `n` ids the protocol handed out before their puts (a put that failed early). */
  useUpIds(n: number): void;
  /** Kicks up to `bound` jobs of `tube`, in slices. */
  kickIn(tube: string, bound: number): Promise<number>;
  /** This node's facts about a tube (clients using, watching, waiting; commands counted here). */
  localTube(name: string): LocalTube;
  /** A client let go of a tube: its facts go once nothing here refers to it. */
  releaseTube(name: string): void;
  /** Timeouts counted on this node (stats' job-timeouts). */
  jobTimeouts: number;
  addWaiter(client: C): void;
  removeWaiter(client: C): void;
  /** Bumped whenever waiting clients are woken: a reserve that saw it change looks again. */
  readonly wakeGeneration: number;
  /** Wakes waiting clients of `tubes` (null: all). */
  wake(tubes: Set<string> | null): void;
  /** Jobs became ready in `tubes`; `tellOthers`: the other nodes hear of it too. */
  jobsReady(tubes: Iterable<string>, tellOthers: boolean): void;
  /** A delayed job is due at `at`: the node times it. */
  delayedDue(at: number): void;
  /** A reservation in `tube` ended, its job now in `state` (a STATE code; due at `dueAt` when delayed). */
  reservationEnded(tube: string, state: number | null, dueAt?: number): void;
  /** The realm's word on a reservation a client just made (Gearman keeps its waiting clients). */
  taken(row: ReservedRow): void;
  untaken(id: number): void;
  /** A job is gone: its watchers are told. */
  jobEnded(id: number): void;
  /** The client is closed: the store forgets it. */
  forget(client: C): void;
  /** Realm cleanup as a client leaves (Gearman: its waiting submits). */
  clientLeft(conn: number): Promise<void>;
  /** Gives back what connection `conn` of node `node` held; false when the database could not. */
  giveBackConnection(node: number, conn: number): Promise<boolean>;
  /** A failed statement as a client's answer: INTERNAL_ERROR, logged. */
  failed<T>(err: unknown): Result<T>;
}
