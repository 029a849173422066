import type pg from 'pg';
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DueTimer } from './due-timer.js';
import { BEANSTALK_REALM } from './realm.js';
import { clusterSql } from './sql.js';

/**
 * A timer over a fake database: each promote statement answers with the next of `promoted`
 * (tubes made ready), and the next-due statement with `nextDue`.
 */
function harness(promoted: string[][], nextDue: number | null = null) {
  const statements: string[] = [];
  const ready: string[][] = [];
  let passed = 0;
  let clock = 0;
  const pool = {
    query: async ({ name }: { name: string }) => {
      statements.push(name);
      if (name.endsWith('next_due')) return { rows: [{ delayed: nextDue }] };
      return { rows: (promoted.shift() ?? []).map((tube) => ({ tube })) };
    },
  } as unknown as pg.Pool;
  const log = { warn: () => undefined } as unknown as Logger;
  const timer = new DueTimer(pool, clusterSql(BEANSTALK_REALM), () => clock, { jobsReady: (t) => ready.push(t), passed: () => passed++ }, log);
  return { timer, statements, ready, passed: () => passed, setClock: (t: number) => (clock = t) };
}

describe('DueTimer', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('promotes when the soonest due moment comes, then tells the waiters to look', async () => {
    const h = harness([['a', 'b']]);
    h.timer.arm(500);
    h.timer.arm(900); // later than what is timed: changes nothing
    await vi.advanceTimersByTimeAsync(499);
    expect(h.statements).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.ready).toEqual([['a', 'b']]);
    expect(h.passed()).toBe(1);
  });

  it('moves its timer to a sooner due moment', async () => {
    const h = harness([['a']]);
    h.timer.arm(900);
    h.timer.arm(100);
    await vi.advanceTimersByTimeAsync(100);
    expect(h.passed()).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    // The later moment was replaced, not kept: one promotion only.
    expect(h.passed()).toBe(1);
  });

  it('promotes slice after slice while a slice is full, then times the next due job', async () => {
    const full = Array.from({ length: 1000 }, () => 't');
    const h = harness([full, ['u']], 5000);
    await h.timer.promote();
    expect(h.statements).toEqual(['beanpole_promote', 'beanpole_promote', 'beanpole_next_due']);
    expect(h.ready.map((r) => r.length)).toEqual([1000, 1]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(h.statements.filter((s) => s === 'beanpole_promote')).toHaveLength(3);
  });

  it('times nothing once stopped', async () => {
    const h = harness([]);
    h.timer.arm(100);
    h.timer.stop();
    h.timer.arm(50);
    await vi.advanceTimersByTimeAsync(1000);
    expect(h.statements).toEqual([]);
  });
});
