import { describe, expect, it } from 'vitest';
import { TurnBatch, batchFits, type BatchLimits } from './turn-batch.js';

interface Req {
  client: number;
  value: number;
}

/** A statement the test finishes by hand, to hold batches in flight. */
interface Held {
  requests: Req[];
  finish: (results: (number | Error)[]) => void;
  fail: (err: Error) => void;
}

function harness(maxBatch = 512, maxInFlight = 2, bytes: BatchLimits<Req> = {}): { batch: TurnBatch<Req, number>; statements: Held[] } {
  const statements: Held[] = [];
  const batch = new TurnBatch<Req, number>(
    (requests) =>
      new Promise((resolve, reject) => {
        statements.push({ requests, finish: resolve, fail: reject });
      }),
    (r) => r.client,
    { maxBatch, maxInFlight, ...bytes },
  );
  return { batch, statements };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('TurnBatch', () => {
  it('answers the requests of one turn with one statement, each with its own result', async () => {
    const { batch, statements } = harness();
    const answers = [1, 2, 3].map((client) => batch.add({ client, value: client * 10 }));
    await turn();
    expect(statements).toHaveLength(1);
    expect(statements[0]!.requests.map((r) => r.value)).toEqual([10, 20, 30]);
    statements[0]!.finish([11, 21, 31]);
    expect(await Promise.all(answers)).toEqual([11, 21, 31]);
  });

  it('fails one request alone when its result is an Error, and every request of a statement that throws', async () => {
    const { batch, statements } = harness();
    const a = batch.add({ client: 1, value: 1 });
    const b = batch.add({ client: 2, value: 2 });
    await turn();
    statements[0]!.finish([new Error('no such job'), 5]);
    await expect(a).rejects.toThrow('no such job');
    expect(await b).toBe(5);
    const c = batch.add({ client: 1, value: 3 });
    const d = batch.add({ client: 2, value: 4 });
    await turn();
    statements[1]!.fail(new Error('connection lost'));
    await expect(c).rejects.toThrow('connection lost');
    await expect(d).rejects.toThrow('connection lost');
  });

  it('gathers the next batch while statements are in flight, at most maxInFlight of them', async () => {
    const { batch, statements } = harness(512, 2);
    const first = batch.add({ client: 1, value: 1 });
    await turn();
    const second = batch.add({ client: 2, value: 2 });
    await turn();
    // Two in flight: later requests wait, gathered into one statement.
    const later = [3, 4, 5].map((client) => batch.add({ client, value: client }));
    await turn();
    expect(statements).toHaveLength(2);
    statements[0]!.finish([1]);
    await first;
    await turn();
    expect(statements).toHaveLength(3);
    expect(statements[2]!.requests.map((r) => r.value)).toEqual([3, 4, 5]);
    statements[1]!.finish([2]);
    statements[2]!.finish([3, 4, 5]);
    expect(await second).toBe(2);
    expect(await Promise.all(later)).toEqual([3, 4, 5]);
  });

  it('puts at most maxBatch requests in one statement; the rest go in the next ones', async () => {
    const { batch, statements } = harness(2, 4);
    const answers = [1, 2, 3, 4, 5].map((client) => batch.add({ client, value: client }));
    for (let i = 0; i < 3; i++) {
      await turn();
      expect(statements[i]!.requests.length).toBeLessThanOrEqual(2);
      statements[i]!.finish(statements[i]!.requests.map((r) => r.value));
      await turn();
    }
    expect(statements.map((s) => s.requests.length)).toEqual([2, 2, 1]);
    expect(await Promise.all(answers)).toEqual([1, 2, 3, 4, 5]);
  });

  it('keeps a client’s second request out of the statement its first is in flight in', async () => {
    const { batch, statements } = harness();
    const first = batch.add({ client: 7, value: 1 });
    await turn();
    const second = batch.add({ client: 7, value: 2 });
    const other = batch.add({ client: 8, value: 3 });
    await turn();
    expect(statements.map((s) => s.requests.map((r) => r.value))).toEqual([[1], [3]]);
    statements[1]!.finish([3]);
    expect(await other).toBe(3);
    statements[0]!.finish([1]);
    expect(await first).toBe(1);
    await turn();
    expect(statements[2]!.requests.map((r) => r.value)).toEqual([2]);
    statements[2]!.finish([2]);
    expect(await second).toBe(2);
  });

  it('puts at most maxBytes in one statement, each client’s requests still in order', async () => {
    // A request's value stands for its bytes.
    const { batch, statements } = harness(512, 4, { maxBytes: 10, bytesOf: (r) => r.value });
    const answers = [
      batch.add({ client: 1, value: 4 }),
      batch.add({ client: 2, value: 5 }),
      batch.add({ client: 3, value: 2 }),
      batch.add({ client: 4, value: 1 }),
    ];
    await turn();
    // 4 + 5 fit; 2 would make 11; 1 still fits after it (a later, smaller request goes ahead).
    expect(statements[0]!.requests.map((r) => r.value)).toEqual([4, 5, 1]);
    statements[0]!.finish([4, 5, 1]);
    await answers[0];
    await turn();
    expect(statements[1]!.requests.map((r) => r.value)).toEqual([2]);
    statements[1]!.finish([2]);
    expect(await Promise.all(answers)).toEqual([4, 5, 2, 1]);
  });
});

describe('batchFits', () => {
  const size = (n: number): number => n;

  it('takes up to maxBatch requests when no byte limit is set', () => {
    const fits = batchFits<number>({ maxBatch: 2 });
    expect(fits([], 100)).toBe(true);
    expect(fits([1], 100)).toBe(true);
    expect(fits([1, 2], 1)).toBe(false);
  });

  it('counts the bytes of what it took and refuses what would go over maxBytes', () => {
    const fits = batchFits<number>({ maxBytes: 10, bytesOf: size });
    const taken: number[] = [];
    for (const n of [6, 3, 2, 1]) if (fits(taken, n)) taken.push(n);
    expect(taken).toEqual([6, 3, 1]);
  });

  it('always takes a statement’s first request, however big', () => {
    const fits = batchFits<number>({ maxBytes: 10, bytesOf: size });
    expect(fits([], 50)).toBe(true);
    expect(fits([50], 1)).toBe(false);
  });

  it('starts its count afresh for each gathering', () => {
    const limits: BatchLimits<number> = { maxBytes: 10, bytesOf: size };
    expect(batchFits(limits)([], 9)).toBe(true);
    const next = batchFits(limits);
    expect(next([], 9)).toBe(true);
    expect(next([9], 1)).toBe(true);
  });

  it('holds both limits at once: the request count first', () => {
    const fits = batchFits<number>({ maxBatch: 1, maxBytes: 10, bytesOf: size });
    expect(fits([], 1)).toBe(true);
    expect(fits([1], 1)).toBe(false);
  });
});
