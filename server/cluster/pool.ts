/** The node's connections to PostgreSQL: a small pool for statements, and what they share. */
import pg from 'pg';
import type { Logger } from 'pino';
import type { PrimaryFinder } from './primary-finder.js';
import type { Statement } from './sql.js';

/** Statements at once: commands of every client of this node share these connections. */
export const POOL_SIZE = 8;
/** A command waits this long for a connection or an answer before it fails (INTERNAL_ERROR). */
export const STATEMENT_TIMEOUT_MS = 10_000;

/** Every bigint the schema holds (ids, epoch ms, counts) fits a double: read them as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 && format !== 'binary' ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * Every connection of a node (the host comes from its PrimaryFinder): TCP keepalive, so that a connection a firewall dropped in silence
 * fails instead of waiting for ever, and a bound on connecting and on each statement. With
 * `history`, the job changes its statements make are recorded (schema.ts, the history trigger);
 * with `gearmanJobRetries`, a Gearman job they give back for the N-th time is dropped (schema.ts).
 */
export function connectionConfig(history = false, gearmanJobRetries = 0): pg.ClientConfig {
  // Settings the triggers read (schema.ts): history, and --gearman-job-retries.
  const settings = [...(history ? ['-c beanpole.history=on'] : []), ...(gearmanJobRetries > 0 ? [`-c beanpole.gearman_job_retries=${gearmanJobRetries}`] : [])];
  return {
    ...(settings.length > 0 ? { options: settings.join(' ') } : {}),
    types,
    application_name: 'beanpole',
    keepAlive: true,
    connectionTimeoutMillis: STATEMENT_TIMEOUT_MS,
    query_timeout: STATEMENT_TIMEOUT_MS,
  };
}

/**
 * Connections of the hot path (ClusterNode.hotPool): the batched puts, reserves and deletes of
 * both realms, each kind with at most two batches in flight (a reserve batch runs a statement
 * per set of watched tubes): as many as the pool the statements shared before, beyond which
 * they queue for a connection.
 */
export const HOT_POOL_SIZE = POOL_SIZE;

export function createPool(database: PrimaryFinder, log: Logger, history: boolean, size = POOL_SIZE, gearmanJobRetries = 0): pg.Pool {
  const pool = new pg.Pool({
    ...connectionConfig(history, gearmanJobRetries),
    // Each new connection goes to the primary of the moment (failover-client.ts).
    Client: database.Client,
    max: size,
    connectionTimeoutMillis: STATEMENT_TIMEOUT_MS,
    query_timeout: STATEMENT_TIMEOUT_MS,
    idleTimeoutMillis: 60_000,
  });
  // An idle connection that dies (a database restart) is an 'error' on the pool: the pool drops
  // it and opens another when next needed.
  pool.on('error', (err) => log.warn({ err: err.message }, 'cluster: a PostgreSQL connection failed'));
  return pool;
}

/** Where a statement runs: the pool, or one connection (the heartbeat's). */
export type Queryable = pg.Pool | pg.ClientBase;

/** Runs a named (prepared) statement on the pool. */
export async function run<R extends pg.QueryResultRow>(pool: Queryable, statement: Statement, values: unknown[]): Promise<R[]> {
  const result = await pool.query<R>({ name: statement.name, text: statement.text, values });
  return result.rows;
}

/**
 * Runs `work` in one transaction on a connection of the pool: committed if it resolves, rolled
 * back if it throws.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
  const db = await checkOut(pool);
  let broken = false;
  try {
    await db.query('BEGIN');
    const out = await work(db);
    await db.query('COMMIT');
    return out;
  } catch (err) {
    // A connection that cannot even roll back is not given back to the pool.
    await db.query('ROLLBACK').catch(() => (broken = true));
    throw err;
  } finally {
    checkIn(db, broken);
  }
}

/**
 * A connection of the pool, held for a while: the pool listens for its errors only while it is
 * idle, and a connection that dies while held (a database restart) would otherwise throw its
 * 'error' event at the process. The statement in flight fails on its own; the holder releases.
 * The listener goes on in the pool's callback, not after an await: a connection handed over as
 * another statement ends may have the server's FATAL right behind that statement's answer, in
 * the same packet, and it is emitted before an awaiting caller runs on.
 */
export function checkOut(pool: pg.Pool): Promise<pg.PoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((err, db) => {
      if (db === undefined || err instanceof Error) return reject(err ?? new Error('the pool gave no connection'));
      db.on('error', ignoreWhileCheckedOut);
      resolve(db);
    });
  });
}

/** Gives a connection from `checkOut` back to its pool (`broken`: to be closed instead). */
export function checkIn(db: pg.PoolClient, broken = false): void {
  db.off('error', ignoreWhileCheckedOut);
  db.release(broken);
}

function ignoreWhileCheckedOut(): void {}
