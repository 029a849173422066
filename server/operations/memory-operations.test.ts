/**
 * The in-memory operations: the rules they own (TTR floor, job size, tube lifecycle), bulk work
 * in slices (a value for one slice, a promise beyond), and snapshots that are copies.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../engine/clock.js';
import { Engine } from '../engine/engine.js';
import { immediateDurability } from '../engine/journal.js';
import { T0 } from '../engine/testing.js';
import { MemoryOperations } from './memory-operations.js';
import type { ClientDelegate, ClientOperations, JobBytes, Result } from './operations.js';
import { SLICE } from './sliced.js';
import { jobTtrMs, jobState } from '../engine/records.js';

const body = (text: string): Buffer => Buffer.from(text);
const job = (priority = 0, ttrMs = 60_000) => ({ priority, delayMs: 0, ttrMs, body: body('x') });

class Delegate implements ClientDelegate {
  readonly calls: string[] = [];
  reserved(j: JobBytes): void {
    this.calls.push(`reserved ${j.id}`);
  }
  timedOut(): void {
    this.calls.push('timed-out');
  }
  deadlineSoon(): void {
    this.calls.push('deadline-soon');
  }
  woken(): void {
    this.calls.push('woken');
  }
  disconnect(): void {
    this.calls.push('disconnect');
  }
}

function value<T>(r: Result<T> | Promise<Result<T>>): T {
  if (r instanceof Promise) throw new Error('expected a value, got a promise');
  if (!r.ok) throw new Error(`expected success, got ${r.code}`);
  return r.value;
}

let engine: Engine;
let ops: MemoryOperations;
let activity: number;

beforeEach(() => {
  activity = 0;
  engine = new Engine({ clock: new FakeClock(T0), maxJobSize: 10 });
  ops = new MemoryOperations({ engine, durability: immediateDurability, onActivity: () => activity++ });
});

function client(): ClientOperations {
  return ops.connect(new Delegate(), 'test');
}

function putVia(c: ClientOperations, ttrMs = 60_000, text = 'x'): number {
  const id = value(c.admitPut(text.length));
  return value(c.put(id, { priority: 0, delayMs: 0, ttrMs, body: body(text) })).id;
}

describe('rules the operations own', () => {
  it('raise a TTR below one second to one second, for a client, the dashboard and an edit', () => {
    const c = client();
    const a = putVia(c, 0);
    const b = value(ops.put('default', job(0, 999))).id;
    expect(value(ops.editJob(b, { ttrMs: 1 })).ttrMs).toBe(1000);
    expect(jobTtrMs(engine.job(a)!)).toBe(1000);
    expect(jobTtrMs(engine.job(b)!)).toBe(1000);
    expect(value(ops.put('default', job(0, 1001))).ttrMs).toBe(1001);
  });

  it('refuse a body over the job size with JOB_TOO_BIG, on every path', () => {
    expect(ops.isTooBig(10)).toBe(false);
    expect(ops.isTooBig(11)).toBe(true);
    expect(ops.put('default', { ...job(), body: Buffer.alloc(11) })).toEqual({ ok: false, code: 'JOB_TOO_BIG' });
    const id = value(ops.put('default', job())).id;
    expect(ops.editJob(id, { body: Buffer.alloc(11) })).toEqual({ ok: false, code: 'JOB_TOO_BIG' });
    expect(ops.serverCounts().maxJobSize).toBe(10);
  });

  it('create a tube for a put into a new one, and drop it again when the put fails', () => {
    value(ops.put('fresh', job()));
    expect(ops.tubeNames()).toEqual(['default', 'fresh']);
    engine.setDraining();
    expect(ops.put('doomed', job())).toEqual({ ok: false, code: 'DRAINING' });
    expect(ops.tubeNames()).toEqual(['default', 'fresh']);
  });

  it('drop a tube when its last job is deleted by the dashboard, and refuse to delete a held job', () => {
    const id = value(ops.put('brief', job())).id;
    value(ops.delete(id));
    expect(ops.tube('brief')).toBeUndefined();
    const c = client();
    putVia(c);
    expect(c.reserve(0)).toMatchObject({ kind: 'reserved' });
    const held = engine.job(2)!;
    expect(jobState(held)).toBe('reserved');
    expect(ops.delete(held.id)).toEqual({ ok: false, code: 'JOB_RESERVED' });
  });

  it('count the changes they make for every door, and the commands a door counts', () => {
    value(ops.put('default', job()));
    ops.count('stats');
    value(ops.pauseTube('default', 0));
    expect(ops.serverCounts().operations).toMatchObject({ put: 1, stats: 1, 'pause-tube': 1 });
  });
});

describe('bulk work in slices', () => {
  function buryMany(n: number): void {
    const c = client();
    for (let i = 0; i < n; i++) putVia(c);
    for (let i = 0; i < n; i++) {
      const r = c.reserve(0);
      if (r instanceof Promise || r.kind !== 'reserved') throw new Error('no job');
      value(c.bury(r.job.id, 0));
    }
  }

  it('answer a kick that fits one slice at once, with a value', () => {
    buryMany(10);
    expect(ops.kick('default', 4)).toEqual({ ok: true, value: 4 });
    expect(client().kick(100)).toBe(6);
  });

  it('answer a kick beyond one slice with a promise, yielding between slices', async () => {
    buryMany(SLICE * 2 + 5);
    const kicked = ops.kick('default', 1_000_000);
    expect(kicked).toBeInstanceOf(Promise);
    // The first slice is done before the answer is returned; the rest on later turns.
    expect(engine.stats.buried).toBe(SLICE + 5);
    expect(await kicked).toEqual({ ok: true, value: SLICE * 2 + 5 });
    expect(engine.stats.ready).toBe(SLICE * 2 + 5);
    expect(activity).toBeGreaterThanOrEqual(2);
  });

  it('clear and move in slices, keeping ids, and report a tube that is not there', async () => {
    for (let i = 0; i < SLICE + 3; i++) value(ops.put('from', job()));
    expect(await ops.move('from', 'ready', 'to', SLICE + 1)).toEqual({ ok: true, value: SLICE + 1 });
    expect(ops.tube('to')!.ready).toBe(SLICE + 1);
    expect(engine.job(1)!.tube.name).toBe('to');
    expect(await ops.clear('to', 'ready')).toEqual({ ok: true, value: SLICE + 1 });
    expect(ops.tube('to')).toBeUndefined();
    expect(ops.clear('nowhere', 'ready')).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(ops.kick('nowhere', 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(ops.move('nowhere', 'ready', 'x', 1)).toEqual({ ok: false, code: 'NOT_FOUND' });
  });

  it('let a client that held many jobs go in slices', async () => {
    const c = client();
    for (let i = 0; i < SLICE + 10; i++) putVia(c);
    for (let i = 0; i < SLICE + 10; i++) c.reserve(0);
    expect(engine.stats.reserved).toBe(SLICE + 10);
    const closing = c.close();
    expect(closing).toBeInstanceOf(Promise);
    await closing;
    expect(engine.stats.ready).toBe(SLICE + 10);
    expect(engine.stats.currentConnections).toBe(0);
  });
});

describe('snapshots', () => {
  it('are copies: later changes do not show in them', () => {
    const id = value(ops.put('t', job(5))).id;
    const tube = ops.tube('t')!;
    const snapshot = ops.job(id)!;
    value(ops.editJob(id, { priority: 9, body: body('changed') }));
    value(ops.put('t', job()));
    expect(tube.ready).toBe(1);
    expect(snapshot.priority).toBe(5);
    expect(snapshot.body.toString()).toBe('x');
    expect(ops.job(id)!.priority).toBe(9);
    expect(ops.tube('t')!.ready).toBe(2);
  });

  it('visitJobs reuses one view, whose body stamp changes when the body does', () => {
    const a = value(ops.put('default', job())).id;
    const b = value(ops.put('default', job())).id;
    const seen: [number, number | undefined][] = [];
    const views = new Set<object>();
    ops.visitJobs([a, b, 99], (id, view) => {
      seen.push([id, view?.id]);
      if (view !== undefined) views.add(view);
    });
    expect(seen).toEqual([
      [a, a],
      [b, b],
      [99, undefined],
    ]);
    expect(views.size).toBe(1);
    let before = 0;
    ops.visitJobs([a], (_, v) => (before = v!.bodyStamp));
    value(ops.editJob(a, { body: body('new') }));
    let after = 0;
    ops.visitJobs([a], (_, v) => (after = v!.bodyStamp));
    expect(after).not.toBe(before);
  });

  it('show a session as plain values', () => {
    const c = client();
    value(c.watch('w'));
    putVia(c);
    const now = engine.now();
    c.noteCommand('reserve-with-timeout', now);
    c.reserve(0);
    expect(ops.sessions()).toEqual([
      {
        id: c.id,
        peer: 'test',
        identity: null,
        openedAt: expect.any(Number),
        lastCommandAt: now,
        lastCommand: 'reserve-with-timeout',
        holding: [{ id: 1, tube: 'default', deadlineAt: now + 60_000 }],
        producer: true,
        worker: true,
        waiting: false,
        using: 'default',
        watching: ['default', 'w'],
        reserved: [1],
      },
    ]);
  });
});
