import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { fail, type Result } from '../common/result.js';
import type { JobBytes, NewJob } from '../operations/operations.js';
import { PutBatch, type PutStore } from './put-batch.js';
import { BEANSTALK_REALM } from './realm.js';
import { STATE } from './schema.js';
import { clusterSql } from './sql.js';

/** A statement the fake database was sent: its name and parameters. */
interface Sent {
  name: string;
  values: unknown[];
}

/** Queue caps the database has and the node does not know yet (the guarded put refuses a batch with one). */
interface Caps {
  inDatabase: Map<string, number>;
  known: Map<string, number>;
  /** The node cannot read them (not a policy it takes): reading the policies leaves them unknown. */
  unreadable?: boolean;
}

/**
 * A store over a fake database that answers each put statement with ids from a counter, in
 * reverse (the statement's RETURNING order is not the arrays' order), or fails with `error`.
 * With `caps`, a batch that puts into a tube with a cap in the database gets no row back, as the
 * guarded statement answers; reading the policies makes the node know them.
 */
function harness(
  error: (Error & { code?: string }) | null = null,
  caps: Caps = { inDatabase: new Map(), known: new Map() },
): { batch: PutBatch; sent: Sent[]; told: string[]; failures: unknown[] } {
  const sent: Sent[] = [];
  const told: string[] = [];
  const failures: unknown[] = [];
  let nextId = 100;
  const pool = {
    query: async ({ name, values }: { name: string; values: unknown[] }) => {
      sent.push({ name, values });
      if (error !== null) throw error;
      if (!name.endsWith('put')) return { rows: [] };
      if ((values[0] as string[]).some((tube) => caps.inDatabase.has(tube))) return { rows: [] };
      const ids = (values[0] as string[]).map(() => nextId++);
      return { rows: ids.reverse().map((id) => ({ id })) };
    },
  } as unknown as pg.Pool;
  const sql = clusterSql(BEANSTALK_REALM);
  const store: PutStore = {
    pool,
    sql,
    hot: { pool, put: sql.put },
    nodeId: 3,
    now: () => 1000,
    addedBytes: (n) => told.push(`bytes ${n}`),
    jobsReady: (tubes) => told.push(`ready ${[...tubes].join(',')}`),
    delayedDue: (at) => told.push(`due ${at}`),
    failed: <T>(err: unknown): Result<T> => (failures.push(err), fail('INTERNAL_ERROR')),
    // Under a cap, the fake database refuses (QUEUE_FULL): which path a put took shows in its answer.
    policies: {
      underCap: async () => null,
      load: async () => {
        if (caps.unreadable !== true) for (const [tube, cap] of caps.inDatabase) caps.known.set(tube, cap);
      },
      queueCap: (tube) => caps.known.get(tube) ?? null,
    },
  };
  return { batch: new PutBatch(store), sent, told, failures };
}

const job = (body: string, delayMs = 0): NewJob => ({ priority: 1, delayMs, ttrMs: 1000, body: Buffer.from(body) });
const ids = (results: Result<JobBytes>[]): (number | string)[] => results.map((r) => (r.ok ? r.value.id : r.code));

describe('PutBatch', () => {
  it('puts one turn’s jobs in one statement, ids in the order they were put, then tells of ready and due jobs', async () => {
    const { batch, sent, told } = harness();
    const results = await Promise.all([batch.add('a', job('x'), 1), batch.add('b', job('yy', 50), 2), batch.add('a', job('zzz'), 3)]);
    expect(ids(results)).toEqual([100, 101, 102]);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.values.slice(0, 2)).toEqual([
      ['a', 'b', 'a'],
      [STATE.ready, STATE.delayed, STATE.ready],
    ]);
    expect(sent[0]!.values[8]).toBe(3);
    expect(told).toEqual(['bytes 6', 'ready a', 'due 1050']);
  });

  it('draws the ids used up meanwhile before the next put, in the same flush', async () => {
    const { batch, sent } = harness();
    batch.useUpIds(2);
    batch.useUpIds(1);
    await batch.add('a', job('x'), 1);
    expect(sent.map((s) => [s.name, s.values])).toEqual([
      ['beanpole_use_up_ids', [3]],
      ['beanpole_put', expect.any(Array)],
    ]);
    await batch.add('a', job('x'), 1);
    expect(sent.filter((s) => s.name === 'beanpole_use_up_ids')).toHaveLength(1);
  });

  it('answers every put of a failed statement with one result, logged once', async () => {
    const { batch, failures } = harness(new Error('connection lost'));
    const results = await Promise.all([batch.add('a', job('x'), 1), batch.add('a', job('y'), 2)]);
    expect(ids(results)).toEqual(['INTERNAL_ERROR', 'INTERNAL_ERROR']);
    expect(failures).toHaveLength(1);
  });

  it('answers OUT_OF_MEMORY when the database has no room (disk full)', async () => {
    const { batch, failures } = harness(Object.assign(new Error('could not extend file'), { code: '53100' }));
    expect(ids([await batch.add('a', job('x'), 1)])).toEqual(['OUT_OF_MEMORY']);
    expect(failures).toHaveLength(0);
  });

  it('copies a body it does not own: the caller may reuse the buffer', async () => {
    const { batch } = harness();
    const body = Buffer.from('abc');
    const put = batch.add('a', { priority: 1, delayMs: 0, ttrMs: 1000, body }, 1);
    body.write('xyz');
    const result = await put;
    expect(result.ok && result.value.bodyBuf.toString()).toBe('abc');
  });

  it('puts a batch that met a queue cap the node had not heard of again: under the cap, or in the next batch', async () => {
    const caps: Caps = { inDatabase: new Map([['capped', 2]]), known: new Map() };
    const { batch, sent } = harness(null, caps);
    const results = await Promise.all([batch.add('capped', job('x'), 1), batch.add('free', job('y'), 2)]);
    expect(ids(results)).toEqual(['QUEUE_FULL', 100]);
    expect(caps.known.get('capped')).toBe(2);
    // The refused batch, then the free tube's put alone.
    expect(sent.filter((s) => s.name === 'beanpole_put').map((s) => s.values[0])).toEqual([['capped', 'free'], ['free']]);
  });

  it('fails a put whose batch is refused again after the policies were read (a cap the node cannot read)', async () => {
    const { batch, sent, failures } = harness(null, { inDatabase: new Map([['odd', 1]]), known: new Map(), unreadable: true });
    expect(ids([await batch.add('odd', job('x'), 1)])).toEqual(['INTERNAL_ERROR']);
    expect(sent.filter((s) => s.name === 'beanpole_put')).toHaveLength(2);
    expect(failures).toHaveLength(1);
  });
});
