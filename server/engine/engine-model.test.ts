/**
 * Randomised check: long random sequences of commands, clock moves, closes and half-closes on a
 * few sessions and tubes. After every step all counters and indexes must agree (Harness.problems),
 * a reserve must pick what beanstalkd would, and every blocked reserve must end with exactly one
 * answer.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEADLINE_SOON_MARGIN_MS } from '../../shared/limits.js';
import type { Job } from './records.js';
import { readyLess } from './ready-queue.js';
import { Harness, type Client, type HarnessOptions } from './testing.js';
import { jobDeadlineAt, jobState } from './records.js';

const TUBES = ['default', 'a', 'b'] as const;
const SLOTS = 3;

type Op =
  | { op: 'put'; s: number; priority: number; delayMs: number; ttrMs: number }
  | { op: 'reserve'; s: number; timeoutMs: number | null }
  | { op: 'reserveJob' | 'delete' | 'touch' | 'bury'; s: number; id: number }
  | { op: 'release'; s: number; id: number; priority: number; delayMs: number }
  | { op: 'kickJob'; id: number }
  | { op: 'kick'; t: number; bound: number }
  | { op: 'use' | 'watch' | 'ignore'; s: number; t: number }
  | { op: 'pause'; t: number; delayMs: number }
  | { op: 'advance'; ms: number }
  | { op: 'close' | 'halfClose'; s: number };

const slot = fc.integer({ min: 0, max: SLOTS - 1 });
const tube = fc.integer({ min: 0, max: TUBES.length - 1 });
const id = fc.integer({ min: 1, max: 30 });
const priority = fc.constantFrom(0, 1, 2, 1023, 1024);
const delay = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 }));

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('put' as const), s: slot, priority, delayMs: delay, ttrMs: fc.integer({ min: 1000, max: 4000 }) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('reserve' as const), s: slot, timeoutMs: fc.oneof(fc.constant(null), fc.constant(0), fc.integer({ min: 1, max: 3000 })) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom('reserveJob' as const, 'delete' as const, 'touch' as const, 'bury' as const), s: slot, id }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), s: slot, id, priority, delayMs: delay }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('kickJob' as const), id }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('kick' as const), t: tube, bound: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('use' as const, 'watch' as const, 'ignore' as const), s: slot, t: tube }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('pause' as const), t: tube, delayMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 2500 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom('close' as const, 'halfClose' as const), s: slot }) },
);

/** What beanstalkd answers to a reserve right now (pauses that ran out are ticked already). */
function expectedReserve(h: Harness, client: Client, timeoutMs: number | null): { kind: string; job?: Job } {
  const now = h.now();
  const session = client.session;
  const soonest = session.soonestReserved();
  const watched = session.watched.values();
  const soon = soonest !== undefined && now >= jobDeadlineAt(soonest) - DEADLINE_SOON_MARGIN_MS;
  if (soon && !watched.some((t) => t.ready.size > 0)) return { kind: 'deadline-soon' };
  let best: Job | undefined;
  for (const t of watched) {
    const head = t.ready.peek();
    if (head !== undefined && !(t.paused && t.unpauseAt > now) && (best === undefined || readyLess(head, best))) best = head;
  }
  if (best !== undefined) return { kind: 'reserved', job: best };
  if (timeoutMs === 0 && soon) return { kind: 'deadline-soon' };
  if (timeoutMs === 0 || session.halfClosed) return { kind: 'timed-out' };
  return { kind: 'waiting' };
}

function run(ops: Op[], options: HarnessOptions = {}, watchFirst?: string): void {
  const h = new Harness(options);
  const open = (): Client => {
    const c = h.open();
    if (watchFirst !== undefined) c.watch(watchFirst);
    return c;
  };
  const clients: Client[] = Array.from({ length: SLOTS }, open);
  const settle = (): void => {
    // what the scheduler does right after any command: run whatever is due now
    for (let next = h.engine.nextDeadline(); next !== undefined && next <= h.now(); next = h.engine.nextDeadline()) h.tickNow();
  };

  for (const o of ops) {
    const wasWaiting = clients.map((c) => c.session.waiting);
    const callsBefore = clients.map((c) => c.delegate.calls.length);
    const client = 's' in o ? clients[o.s]! : undefined;
    // the protocol reads nothing from a blocked session except its hang-up
    if (client !== undefined && client.session.waiting && o.op !== 'close' && o.op !== 'halfClose') continue;
    const e = h.engine;
    switch (o.op) {
      case 'put':
        client!.tryPut({ priority: o.priority, delayMs: o.delayMs, ttrMs: o.ttrMs });
        break;
      case 'reserve': {
        const expected = expectedReserve(h, client!, o.timeoutMs);
        const outcome = client!.reserve(o.timeoutMs);
        expect(outcome.kind).toBe(expected.kind);
        if (outcome.kind === 'reserved') expect(outcome.job).toBe(expected.job);
        // a reserve that blocks may be answered by the tick that follows at once
        wasWaiting[o.s] = outcome.kind === 'waiting';
        break;
      }
      case 'reserveJob': {
        const found = e.job(o.id);
        const state = found === undefined ? undefined : jobState(found);
        const r = e.reserveJob(client!.session, o.id);
        expect(r.ok).toBe(state !== undefined && state !== 'reserved');
        break;
      }
      case 'delete': {
        const job = e.job(o.id);
        const allowed = job !== undefined && (jobState(job) !== 'reserved' || e.holderOf(job) === client!.session);
        expect(e.delete(client!.session, o.id).ok).toBe(allowed);
        break;
      }
      case 'touch':
      case 'bury': {
        const held = e.job(o.id);
        const mine = held !== undefined && e.holderOf(held) === client!.session;
        const r = o.op === 'touch' ? e.touch(client!.session, o.id) : e.bury(client!.session, o.id, 0);
        expect(r.ok).toBe(mine);
        break;
      }
      case 'release': {
        const held = e.job(o.id);
        const mine = held !== undefined && e.holderOf(held) === client!.session;
        expect(e.release(client!.session, o.id, o.priority, o.delayMs).ok).toBe(mine);
        break;
      }
      case 'kickJob': {
        const found = e.job(o.id);
        const state = found === undefined ? undefined : jobState(found);
        expect(e.kickJob(o.id).ok).toBe(state === 'buried' || state === 'delayed');
        break;
      }
      case 'kick': {
        const t = e.tube(TUBES[o.t]);
        if (t === undefined) break;
        const kind = t.buried.size > 0 ? 'buried' : 'delayed';
        const available = kind === 'buried' ? t.buried.size : t.delayed.size;
        expect(e.kick(t, o.bound)).toBe(Math.min(available, o.bound));
        break;
      }
      case 'use':
        client!.use(TUBES[o.t]);
        break;
      case 'watch':
        client!.watch(TUBES[o.t]);
        break;
      case 'ignore':
        client!.ignore(TUBES[o.t]);
        break;
      case 'pause':
        e.pauseTube(TUBES[o.t], o.delayMs);
        break;
      case 'advance':
        h.advance(o.ms);
        break;
      case 'halfClose':
        e.halfClose(client!.session);
        break;
      case 'close':
        client!.close();
        clients[o.s] = open();
        break;
    }
    settle();
    expect(h.problems(60)).toEqual([]);
    // after the scheduler's tick nothing is overdue
    const now = h.now();
    for (const job of h.jobs(60)) {
      if (jobState(job) === 'reserved') expect(jobDeadlineAt(job)).toBeGreaterThanOrEqual(now);
      if (jobState(job) === 'delayed') expect(jobDeadlineAt(job)).toBeGreaterThan(now);
    }
    for (const t of h.engine.tubes()) if (t.paused) expect(t.unpauseAt).toBeGreaterThan(now);
    for (const c of clients) {
      if (c.session.waiting && c.session.waitUntil >= 0) expect(c.session.waitUntil).toBeGreaterThan(now);
    }
    // a blocked reserve ends with exactly one answer; nobody else is told anything
    clients.forEach((c, i) => {
      if (o.op === 'close' && i === (o as { s: number }).s) return;
      const told = c.delegate.calls.length - callsBefore[i]!;
      const ended = wasWaiting[i]! && !c.session.waiting;
      expect(told).toBe(ended ? 1 : 0);
    });
  }
}

describe('engine under random operations', () => {
  it('keeps every invariant and answers reserve as beanstalkd would', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 120 }), (ops) => run(ops)),
      { numRuns: 400 },
    );
  });

  it('does the same when every session is wide (waiting without joining each tube\'s list)', () => {
    // wideSessionTubes 0: a session is wide from its first watch, made at once here.
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 120, size: 'medium' }), (ops) => run(ops, { wideSessionTubes: 0 }, 'a')),
      { numRuns: 400 },
    );
  });

  it('does the same when sessions turn wide at three watched tubes and narrow again at one', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 120, size: 'medium' }), (ops) => run(ops, { wideSessionTubes: 2 })),
      { numRuns: 400 },
    );
  });
});
