/**
 * The dashboard's engine operations: editJob (body, priority, TTR, delay, tube) in every state,
 * its failures (nothing changes then), its counters, journal records and events; clearSome in
 * slices; and the session registry.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { Job, Tube } from './records.js';
import type { JobEdit } from './engine.js';
import { Harness, RecordingJournal, T0, type Client, fieldsOf } from './testing.js';
import { jobPriority, jobState, jobDelayMs, jobTtrMs, jobDeadlineAt, jobCreatedAt, jobCounters, jobBody } from './records.js';

let h: Harness;
let c: Client;

beforeEach(() => {
  h = new Harness();
  c = h.open();
});

function expectConsistent(maxId = 50): void {
  expect(h.problems(maxId)).toEqual([]);
}

function edit(id: number, change: JobEdit): Job {
  const r = h.engine.editJob(id, change);
  if (!r.ok) throw new Error(`edit of ${id} failed: ${r.code}`);
  return r.value;
}

/** Reserves `id` by id and buries it with `priority`, as a worker would. */
function buryJob(id: number, priority?: number): Job {
  const w = c;
  const r = h.engine.reserveJob(w.session, id);
  if (!r.ok) throw new Error(`reserve-job ${id}: ${r.code}`);
  const b = h.engine.bury(w.session, id, priority ?? jobPriority(r.value));
  if (!b.ok) throw new Error(`bury ${id}: ${b.code}`);
  return b.value;
}

/** What stats-tube shows of a tube (undefined once the tube is gone). */
function tubeStats(name: string): Record<string, number> | undefined {
  const t = h.engine.tube(name);
  if (t === undefined) return undefined;
  return {
    urgent: t.urgent,
    ready: t.ready.size,
    reserved: t.reserved,
    delayed: t.delayed.size,
    buried: t.buried.size,
    total: t.totalJobs,
    using: t.using,
    watching: t.watching,
    waiting: t.waiting.size,
    cmdDelete: t.cmdDelete,
  };
}

function serverCounts(): Record<string, number> {
  const s = h.engine.stats;
  return { urgent: s.urgent, ready: s.ready, reserved: s.reserved, delayed: s.delayed, buried: s.buried, totalJobs: s.totalJobs };
}

function jobFields(job: Job): Record<string, unknown> {
  return {
    id: job.id,
    tube: job.tube.name,
    state: jobState(job),
    priority: jobPriority(job),
    delayMs: jobDelayMs(job),
    ttrMs: jobTtrMs(job),
    deadlineAt: jobDeadlineAt(job),
    createdAt: jobCreatedAt(job),
    buriedSeq: jobCounters(job).buriedSeq,
    reserves: job.reserves,
    timeouts: jobCounters(job).timeouts,
    releases: jobCounters(job).releases,
    buries: jobCounters(job).buries,
    kicks: jobCounters(job).kicks,
    body: jobBody(job).toString('latin1'),
    reservedBy: h.engine.holderOf(job)?.id ?? null,
  };
}

/** Everything an edit could touch, for "nothing changed" checks. */
function snapshot(maxId = 50): string {
  return JSON.stringify({
    jobs: h.jobs(maxId).map(jobFields),
    tubes: h.tubeNames().map((n) => [n, tubeStats(n)]),
    stats: serverCounts(),
    bodyBytes: h.engine.bodyBytes,
    next: h.engine.nextDeadline() ?? null,
    ready: h.engine.tubes().map((t) => t.ready.ordered(1000).map((j) => j.id)),
    delayed: h.engine.tubes().map((t) => t.delayed.ordered(1000).map((j) => j.id)),
    buried: h.engine.tubes().map((t) => [...t.buried.values()].map((j) => j.id)),
  });
}

const ids = (jobs: Iterable<Job>): number[] => [...jobs].map((j) => j.id);
const buriedIds = (tube: Tube): number[] => ids(tube.buried.values());

describe('editJob: refusals change nothing', () => {
  it('NOT_FOUND for an id that never existed or was deleted', () => {
    c.put();
    expect(h.engine.editJob(99, { priority: 1 })).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(h.engine.delete(null, 1).ok).toBe(true);
    const before = snapshot();
    expect(h.engine.editJob(1, { body: Buffer.from('x') })).toEqual({ ok: false, code: 'NOT_FOUND' });
    expect(snapshot()).toBe(before);
  });

  it('JOB_RESERVED for a job a worker holds, whatever the edit; the job, tubes and journal stay as they were', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    const w = h.open();
    c.put({ priority: 5, body: 'held' });
    expect(w.reserveNow()).toBe(1);
    const writes = journal.writes.length;
    const log = h.recordEvents();
    const before = snapshot();
    const edits: JobEdit[] = [
      { priority: 1 },
      { body: Buffer.from('changed') },
      { ttrMs: 1 },
      { delayMs: 0 },
      { delayMs: 5000 },
      { tube: 'elsewhere' },
      { body: Buffer.from('all'), priority: 2, ttrMs: 3000, delayMs: 10, tube: 'x' },
      {},
    ];
    for (const e of edits) expect(h.engine.editJob(1, e)).toEqual({ ok: false, code: 'JOB_RESERVED' });
    expect(snapshot()).toBe(before);
    expect(h.engine.tube('elsewhere')).toBeUndefined();
    expect(h.engine.tube('x')).toBeUndefined();
    expect(journal.writes.length).toBe(writes);
    expect(log).toEqual([]);
    expect(w.reservedIds()).toEqual([1]);
    expectConsistent();
  });

  it('OUT_OF_MEMORY when a bigger body does not fit maxJobBytes; shrinking and exact fits are fine', () => {
    h = new Harness({ maxJobBytes: 10 });
    c = h.open();
    c.put({ body: 'abcde' }); // 1: 5 bytes
    c.put({ body: 'xyz', delayMs: 1000 }); // 2: 3 bytes
    expect(h.engine.bodyBytes).toBe(8);
    const log = h.recordEvents();
    const before = snapshot();
    expect(h.engine.editJob(1, { body: Buffer.from('abcdefgh') })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' }); // 11 > 10
    // A refused edit with other fields changes none of them either (and creates no tube).
    expect(h.engine.editJob(2, { body: Buffer.from('123456'), priority: 1, delayMs: 0, tube: 'new' })).toEqual({
      ok: false,
      code: 'OUT_OF_MEMORY',
    });
    expect(snapshot()).toBe(before);
    expect(log).toEqual([]);
    expect(h.engine.tube('new')).toBeUndefined();

    // Exactly at the budget is allowed.
    expect(jobBody(edit(1, { body: Buffer.from('abcdefg') })).toString()).toBe('abcdefg');
    expect(h.engine.bodyBytes).toBe(10);
    // A smaller body is always allowed, even with the budget used up.
    expect(jobBody(edit(2, { body: Buffer.from('z') })).toString()).toBe('z');
    expect(h.engine.bodyBytes).toBe(8);
    // Replacing a body by one of the same length needs no room.
    expect(jobBody(edit(2, { body: Buffer.from('q') })).toString()).toBe('q');
    expect(jobBody(edit(1, { body: Buffer.from('ABCDEFGHI') })).toString()).toBe('ABCDEFGHI');
    expect(h.engine.bodyBytes).toBe(10);
    expect(h.engine.editJob(2, { body: Buffer.from('qq') })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expectConsistent();
  });

  it('OUT_OF_MEMORY when the journal has no room (canRewrite false); nothing changes and nothing is recorded', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    const w = h.open();
    w.watch('target');
    w.ignore('default');
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    c.put({ priority: 2000 }); // 1 ready
    c.put({ delayMs: 5000 }); // 2 delayed
    c.put(); // 3 buried
    buryJob(3);
    expect(w.delegate.drain()).toEqual([]);
    expectConsistent();

    journal.failUpdate = true;
    const writes = journal.writes.length;
    const log = h.recordEvents();
    const before = snapshot();
    for (const id of [1, 2, 3]) {
      for (const e of [{ priority: 1 }, { body: Buffer.from('new body') }, { tube: 'target' }, { delayMs: 0 }, { ttrMs: 5 }] as JobEdit[]) {
        expect(h.engine.editJob(id, e), `job ${id} ${JSON.stringify(e)}`).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
      }
    }
    expect(snapshot()).toBe(before);
    expect(journal.writes.length).toBe(writes);
    expect(log).toEqual([]);
    expect(w.delegate.drain()).toEqual([]);
    journal.failUpdate = false;
    expect(jobState(edit(2, { delayMs: 0 }))).toBe('ready');
    expect(journal.writes.at(-1)).toBe('rewrite 2 ready default');
    expectConsistent();
  });
});

describe('editJob in each state', () => {
  it('a ready job: each field alone keeps it ready (delayMs 0) with its id, place and counters', () => {
    const job = c.put({ priority: 10, ttrMs: 5000, body: 'one' });
    c.put({ priority: 10, body: 'two' }); // 2
    // Give job 1 some history: reserved, released, buried, kicked.
    buryJob(1);
    expect(h.engine.kickJob(1).ok).toBe(true);
    expect(h.engine.reserveJob(c.session, 1).ok).toBe(true);
    expect(h.engine.release(c.session, 1, 10, 0).ok).toBe(true);
    const counters = { reserves: job.reserves, releases: jobCounters(job).releases, buries: jobCounters(job).buries, kicks: jobCounters(job).kicks, timeouts: jobCounters(job).timeouts };
    expect(counters).toEqual({ reserves: 2, releases: 1, buries: 1, kicks: 1, timeouts: 0 });
    const same = { id: 1, state: 'ready', createdAt: T0, deadlineAt: 0, ...counters };

    expect(fieldsOf(edit(1, { body: Buffer.from('uno') }))).toMatchObject({ ...same, priority: 10, ttrMs: 5000 });
    expect(jobBody(job).toString()).toBe('uno');
    expect(fieldsOf(edit(1, { priority: 11 }))).toMatchObject({ ...same, priority: 11, ttrMs: 5000 });
    expect(fieldsOf(edit(1, { ttrMs: 9000 }))).toMatchObject({ ...same, priority: 11, ttrMs: 9000 });
    expect(fieldsOf(edit(1, { delayMs: 0 }))).toMatchObject({ ...same, priority: 11, delayMs: 0 });
    expect(h.engine.job(1)).toBe(job);
    expect(h.engine.jobTotal).toBe(2);
    expect(h.engine.stats.totalJobs).toBe(2);
    expectConsistent();
    // priority 11 now sorts after job 2
    expect(c.reserveNow()).toBe(2);
    expect(c.reserveNow()).toBe(1);
    expect(jobTtrMs(job)).toBe(9000);
    expect(jobDeadlineAt(job)).toBe(T0 + 9000); // the new TTR applies to the next reservation
  });

  it('a ready job: all fields together, into a new tube, delayed', () => {
    c.put({ priority: 10, ttrMs: 5000, body: 'one' });
    const job = edit(1, { body: Buffer.from('changed'), priority: 3, ttrMs: 7000, delayMs: 2500, tube: 'moved' });
    expect(fieldsOf(job)).toMatchObject({ id: 1, state: 'delayed', priority: 3, ttrMs: 7000, delayMs: 2500, deadlineAt: T0 + 2500 });
    expect(job.tube.name).toBe('moved');
    expect(jobBody(job).toString()).toBe('changed');
    expect(h.engine.bodyBytes).toBe(7);
    expect(tubeStats('default')).toMatchObject({ ready: 0, delayed: 0, urgent: 0, total: 1 });
    expect(tubeStats('moved')).toMatchObject({ ready: 0, delayed: 1, urgent: 0, total: 0 });
    expectConsistent();
    h.advance(2500);
    expect(jobState(job)).toBe('ready');
    expect(tubeStats('moved')).toMatchObject({ ready: 1, delayed: 0, urgent: 1 });
    c.watch('moved');
    expect(c.reserveNow()).toBe(1);
    expect(jobDeadlineAt(job)).toBe(T0 + 2500 + 7000);
    expectConsistent();
  });

  it('a delayed job: body, priority, TTR and tube keep its deadline; delayMs restarts it from now; delayMs 0 makes it ready', () => {
    const job = c.put({ delayMs: 10_000, priority: 50 });
    c.put({ delayMs: 20_000 }); // 2
    h.advance(3000);
    expect(fieldsOf(edit(1, { body: Buffer.from('b') }))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 10_000, delayMs: 10_000 });
    expect(fieldsOf(edit(1, { priority: 4000 }))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 10_000, priority: 4000 });
    expect(fieldsOf(edit(1, { ttrMs: 2000 }))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 10_000, ttrMs: 2000 });
    expect(fieldsOf(edit(1, { tube: 'other' }))).toMatchObject({ state: 'delayed', deadlineAt: T0 + 10_000 });
    expect(job.tube.name).toBe('other');
    expect(h.engine.nextDeadline()).toBe(T0 + 10_000);
    expectConsistent();
    // A longer delay from now: due at T0 + 3000 + 15000, after job 2.
    expect(fieldsOf(edit(1, { delayMs: 15_000 }))).toMatchObject({ state: 'delayed', delayMs: 15_000, deadlineAt: T0 + 18_000 });
    expect(h.engine.nextDeadline()).toBe(T0 + 18_000);
    expect(h.engine.stats.delayed).toBe(2);
    expectConsistent();
    // delayMs 0: ready now, in its tube.
    expect(fieldsOf(edit(1, { delayMs: 0 }))).toMatchObject({ state: 'ready', delayMs: 0, deadlineAt: 0 });
    expect(h.engine.stats).toMatchObject({ ready: 1, delayed: 1, urgent: 0 });
    expect(h.engine.nextDeadline()).toBe(T0 + 20_000);
    expect(tubeStats('other')).toMatchObject({ ready: 1, delayed: 0 });
    expectConsistent();
  });

  it('a buried job stays buried and keeps its place for body, priority, TTR and delay edits', () => {
    for (let i = 0; i < 3; i++) c.put({ priority: 100 + i });
    buryJob(2);
    buryJob(1);
    buryJob(3);
    const tube = h.engine.defaultTube;
    expect(buriedIds(tube)).toEqual([2, 1, 3]);
    const seq = jobCounters(h.engine.job(1)!).buriedSeq;
    expect(fieldsOf(edit(1, { body: Buffer.from('bb') }))).toMatchObject({ state: 'buried', buriedSeq: seq, buries: 1 });
    expect(fieldsOf(edit(1, { priority: 1 }))).toMatchObject({ state: 'buried', priority: 1, buriedSeq: seq });
    expect(fieldsOf(edit(1, { ttrMs: 1234 }))).toMatchObject({ state: 'buried', ttrMs: 1234, buriedSeq: seq });
    // A delay is kept for later; the job stays buried and gets no deadline.
    expect(fieldsOf(edit(1, { delayMs: 9000 }))).toMatchObject({ state: 'buried', delayMs: 9000, deadlineAt: 0, buriedSeq: seq });
    expect(fieldsOf(edit(1, { delayMs: 0 }))).toMatchObject({ state: 'buried', delayMs: 0, buriedSeq: seq });
    // Naming its own tube is not a move.
    expect(fieldsOf(edit(1, { tube: 'default' }))).toMatchObject({ state: 'buried', buriedSeq: seq });
    expect(buriedIds(tube)).toEqual([2, 1, 3]);
    expect(h.engine.stats).toMatchObject({ buried: 3, urgent: 0, ready: 0, delayed: 0 });
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
    // Kicked, it is ready with the edited priority (urgent now).
    expect(h.engine.kickJob(1).ok).toBe(true);
    expect(h.engine.stats.urgent).toBe(1);
    expect(h.engine.peekReady(tube)!.id).toBe(1);
    expectConsistent();
  });

  it('a buried job moved to another tube goes last in that tube\'s buried list', () => {
    c.use('dest');
    c.put(); // 1
    c.put(); // 2
    c.use('default');
    c.put(); // 3
    c.put(); // 4
    buryJob(3);
    buryJob(1);
    buryJob(4);
    buryJob(2);
    const dest = h.engine.tube('dest')!;
    expect(buriedIds(dest)).toEqual([1, 2]);
    expect(buriedIds(h.engine.defaultTube)).toEqual([3, 4]);
    const moved = edit(3, { tube: 'dest' });
    expect(jobState(moved)).toBe('buried');
    expect(jobCounters(moved).buriedSeq).toBeGreaterThan(jobCounters(h.engine.job(2)!).buriedSeq);
    expect(buriedIds(dest)).toEqual([1, 2, 3]);
    expect(buriedIds(h.engine.defaultTube)).toEqual([4]);
    expect(h.engine.stats.buried).toBe(4);
    expect(tubeStats('dest')).toMatchObject({ buried: 3, total: 2 });
    expect(tubeStats('default')).toMatchObject({ buried: 1, total: 2 });
    expectConsistent();
    // The kick order follows the list.
    expect(h.engine.kick(dest, 10)).toBe(3);
    c.watch('dest');
    c.ignore('default');
    expect([c.reserveNow(), c.reserveNow(), c.reserveNow()]).toEqual([1, 2, 3]);
    expectConsistent();
  });

  it('keeps the id, createdAt and counters whatever is edited, and never touches total-jobs', () => {
    const job = c.put({ priority: 5 });
    h.advance(1000);
    buryJob(1);
    expect(h.engine.kickJob(1).ok).toBe(true);
    const before = { reserves: job.reserves, buries: jobCounters(job).buries, kicks: jobCounters(job).kicks, releases: jobCounters(job).releases, timeouts: jobCounters(job).timeouts };
    for (const e of [{ tube: 'a' }, { delayMs: 100 }, { tube: 'b', priority: 9 }, { delayMs: 0 }, { body: Buffer.from('q') }] as JobEdit[]) {
      const j = edit(1, e);
      expect(j.id).toBe(1);
      expect(jobCreatedAt(j)).toBe(T0);
      expect({ reserves: j.reserves, buries: jobCounters(j).buries, kicks: jobCounters(j).kicks, releases: jobCounters(j).releases, timeouts: jobCounters(j).timeouts }).toEqual(before);
    }
    expect(h.engine.stats.totalJobs).toBe(1);
    expect(h.engine.defaultTube.totalJobs).toBe(1);
    expect(h.engine.tube('b')!.totalJobs).toBe(0);
    expectConsistent();
  });
});

describe('editJob: priority and urgent counts', () => {
  it('a ready job crossing the urgent threshold moves the server and tube urgent counts, and reorders reserves', () => {
    c.use('t');
    c.watch('t');
    c.put({ priority: 500 }); // 1 urgent
    c.put({ priority: 2000 }); // 2
    c.put({ priority: 1024 }); // 3: 1024 is not urgent
    c.put({ priority: 1023 }); // 4 urgent
    expect(h.engine.stats.urgent).toBe(2);
    expect(tubeStats('t')!.urgent).toBe(2);
    edit(2, { priority: 0 });
    expect(h.engine.stats.urgent).toBe(3);
    expect(tubeStats('t')!.urgent).toBe(3);
    edit(1, { priority: 1024 });
    expect(h.engine.stats.urgent).toBe(2);
    expect(tubeStats('t')!.urgent).toBe(2);
    edit(4, { priority: 1023 }); // unchanged
    expect(h.engine.stats.urgent).toBe(2);
    edit(3, { priority: 4294967295 });
    expect(h.engine.stats.urgent).toBe(2);
    expectConsistent();
    expect(h.engine.peekReady(h.engine.tube('t')!)!.id).toBe(2);
    expect([c.reserveNow(), c.reserveNow(), c.reserveNow(), c.reserveNow()]).toEqual([2, 4, 1, 3]);
    expect(h.engine.stats.urgent).toBe(0);
    expectConsistent();
  });

  it('a priority edit decides which job a worker gets across tubes', () => {
    const w = h.open();
    w.watch('a');
    w.watch('b');
    c.use('a');
    c.put({ priority: 10 }); // 1
    c.use('b');
    c.put({ priority: 20 }); // 2
    edit(2, { priority: 5 });
    expect(w.reserveNow()).toBe(2);
    expect(h.engine.release(w.session, 2, 30, 0).ok).toBe(true);
    edit(1, { priority: 31 });
    expect(w.reserveNow()).toBe(2);
    expect(w.reserveNow()).toBe(1);
    expectConsistent();
  });

  it('delayed and buried jobs count as urgent only once ready, with their edited priority', () => {
    c.put({ priority: 5000, delayMs: 1000 }); // 1
    c.put({ priority: 5000 }); // 2
    buryJob(2);
    edit(1, { priority: 1 });
    edit(2, { priority: 2 });
    expect(h.engine.stats.urgent).toBe(0);
    expectConsistent();
    h.advance(1000);
    expect(h.engine.stats.urgent).toBe(1);
    expect(h.engine.kickJob(2).ok).toBe(true);
    expect(h.engine.stats.urgent).toBe(2);
    expect(h.engine.defaultTube.urgent).toBe(2);
    expectConsistent();
  });
});

describe('editJob: body', () => {
  it('adjusts bodyBytes up and down in every state, and keeps the new bytes exactly', () => {
    c.put({ body: 'aaaa' }); // 1 ready
    c.put({ body: 'bbbb', delayMs: 10 }); // 2 delayed
    c.put({ body: 'cccc' }); // 3 buried
    buryJob(3);
    expect(h.engine.bodyBytes).toBe(12);
    edit(1, { body: Buffer.alloc(100, 1) });
    expect(h.engine.bodyBytes).toBe(108);
    edit(2, { body: Buffer.alloc(0) });
    expect(h.engine.bodyBytes).toBe(104);
    const raw = Buffer.from([0, 13, 10, 255, 0]);
    edit(3, { body: raw });
    expect(h.engine.bodyBytes).toBe(105);
    expect(jobBody(h.engine.job(3)!).equals(Buffer.from([0, 13, 10, 255, 0]))).toBe(true);
    expect(jobBody(h.engine.job(2)!).length).toBe(0);
    expectConsistent();
    // Deleting after an edit frees the edited size.
    expect(h.engine.delete(null, 1).ok).toBe(true);
    expect(h.engine.bodyBytes).toBe(5);
    expectConsistent();
  });
});

describe('editJob: moving to another tube', () => {
  it('moves the counts of a ready job from one tube to the other, creating the new one', () => {
    const log = h.recordEvents();
    c.use('src');
    c.put({ priority: 1 }); // 1 urgent
    c.put({ priority: 2000 }); // 2
    c.use('default');
    expect(tubeStats('src')).toEqual({ urgent: 1, ready: 2, reserved: 0, delayed: 0, buried: 0, total: 2, using: 0, watching: 0, waiting: 0, cmdDelete: 0 });
    log.length = 0;
    edit(1, { tube: 'dst' });
    expect(log).toEqual(['created dst', 'changed 1 ready>ready']);
    expect(tubeStats('src')).toMatchObject({ urgent: 0, ready: 1, total: 2 });
    expect(tubeStats('dst')).toEqual({ urgent: 1, ready: 1, reserved: 0, delayed: 0, buried: 0, total: 0, using: 0, watching: 0, waiting: 0, cmdDelete: 0 });
    expect(h.engine.stats).toMatchObject({ urgent: 1, ready: 2 });
    expect(h.tubeNames()).toEqual(['default', 'src', 'dst']);
    expectConsistent();
    // The last job out of an unused tube takes the tube with it.
    log.length = 0;
    edit(2, { tube: 'dst' });
    expect(log).toEqual(['changed 2 ready>ready', 'removed src']);
    expect(h.engine.tube('src')).toBeUndefined();
    expect(h.tubeNames()).toEqual(['default', 'dst']);
    expect(tubeStats('dst')).toMatchObject({ urgent: 1, ready: 2 });
    expectConsistent();
  });

  it('keeps the old tube while it is used, watched or holds jobs; never removes default', () => {
    c.use('used');
    c.put(); // 1
    edit(1, { tube: 'x' });
    expect(h.engine.tube('used')).toBeDefined(); // c uses it
    c.watch('watched');
    c.use('watched');
    c.put(); // 2
    c.use('default');
    expect(h.engine.tube('used')).toBeUndefined();
    edit(2, { tube: 'x' });
    expect(h.engine.tube('watched')).toBeDefined(); // c watches it
    c.use('held');
    c.put(); // 3
    c.put({ delayMs: 1000 }); // 4
    c.use('default');
    edit(3, { tube: 'x' });
    expect(h.engine.tube('held')).toBeDefined(); // job 4 is still there
    edit(4, { tube: 'x' });
    expect(h.engine.tube('held')).toBeUndefined();
    edit(1, { tube: 'default' });
    edit(1, { tube: 'x' });
    expect(h.engine.tube('default')).toBe(h.engine.defaultTube);
    expect(tubeStats('x')).toMatchObject({ ready: 3, delayed: 1 });
    expectConsistent();
  });

  it('a watcher of the new tube can reserve the moved job; a watcher of the old one no longer sees it', () => {
    const oldW = h.open();
    const newW = h.open();
    newW.watch('new');
    newW.ignore('default');
    c.put({ body: 'moving' }); // 1 in default
    edit(1, { tube: 'new' });
    expect(oldW.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(newW.reserveNow()).toBe(1);
    expect(h.engine.job(1)!.tube.name).toBe('new');
    expect(tubeStats('new')).toMatchObject({ reserved: 1, ready: 0 });
    expectConsistent();
  });

  it('a worker waiting on the new tube gets a moved ready job at once, through its delegate', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    const w = h.open();
    w.watch('jobs');
    w.ignore('default');
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    c.put({ priority: 7 }); // 1 ready in default: w does not watch it
    expect(w.delegate.drain()).toEqual([]);
    const log = h.recordEvents();
    const r = h.engine.editJob(1, { tube: 'jobs', priority: 3 });
    expect(r.ok).toBe(true);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    const job = h.engine.job(1)!;
    expect(fieldsOf(job)).toMatchObject({ state: 'reserved', priority: 3, reserves: 1, deadlineAt: T0 + 60_000 });
    expect(h.engine.holderOf(job)).toBe(w.session);
    expect(log).toEqual(['changed 1 ready>ready', 'changed 1 ready>reserved']);
    expect(h.engine.stats).toMatchObject({ waiting: 0, reserved: 1, ready: 0, urgent: 0 });
    expect(tubeStats('jobs')).toMatchObject({ reserved: 1, ready: 0, waiting: 0, urgent: 0 });
    // One full record, in the new tube (a reservation is not durable, the binlog stores it ready).
    expect(journal.writes.at(-1)).toBe('rewrite 1 reserved jobs');
    expectConsistent();
  });

  it('a waiting worker gets a delayed job made ready by an edit, and a moved delayed job when it is due', () => {
    const w = h.open();
    w.watch('jobs');
    w.ignore('default');
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    c.use('jobs');
    c.put({ delayMs: 60_000 }); // 1 delayed in jobs
    c.use('default');
    c.put({ delayMs: 5000 }); // 2 delayed in default
    c.put(); // 3 buried in default
    buryJob(3);
    edit(1, { delayMs: 0 });
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    edit(2, { tube: 'jobs' });
    edit(3, { tube: 'jobs' }); // buried: stays buried, nothing to hand out
    expect(w.delegate.drain()).toEqual([]);
    expect(jobState(h.engine.job(3)!)).toBe('buried');
    h.advance(4999);
    expect(w.delegate.drain()).toEqual([]);
    h.advance(1);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 2 }]);
    expectConsistent();
  });

  it('a job moved into a paused tube waits for the pause to end', () => {
    const w = h.open();
    w.watch('p');
    w.ignore('default');
    c.watch('p');
    c.use('default');
    expect(h.engine.pauseTube('p', 2000).ok).toBe(true);
    expect(w.reserve(null)).toEqual({ kind: 'waiting' });
    c.put(); // 1
    edit(1, { tube: 'p' });
    expect(w.delegate.drain()).toEqual([]);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expectConsistent();
    h.advance(2000);
    expect(w.delegate.drain()).toEqual([{ kind: 'reserved', jobId: 1 }]);
    expectConsistent();
  });
});

describe('editJob: delays on the fake clock', () => {
  it('a ready job delayed by an edit becomes ready exactly delayMs later', () => {
    c.put(); // 1
    h.advance(1500);
    const job = edit(1, { delayMs: 4000 });
    expect(fieldsOf(job)).toMatchObject({ state: 'delayed', deadlineAt: T0 + 5500, delayMs: 4000 });
    expect(h.engine.nextDeadline()).toBe(T0 + 5500);
    expect(h.engine.stats).toMatchObject({ ready: 0, delayed: 1 });
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    h.advance(3999);
    expect(jobState(job)).toBe('delayed');
    h.advance(1);
    expect(jobState(job)).toBe('ready');
    expect(h.engine.stats).toMatchObject({ ready: 1, delayed: 0 });
    expect(c.reserveNow()).toBe(1);
    expectConsistent();
  });

  it('a delayed job edited to a shorter delay comes out earlier, and to a longer delay later', () => {
    c.put({ delayMs: 10_000 }); // 1
    c.put({ delayMs: 10_000 }); // 2
    h.advance(3000);
    edit(1, { delayMs: 2000 }); // due T0 + 5000
    edit(2, { delayMs: 20_000 }); // due T0 + 23000
    expect(h.engine.nextDeadline()).toBe(T0 + 5000);
    h.advance(2000);
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expect(jobState(h.engine.job(2)!)).toBe('delayed');
    h.advanceTo(T0 + 22_999);
    expect(jobState(h.engine.job(2)!)).toBe('delayed');
    h.advance(1);
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expect(h.engine.nextDeadline()).toBeUndefined();
    expectConsistent();
  });

  it('orders delayed jobs in a tube by their new deadlines', () => {
    for (let i = 0; i < 4; i++) c.put({ delayMs: 1000 * (i + 1) }); // 1..4
    edit(4, { delayMs: 500 });
    edit(1, { delayMs: 3500 });
    expect(h.engine.peekDelayed(h.engine.defaultTube)!.id).toBe(4);
    const order: number[] = [];
    h.engine.events.on('job:changed', (e) => {
      if (e.to === 'ready') order.push(e.job.id);
    });
    h.advance(10_000);
    expect(order).toEqual([4, 2, 3, 1]);
    expectConsistent();
  });
});

describe('editJob: journal and events', () => {
  it('writes one full record per edit, after the change, with the job\'s new state and tube', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    c.put(); // 1
    c.put({ delayMs: 100 }); // 2
    c.put(); // 3
    buryJob(3);
    journal.writes.length = 0;
    edit(1, { priority: 9 });
    edit(1, { delayMs: 50 });
    edit(2, { delayMs: 0, tube: 'z' });
    edit(3, { body: Buffer.from('b') });
    edit(3, { tube: 'z' });
    expect(journal.writes).toEqual(['rewrite 1 ready default', 'rewrite 1 delayed default', 'rewrite 2 ready z', 'rewrite 3 buried default', 'rewrite 3 buried z']);
    // Refusals write nothing.
    expect(h.engine.editJob(7, { priority: 1 }).ok).toBe(false);
    expect(journal.writes.length).toBe(5);
    expectConsistent();
  });

  it('passes the old tube-name and body lengths to rewrite, and asks canRewrite with the new ones', () => {
    const calls: string[] = [];
    class Spy extends RecordingJournal {
      override canRewrite(tubeNameBytes?: number, bodyBytes?: number): boolean {
        calls.push(`can ${tubeNameBytes} ${bodyBytes}`);
        return super.canRewrite();
      }
      override rewrite(job: Job, oldTube?: number, oldBody?: number): void {
        calls.push(`rewrite ${job.id} ${oldTube} ${oldBody} -> ${job.tube.name.length} ${jobBody(job).length}`);
        super.rewrite(job);
      }
    }
    h = new Harness({ journal: new Spy() });
    c = h.open();
    c.put({ body: 'abc' }); // 1 in default (7)
    edit(1, { body: Buffer.from('abcdefgh'), tube: 'xy' });
    edit(1, { priority: 3 });
    expect(calls).toEqual(['can 2 8', 'rewrite 1 7 3 -> 2 8', 'can 2 8', 'rewrite 1 2 8 -> 2 8']);
  });

  it('emits job:changed from the old state to the new one for every successful edit', () => {
    c.put(); // 1 ready
    c.put({ delayMs: 100 }); // 2 delayed
    c.put(); // 3 buried
    buryJob(3);
    const log = h.recordEvents();
    edit(1, { priority: 4 });
    edit(1, { delayMs: 10 });
    edit(2, { body: Buffer.from('x') });
    edit(2, { delayMs: 0 });
    edit(3, { priority: 1 });
    edit(3, { tube: 'q' });
    expect(log).toEqual([
      'changed 1 ready>ready',
      'changed 1 ready>delayed',
      'changed 2 delayed>delayed',
      'changed 2 delayed>ready',
      'changed 3 buried>buried',
      'created q',
      'changed 3 buried>buried',
    ]);
  });
});

describe('clearSome', () => {
  function fill(): void {
    c.use('t');
    for (const p of [5, 1, 5, 0, 3]) c.put({ priority: p }); // 1..5 ready
    for (const d of [3000, 1000, 2000]) c.put({ delayMs: d }); // 6..8 delayed
    for (let i = 0; i < 4; i++) c.put({ priority: 9 }); // 9..12, buried as 11, 9, 12, 10
    c.use('default');
    for (const id of [11, 9, 12, 10]) buryJob(id);
    c.put(); // 13 ready in default: never touched
  }

  it('deletes ready jobs best first, in slices, like delete (journaled, cmd-delete, events)', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    fill();
    const t = h.engine.tube('t')!;
    journal.writes.length = 0;
    const log = h.recordEvents();
    expect(h.engine.clearSome(t, 'ready', 2)).toBe(2);
    expect(journal.writes).toEqual(['delete 4', 'delete 2']);
    expect(log).toEqual(['deleted 4 ready', 'deleted 2 ready']);
    expect(t.cmdDelete).toBe(2);
    expect(ids(t.ready.ordered(10))).toEqual([5, 1, 3]);
    expect(h.engine.clearSome(t, 'ready', 2)).toBe(2);
    expect(h.engine.clearSome(t, 'ready', 2)).toBe(1);
    expect(h.engine.clearSome(t, 'ready', 2)).toBe(0);
    expect(journal.writes).toEqual(['delete 4', 'delete 2', 'delete 5', 'delete 1', 'delete 3']);
    expect(t.cmdDelete).toBe(5);
    expect(tubeStats('t')).toMatchObject({ ready: 0, urgent: 0, delayed: 3, buried: 4, total: 12 });
    expect(h.engine.stats).toMatchObject({ ready: 1, urgent: 1, delayed: 3, buried: 4 });
    expect(h.engine.jobTotal).toBe(8);
    expect(jobState(h.engine.job(13)!)).toBe('ready');
    expectConsistent();
  });

  it('deletes delayed jobs soonest first and buried jobs oldest first', () => {
    fill();
    const t = h.engine.tube('t')!;
    const log = h.recordEvents();
    expect(h.engine.clearSome(t, 'delayed', 100)).toBe(3);
    expect(h.engine.clearSome(t, 'buried', 3)).toBe(3);
    expect(log).toEqual(['deleted 7 delayed', 'deleted 8 delayed', 'deleted 6 delayed', 'deleted 11 buried', 'deleted 9 buried', 'deleted 12 buried']);
    expect(buriedIds(t)).toEqual([10]);
    expect(t.cmdDelete).toBe(6);
    expect(h.engine.nextDeadline()).toBeUndefined();
    expect(h.engine.stats).toMatchObject({ delayed: 0, buried: 1, ready: 6 });
    expectConsistent();
    expect(h.engine.clearSome(t, 'buried', 0)).toBe(0);
    expect(h.engine.clearSome(t, 'buried', 5)).toBe(1);
    expect(h.engine.clearSome(t, 'buried', 5)).toBe(0);
    expectConsistent();
  });

  it('removes an unused tube with its last job, and leaves a used one', () => {
    fill();
    const t = h.engine.tube('t')!;
    const log = h.recordEvents();
    h.engine.clearSome(t, 'ready', 10);
    h.engine.clearSome(t, 'delayed', 10);
    expect(h.engine.tube('t')).toBe(t);
    expect(h.engine.clearSome(t, 'buried', 10)).toBe(4);
    expect(log.at(-1)).toBe('removed t');
    expect(h.engine.tube('t')).toBeUndefined();
    expect(t.cmdDelete).toBe(12);
    expectConsistent();

    c.use('kept');
    c.put();
    const kept = h.engine.tube('kept')!;
    expect(h.engine.clearSome(kept, 'ready', 10)).toBe(1);
    expect(h.engine.tube('kept')).toBe(kept);
    expectConsistent();
  });

  it('stops early when the journal cannot record a delete, leaving the rest', () => {
    class FailingAfter extends RecordingJournal {
      remaining = Number.POSITIVE_INFINITY;
      override delete(job: Job): boolean {
        if (this.remaining <= 0) return false;
        this.remaining--;
        return super.delete(job);
      }
    }
    const journal = new FailingAfter();
    h = new Harness({ journal });
    c = h.open();
    fill();
    const t = h.engine.tube('t')!;
    journal.remaining = 2;
    expect(h.engine.clearSome(t, 'ready', 5)).toBe(2);
    expect(t.cmdDelete).toBe(2);
    expect(ids(t.ready.ordered(10))).toEqual([5, 1, 3]);
    expect(h.engine.clearSome(t, 'buried', 5)).toBe(0);
    expect(buriedIds(t)).toEqual([11, 9, 12, 10]);
    expectConsistent();
    journal.failDelete = true;
    journal.remaining = 10;
    expect(h.engine.clearSome(t, 'delayed', 5)).toBe(0);
    journal.failDelete = false;
    expect(h.engine.clearSome(t, 'delayed', 5)).toBe(3);
    expectConsistent();
  });

  it('leaves reserved jobs alone', () => {
    c.put(); // 1
    c.put(); // 2
    expect(c.reserveNow()).toBe(1);
    expect(h.engine.clearSome(h.engine.defaultTube, 'ready', 10)).toBe(1);
    expect(jobState(h.engine.job(1)!)).toBe('reserved');
    expect(c.reservedIds()).toEqual([1]);
    expectConsistent();
  });
});

describe('allSessions', () => {
  it('lists open sessions oldest first, and drops closed ones', () => {
    const a = h.open();
    const b = h.open();
    expect([...h.engine.allSessions()].map((s) => s.id)).toEqual([c.id, a.id, b.id]);
    a.close();
    expect([...h.engine.allSessions()].map((s) => s.id)).toEqual([c.id, b.id]);
    const d = h.open();
    expect([...h.engine.allSessions()].map((s) => s.id)).toEqual([c.id, b.id, d.id]);
    expect(h.engine.stats.currentConnections).toBe(3);
  });
});

describe('editJob among everything else (seeded random operations)', () => {
  /** mulberry32: a small seeded generator, so a failure replays. */
  function rng(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  for (const seed of [1, 2, 3, 4]) {
    it(`keeps every counter and index consistent (seed ${seed})`, () => {
      const journal = new RecordingJournal();
      h = new Harness({ journal, maxJobBytes: 400 });
      c = h.open();
      const rnd = rng(seed);
      const int = (n: number): number => Math.floor(rnd() * n);
      const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
      const names = ['default', 'a', 'b', 'c'] as const;
      const workers = [h.open(), h.open(), h.open()];
      for (const w of workers) w.watch(pick(names));
      let edits = 0;
      for (let step = 0; step < 3000; step++) {
        const live = [...h.engine.allJobs()];
        const id = live.length > 0 && rnd() < 0.85 ? pick(live).id : 1 + int(h.engine.nextId);
        const w = pick(workers);
        const op = int(12);
        const what = `seed ${seed} step ${step} op ${op}`;
        if (op <= 2) {
          c.use(pick(names));
          c.tryPut({ priority: int(2048), delayMs: rnd() < 0.3 ? 1 + int(5000) : 0, body: 'x'.repeat(int(20)), ttrMs: 1000 + int(5000) });
        } else if (op === 3) {
          if (!w.session.waiting) w.reserve(rnd() < 0.5 ? 0 : null);
        } else if (op === 4) {
          const held = w.reservedIds();
          if (held.length > 0) {
            const j = pick(held);
            const r = rnd();
            if (r < 0.4) h.engine.release(w.session, j, int(2048), rnd() < 0.3 ? int(3000) : 0);
            else if (r < 0.7) h.engine.bury(w.session, j, int(2048));
            else h.engine.delete(w.session, j);
          }
        } else if (op === 5) {
          h.engine.kickJob(id);
        } else if (op <= 8) {
          const before = h.engine.job(id);
          const was = before === undefined ? undefined : jobState(before);
          const wasTube = before?.tube.name;
          const change: JobEdit = {};
          if (rnd() < 0.4) change.priority = int(2048);
          if (rnd() < 0.3) change.body = Buffer.alloc(int(60), 0x41 + int(26));
          if (rnd() < 0.3) change.ttrMs = 1000 + int(9000);
          if (rnd() < 0.4) change.delayMs = rnd() < 0.5 ? 0 : 1 + int(4000);
          if (rnd() < 0.4) change.tube = pick(names);
          const bytesBefore = h.engine.bodyBytes;
          const r = h.engine.editJob(id, change);
          if (before === undefined) expect(r, what).toEqual({ ok: false, code: 'NOT_FOUND' });
          else if (was === 'reserved') expect(r, what).toEqual({ ok: false, code: 'JOB_RESERVED' });
          else if (!r.ok) {
            expect(r.code, what).toBe('OUT_OF_MEMORY');
            expect(bytesBefore - jobBody(before).length + (change.body?.length ?? 0), what).toBeGreaterThan(400);
            expect(jobState(before), what).toBe(was);
            expect(before.tube.name, what).toBe(wasTube);
          } else {
            edits++;
            const job = r.value;
            expect(job, what).toBe(before);
            if (change.priority !== undefined) expect(jobPriority(job), what).toBe(change.priority);
            if (change.body !== undefined) expect(jobBody(job), what).toEqual(change.body);
            if (change.ttrMs !== undefined) expect(jobTtrMs(job), what).toBe(change.ttrMs);
            expect(job.tube.name, what).toBe(change.tube ?? wasTube);
            const expected =
              was === 'buried'
                ? ['buried']
                : change.delayMs !== undefined
                  ? change.delayMs > 0
                    ? ['delayed']
                    : ['ready', 'reserved']
                  : was === 'delayed'
                    ? ['delayed']
                    : ['ready', 'reserved'];
            expect(expected, what).toContain(jobState(job));
            if (jobState(job) === 'delayed' && change.delayMs !== undefined) expect(jobDeadlineAt(job), what).toBe(h.now() + change.delayMs);
            expect(journal.writes.at(-1), what).toBe(`rewrite ${job.id} ${jobState(job)} ${job.tube.name}`);
          }
        } else if (op === 9) {
          h.engine.clearSome(h.engine.tube(pick(names)) ?? h.engine.defaultTube, pick(['ready', 'delayed', 'buried'] as const), 1 + int(3));
        } else if (op === 10) {
          if (rnd() < 0.2) h.engine.pauseTube(pick(names), int(3000));
          else w.watch(pick(names));
        } else {
          h.advance(int(1500));
        }
        const problems = h.problems(h.engine.nextId);
        if (problems.length > 0) expect(problems, what).toEqual([]);
      }
      expect(edits).toBeGreaterThan(300);
    });
  }
});
