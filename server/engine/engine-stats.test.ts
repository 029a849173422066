/**
 * Counters (ServerStats and per tube), drain mode, the memory budget, journal refusals and the
 * events the engine emits for observers.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { JOB_RECORD_HEAP_BYTES, TUBE_RECORD_HEAP_BYTES } from './record-costs.js';
import { COUNTED_COMMANDS } from './stats.js';
import { Harness, RecordingJournal, T0, type Client } from './testing.js';
import { jobState } from './records.js';

let h: Harness;
let c: Client;

beforeEach(() => {
  h = new Harness();
  c = h.open();
});

function expectConsistent(maxId = 50): void {
  expect(h.problems(maxId)).toEqual([]);
}

describe('ServerStats', () => {
  it('starts at zero apart from the first connection', () => {
    const fresh = new Harness().engine.stats;
    expect(fresh).toMatchObject({
      jobTimeouts: 0,
      totalJobs: 0,
      urgent: 0,
      reserved: 0,
      buried: 0,
      delayed: 0,
      ready: 0,
      currentConnections: 0,
      totalConnections: 0,
      producers: 0,
      workers: 0,
      waiting: 0,
    });
    for (const name of COUNTED_COMMANDS) expect(fresh.commands[name]).toBe(0);
    expect(h.engine.stats.currentConnections).toBe(1);
    expect(h.engine.startedAt).toBe(T0);
  });

  it('tracks every job state through a whole life cycle', () => {
    const stats = h.engine.stats;
    const snapshot = () => ({
      ready: stats.ready,
      urgent: stats.urgent,
      reserved: stats.reserved,
      delayed: stats.delayed,
      buried: stats.buried,
      total: stats.totalJobs,
    });
    c.put({ priority: 1, delayMs: 1000, ttrMs: 1000 });
    expect(snapshot()).toEqual({ ready: 0, urgent: 0, reserved: 0, delayed: 1, buried: 0, total: 1 });
    h.advance(1000);
    expect(snapshot()).toEqual({ ready: 1, urgent: 1, reserved: 0, delayed: 0, buried: 0, total: 1 });
    c.reserveNow();
    expect(snapshot()).toEqual({ ready: 0, urgent: 0, reserved: 1, delayed: 0, buried: 0, total: 1 });
    h.advance(1001);
    expect(snapshot()).toEqual({ ready: 1, urgent: 1, reserved: 0, delayed: 0, buried: 0, total: 1 });
    expect(stats.jobTimeouts).toBe(1);
    c.reserveNow();
    h.engine.bury(c.session, 1, 2000);
    expect(snapshot()).toEqual({ ready: 0, urgent: 0, reserved: 0, delayed: 0, buried: 1, total: 1 });
    h.engine.kick(h.engine.defaultTube, 1);
    expect(snapshot()).toEqual({ ready: 1, urgent: 0, reserved: 0, delayed: 0, buried: 0, total: 1 });
    c.reserveNow();
    h.engine.release(c.session, 1, 5, 500);
    expect(snapshot()).toEqual({ ready: 0, urgent: 0, reserved: 0, delayed: 1, buried: 0, total: 1 });
    h.engine.delete(c.session, 1);
    expect(snapshot()).toEqual({ ready: 0, urgent: 0, reserved: 0, delayed: 0, buried: 0, total: 1 });
    expect(h.engine.job(1)).toBeUndefined();
    expectConsistent();
  });

  it('urgent means a ready job with priority below 1024', () => {
    c.put({ priority: 1023 });
    c.put({ priority: 1024 });
    c.put({ priority: 0 });
    c.put({ priority: 1, delayMs: 1000 }); // delayed: not urgent
    expect(h.engine.stats.urgent).toBe(2);
    expect(h.engine.defaultTube.urgent).toBe(2);
    c.reserveNow(); // 3 (priority 0)
    expect(h.engine.stats.urgent).toBe(1);
    h.engine.release(c.session, 3, 5000, 0);
    expect(h.engine.stats.urgent).toBe(1);
    expect(h.engine.defaultTube.urgent).toBe(1);
    expectConsistent();
  });

  it('counts connections, producers, workers and waiting sessions', () => {
    const stats = h.engine.stats;
    const p = h.open();
    const w = h.open();
    const r = h.open();
    expect(stats).toMatchObject({ currentConnections: 4, totalConnections: 4, producers: 0, workers: 0 });
    p.put();
    p.put();
    expect(stats.producers).toBe(1);
    w.reserveNow();
    w.reserveNow();
    expect(stats.workers).toBe(1);
    h.engine.reserveJob(r.session, 99); // a failed reserve-job does not make a worker...
    expect(stats.workers).toBe(1);
    r.put();
    h.engine.reserveJob(r.session, 3); // ...a successful one does
    expect(stats).toMatchObject({ producers: 2, workers: 2 });
    expect(c.reserve(0).kind).toBe('timed-out'); // any reserve counts as a worker
    expect(stats.workers).toBe(3);
    expect(c.reserve(null).kind).toBe('waiting');
    expect(stats.waiting).toBe(1);
    p.close();
    w.close();
    c.close();
    expect(stats).toMatchObject({ currentConnections: 1, totalConnections: 4, producers: 1, workers: 1, waiting: 0 });
    expectConsistent();
  });

  it('count() bumps the named command counter', () => {
    h.engine.count('put');
    h.engine.count('put');
    h.engine.count('reserve-with-timeout');
    h.engine.count('kick-job');
    expect(h.engine.stats.commands).toMatchObject({ put: 2, 'reserve-with-timeout': 1, 'kick-job': 1, reserve: 0 });
  });
});

describe('per-tube counters', () => {
  it('track jobs in each state, totals, users, watchers, waiters, deletes and pauses', () => {
    const t = c.use('t');
    c.watch('t');
    const w = h.open();
    w.watch('t');
    expect(w.reserve(null).kind).toBe('waiting');
    expect(t).toMatchObject({ using: 1, watching: 2, totalJobs: 0 });
    expect(t.waiting.size).toBe(1);
    c.put({ priority: 1 }); // 1 -> w
    expect(t.waiting.size).toBe(0);
    c.put({ priority: 2000 }); // 2 ready, not urgent
    c.put({ priority: 3 }); // 3 ready, urgent
    c.put({ delayMs: 1000 }); // 4 delayed
    c.put(); // 5 -> buried
    h.engine.reserveJob(c.session, 5);
    h.engine.bury(c.session, 5, 0);
    expect({
      ready: t.ready.size,
      urgent: t.urgent,
      reserved: t.reserved,
      delayed: t.delayed.size,
      buried: t.buried.size,
      total: t.totalJobs,
      jobs: t.jobCount,
    }).toEqual({ ready: 2, urgent: 1, reserved: 1, delayed: 1, buried: 1, total: 5, jobs: 5 });
    h.engine.delete(w.session, 1);
    h.engine.delete(c.session, 2);
    expect(t.cmdDelete).toBe(2);
    expect(t.totalJobs).toBe(5);
    h.engine.pauseTube('t', 1000);
    h.engine.pauseTube('t', 0);
    expect(t.cmdPause).toBe(2);
    expect(h.engine.defaultTube).toMatchObject({ using: 1, watching: 2, totalJobs: 0, cmdDelete: 0 });
    expectConsistent();
  });
});

describe('drain', () => {
  it('refuses puts with DRAINING from then on, and keeps everything else working', () => {
    c.put(); // 1
    c.put({ delayMs: 1000 }); // 2
    const log = h.recordEvents();
    h.engine.setDraining();
    h.engine.setDraining();
    expect(h.engine.draining).toBe(true);
    expect(log).toEqual(['draining']);
    expect(c.tryPut()).toEqual({ ok: false, code: 'DRAINING' });
    expect(h.engine.stats.totalJobs).toBe(2);
    expect(c.reserveNow()).toBe(1);
    expect(h.engine.delete(c.session, 1).ok).toBe(true);
    h.advance(1000);
    expect(jobState(h.engine.job(2)!)).toBe('ready');
    expect(h.engine.kick(h.engine.defaultTube, 1)).toBe(0);
    expect(c.tryPut()).toEqual({ ok: false, code: 'DRAINING' });
  });

  it('a refused put does not use up an id of its own (the protocol allocates ids itself)', () => {
    h.engine.setDraining();
    expect(c.tryPut().ok).toBe(false);
    const id = h.engine.allocateJobId();
    expect(id).toBe(1);
  });
});

describe('memory budget', () => {
  it('refuses a put beyond maxJobBytes with OUT_OF_MEMORY and changes nothing else', () => {
    h = new Harness({ maxJobBytes: 10 });
    c = h.open();
    c.use('t');
    c.put({ body: '123456' }); // 1
    const stats = h.engine.stats;
    const tube = h.engine.tube('t')!;
    const before = {
      tubes: h.tubeNames(),
      bytes: h.engine.bodyBytes,
      jobs: h.engine.jobTotal,
      total: stats.totalJobs,
      tubeTotal: tube.totalJobs,
      ready: stats.ready,
      urgent: stats.urgent,
      next: h.engine.nextDeadline(),
    };
    const log = h.recordEvents();
    expect(h.engine.hasRoomFor(5)).toBe(false);
    expect(c.tryPut({ body: '12345' })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(c.tryPut({ body: '12345', delayMs: 1000 })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(log).toEqual([]);
    expect({
      tubes: h.tubeNames(),
      bytes: h.engine.bodyBytes,
      jobs: h.engine.jobTotal,
      total: stats.totalJobs,
      tubeTotal: tube.totalJobs,
      ready: stats.ready,
      urgent: stats.urgent,
      next: h.engine.nextDeadline(),
    }).toEqual(before);
    // no id was used up, and a body that fits exactly is accepted
    expect(h.engine.hasRoomFor(4)).toBe(true);
    expect(c.put({ body: '1234' }).id).toBe(2);
    expect(h.engine.bodyBytes).toBe(10);
    expect(c.tryPut({ body: '' }).ok).toBe(true);
    expect(c.tryPut({ body: 'x' })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    // deleting frees room
    h.engine.delete(c.session, 1);
    expect(c.put({ body: '123456' }).id).toBe(4);
    expectConsistent();
  });

  it('counts job and tube records against maxRecordHeapBytes: puts, use and watch of a new tube get OUT_OF_MEMORY', () => {
    // Room for the default tube, one more tube and two jobs.
    h = new Harness({ maxRecordHeapBytes: 2 * TUBE_RECORD_HEAP_BYTES + 2 * JOB_RECORD_HEAP_BYTES });
    c = h.open();
    c.use('t');
    expect(h.engine.recordHeapBytes).toBe(2 * TUBE_RECORD_HEAP_BYTES);
    c.put({ body: '' });
    c.put({ body: '' });
    expect(h.engine.recordHeapBytes).toBe(2 * TUBE_RECORD_HEAP_BYTES + 2 * JOB_RECORD_HEAP_BYTES);
    expect(c.tryPut({ body: '' })).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(h.engine.use(c.session, 'new')).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(h.engine.watch(c.session, 'new')).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(h.tubeNames()).toEqual(['default', 't']);
    expect(c.session.used.name).toBe('t');
    // Tubes that exist need no room.
    expect(h.engine.watch(c.session, 't')).toEqual({ ok: true, value: 2 });
    expect(h.engine.use(c.session, 'default').ok).toBe(true);
    // A tube left behind frees its record; a deleted job frees its own.
    h.engine.delete(c.session, 1);
    h.engine.delete(c.session, 2);
    h.engine.ignore(c.session, 't');
    expect(h.tubeNames()).toEqual(['default']);
    expect(h.engine.use(c.session, 'new').ok).toBe(true);
    expect(c.tryPut({ body: '' }).ok).toBe(true);
    expectConsistent();
  });

  it('a put the journal cannot record is OUT_OF_MEMORY and changes nothing', () => {
    const journal = new RecordingJournal();
    h = new Harness({ journal });
    c = h.open();
    journal.failPut = true;
    const log = h.recordEvents();
    expect(c.tryPut()).toEqual({ ok: false, code: 'OUT_OF_MEMORY' });
    expect(log).toEqual([]);
    expect(h.engine.jobTotal).toBe(0);
    expect(h.engine.stats.totalJobs).toBe(0);
    expect(h.engine.bodyBytes).toBe(0);
    journal.failPut = false;
    expect(c.put().id).toBe(2); // the engine allocated id 1 before asking the journal
    expectConsistent();
  });
});

describe('events', () => {
  it('job:changed follows a job through its states, and job:deleted ends it', () => {
    const log = h.recordEvents();
    c.put({ delayMs: 1000, ttrMs: 1000 });
    h.advance(1000);
    c.reserveNow();
    h.advance(1001); // TTR
    c.reserveNow();
    h.engine.release(c.session, 1, 0, 500);
    h.engine.kickJob(1);
    c.reserveNow();
    h.engine.bury(c.session, 1, 0);
    h.engine.kick(h.engine.defaultTube, 1);
    h.engine.reserveJob(c.session, 1);
    h.engine.delete(c.session, 1);
    expect(log).toEqual([
      'changed 1 new>delayed',
      'changed 1 delayed>ready',
      'changed 1 ready>reserved',
      'changed 1 reserved>ready',
      'changed 1 ready>reserved',
      'changed 1 reserved>delayed',
      'changed 1 delayed>ready',
      'changed 1 ready>reserved',
      'changed 1 reserved>buried',
      'changed 1 buried>ready',
      'changed 1 ready>reserved',
      'deleted 1 reserved',
    ]);
  });

  it('a put that goes straight to a waiter is reported as new>ready, then ready>reserved', () => {
    const w = h.open();
    w.reserve(null);
    const log = h.recordEvents();
    c.put();
    expect(log).toEqual(['changed 1 new>ready', 'changed 1 ready>reserved']);
  });

  it('job:deleted reports the state the job was deleted from', () => {
    c.put();
    c.put({ delayMs: 1000 });
    const log = h.recordEvents();
    h.engine.delete(c.session, 2);
    h.engine.delete(c.session, 1);
    expect(log).toEqual(['deleted 2 delayed', 'deleted 1 ready']);
  });

  it('tube:created and tube:removed are emitted once per tube life', () => {
    const log = h.recordEvents();
    c.use('a');
    c.watch('a');
    c.watch('b');
    c.use('default');
    c.ignore('a');
    c.put();
    c.close();
    expect(log).toEqual(['created a', 'created b', 'removed a', 'changed 1 new>ready', 'removed b']);
  });

  it('tube:paused is emitted when a pause starts and when it ends', () => {
    const log = h.recordEvents();
    h.engine.pauseTube('default', 1000);
    h.advance(1000);
    expect(log).toEqual(['paused default true', 'paused default false']);
  });

  it('nothing is emitted for failed operations', () => {
    const other = h.open();
    c.put();
    other.reserveNow();
    const log = h.recordEvents();
    h.engine.delete(c.session, 1);
    h.engine.release(c.session, 1, 0, 0);
    h.engine.bury(c.session, 1, 0);
    h.engine.touch(c.session, 1);
    h.engine.kickJob(1);
    h.engine.reserveJob(c.session, 1);
    h.engine.pauseTube('missing', 0);
    expect(log).toEqual([]);
  });

  it('listeners can unsubscribe, and has() reports whether anyone listens', () => {
    const seen: number[] = [];
    expect(h.engine.events.has('job:changed')).toBe(false);
    const off = h.engine.events.on('job:changed', (e) => seen.push(e.job.id));
    expect(h.engine.events.has('job:changed')).toBe(true);
    c.put();
    off();
    expect(h.engine.events.has('job:changed')).toBe(false);
    c.put();
    expect(seen).toEqual([1]);
  });
});
