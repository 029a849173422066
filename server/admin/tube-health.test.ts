/**
 * The attention list's walk over the jobs: each tube's oldest ready job (not the queue head),
 * reservations close to their TTR, and a backlog that grows minute after minute.
 */
import { describe, expect, it } from 'vitest';
import type { TubeMinuteDto } from '../../shared/dto.js';
import { FakeClock } from '../engine/clock.js';
import { Engine } from '../engine/engine.js';
import { immediateDurability } from '../engine/journal.js';
import { T0 } from '../engine/testing.js';
import { MemoryOperations } from '../operations/memory-operations.js';
import { QUIET_DELEGATE as quiet } from '../testing.js';
import { backlogRise, HEALTH_MAX_AGE_MS, RISE_MIN_JOBS, TubeHealth } from './tube-health.js';

function setup(minutes: (tube: string) => TubeMinuteDto[] = () => []) {
  const clock = new FakeClock(T0);
  const engine = new Engine({ clock });
  const ops = new MemoryOperations({ engine, durability: immediateDurability, onActivity: () => undefined });
  return { clock, ops, health: new TubeHealth(ops, minutes) };
}

const job = (priority: number, ttrMs = 60_000) => ({ priority, delayMs: 0, ttrMs, body: Buffer.from('x') });

describe('TubeHealth', () => {
  it('finds the oldest ready job of a tube even when a newer one is at the head of its queue', async () => {
    const { clock, ops, health } = setup();
    ops.put('mail', job(1000));
    clock.advance(90_000);
    ops.put('mail', job(0)); // more urgent: the head, 0 s old
    ops.put('quiet', job(0));
    ops.put('other', { ...job(0), delayMs: 10_000 }); // delayed: not ready
    clock.advance(5_000);
    const report = await health.report();
    expect(report.find((h) => h.tube === 'mail')).toEqual({ tube: 'mail', oldestReadyAgeSeconds: 95, reservedNearTtr: 0, backlogRise: 0 });
    expect(report.find((h) => h.tube === 'quiet')?.oldestReadyAgeSeconds).toBe(5);
    expect(report.find((h) => h.tube === 'other')).toBeUndefined();
    expect((await ops.tube('mail'))!.nextReadyCreatedAt).toBe(T0 + 90_000);
  });

  it('counts reservations with less than a fifth of their TTR left', async () => {
    const { clock, ops, health } = setup();
    const worker = ops.connect(quiet, 'test');
    await worker.watch('work');
    ops.put('work', job(0, 100_000));
    ops.put('work', job(1, 100_000));
    expect(worker.reserve(0)).toMatchObject({ kind: 'reserved' });
    clock.advance(50_000);
    expect(worker.reserve(0)).toMatchObject({ kind: 'reserved' });
    clock.advance(31_000); // the first has 19 s of 100 left, the second 69 s
    expect((await health.report()).find((h) => h.tube === 'work')).toMatchObject({ reservedNearTtr: 1, oldestReadyAgeSeconds: 0 });
  });

  it('walks once for requests close together, and again once the answer is older than its max age', async () => {
    const { clock, ops, health } = setup();
    ops.put('a', job(0));
    await health.report();
    ops.put('b', job(0));
    expect((await health.report()).map((h) => h.tube)).toEqual(['a']);
    clock.advance(HEALTH_MAX_AGE_MS);
    expect((await health.report()).map((h) => h.tube)).toEqual(['a', 'b']);
  });

  it('walks a large store a slice per turn of the event loop', async () => {
    const { ops, health } = setup();
    for (let i = 0; i < 10_000; i++) ops.put(`t${i % 3}`, job(i % 7));
    let turns = 0;
    let done = false;
    const tick = (): void => {
      turns++;
      if (!done) setImmediate(tick);
    };
    setImmediate(tick);
    const report = await health.report();
    done = true;
    expect(report).toHaveLength(3);
    // 10,000 jobs at 2,048 per slice: other work ran between at least four of them.
    expect(turns).toBeGreaterThanOrEqual(4);
  });
});

describe('backlogRise', () => {
  const at = (minute: number, ready: number, into: number, out: number): TubeMinuteDto => ({ at: T0 + minute * 60_000, ready, buried: 0, in: into, out });
  const now = T0 + 5 * 60_000 + 1000;

  it('is the ready jobs gained while each minute brought more in than went out', () => {
    const minutes = [at(1, 100, 500, 400), at(2, 200, 500, 400), at(3, 300, 500, 400), at(4, 400, 500, 400), at(5, 500, 500, 400)];
    expect(backlogRise(520, minutes, now)).toBe(420);
  });

  it('is 0 when a minute drained more than it took, when the gain is small, or with too little history', () => {
    const steady = [at(1, 100, 500, 400), at(2, 200, 300, 400), at(3, 300, 500, 400)];
    expect(backlogRise(400, steady, now)).toBe(0);
    const small = [at(3, 100, 10, 5), at(4, 105, 10, 5), at(5, 110, 10, 5)];
    expect(backlogRise(100 + RISE_MIN_JOBS - 1, small, now)).toBe(0);
    expect(backlogRise(5000, [at(4, 100, 500, 1), at(5, 600, 500, 1)], now)).toBe(0);
    // Old minutes do not count.
    const old = [at(-10, 0, 500, 1), at(-9, 500, 500, 1), at(-8, 1000, 500, 1)];
    expect(backlogRise(5000, old, now)).toBe(0);
  });
});
