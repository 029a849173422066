/**
 * What the engine offers beyond beanstalkd's reserve, for doors such as Gearman's: a wake-up
 * without a job, reservations held without a TTR, news of a job passed to whoever waits on it,
 * and the job-size limit.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { jobImage } from '../persistence/testing.js';
import type { JobUpdate, JobWatcher } from './watchers.js';
import { Harness, unwrap, type Client } from './testing.js';
import { jobState, jobDeadlineAt, jobCounters, jobBody } from './records.js';

let h: Harness;
let producer: Client;

beforeEach(() => {
  h = new Harness();
  producer = h.open();
});

describe('sleep: a wake-up without a job', () => {
  it('is answered at once when a watched tube has a ready job, and then waits for nothing', () => {
    producer.put();
    const w = h.open();
    expect(h.engine.sleep(w.session)).toBe(true);
    expect(w.session.waiting).toBe(false);
    expect(w.delegate.drain()).toEqual([]);
  });

  it('wakes every sleeper that can take a new job exactly once, and reserves nothing for them', () => {
    const sleepers = [h.open(), h.open(), h.open()];
    for (const s of sleepers) expect(h.engine.sleep(s.session)).toBe(false);
    expect(h.engine.stats.waiting).toBe(3);
    producer.put();
    producer.put();
    for (const s of sleepers) expect(s.delegate.drain()).toEqual([{ kind: 'woken' }]);
    expect(h.engine.stats.waiting).toBe(0);
    expect(h.engine.stats.ready).toBe(2);
    expect(h.problems(10)).toEqual([]);
  });

  it('does not wake a sleeper for a tube it does not watch, nor for a paused one', () => {
    const w = h.open();
    h.engine.sleep(w.session);
    producer.use('other');
    producer.put();
    expect(w.delegate.drain()).toEqual([]);
    unwrap(h.engine.pauseTube('default', 10_000));
    producer.use('default');
    producer.put();
    expect(w.delegate.drain()).toEqual([]);
    h.advance(10_001);
    expect(w.delegate.drain()).toEqual([{ kind: 'woken' }]);
  });

  it('wakes a sleeper before a reserver takes the job, and the woken one may then find nothing', () => {
    const sleeper = h.open();
    h.engine.sleep(sleeper.session);
    const reserver = h.open();
    expect(reserver.reserve(null)).toEqual({ kind: 'waiting' });
    const job = producer.put();
    expect(sleeper.delegate.drain()).toEqual([{ kind: 'woken' }]);
    expect(reserver.delegate.drain()).toEqual([{ kind: 'reserved', jobId: job.id }]);
    expect(sleeper.reserve(0)).toEqual({ kind: 'timed-out' });
  });

  it('follows the watch list while asleep: a tube watched later wakes it, an ignored one does not', () => {
    const w = h.open();
    w.watch('later');
    w.ignore('default');
    const other = h.open();
    other.watch('gone');
    h.engine.sleep(other.session);
    expect(h.engine.sleep(w.session)).toBe(false);
    w.watch('fresh');
    producer.use('fresh');
    producer.put();
    expect(w.delegate.drain()).toEqual([{ kind: 'woken' }]);
    expect(h.engine.sleep(w.session)).toBe(true); // the job is still ready
    unwrap(h.engine.delete(null, 1));
    expect(h.engine.sleep(w.session)).toBe(false);
    w.ignore('fresh');
    producer.put();
    expect(w.delegate.drain()).toEqual([]);
    // Ignoring a tube while asleep leaves no trace in it: a job there reserves nothing for this session.
    other.ignore('gone');
    const r = h.open();
    r.watch('gone');
    expect(r.reserve(null)).toEqual({ kind: 'waiting' });
    producer.use('gone');
    const job = producer.put();
    expect(r.delegate.drain()).toEqual([{ kind: 'reserved', jobId: job.id }]);
    expect(other.delegate.drain()).toEqual([]);
    expect(h.problems(20)).toEqual([]);
  });

  it('is cancelled by a reserve, by a half-close (without TIMED_OUT) and by the end of the session', () => {
    const a = h.open();
    h.engine.sleep(a.session);
    expect(a.reserve(0)).toEqual({ kind: 'timed-out' });
    expect(a.session.waiting).toBe(false);
    const b = h.open();
    h.engine.sleep(b.session);
    h.engine.halfClose(b.session);
    expect(b.delegate.drain()).toEqual([]);
    const c = h.open();
    h.engine.sleep(c.session);
    c.close();
    producer.put();
    expect([a, b, c].flatMap((x) => x.delegate.drain())).toEqual([]);
    expect(h.engine.stats.waiting).toBe(0);
  });
});

describe('holds without a TTR', () => {
  it('keeps a job reserved however long, until the session lets go or ends', () => {
    const job = producer.put({ ttrMs: 1000 });
    const w = h.open();
    h.engine.setHold(w.session, Number.POSITIVE_INFINITY);
    expect(w.reserveNow()).toBe(job.id);
    expect(h.engine.nextDeadline()).toBeUndefined();
    h.advance(24 * 3600 * 1000);
    expect(jobState(job)).toBe('reserved');
    expect(h.engine.stats.jobTimeouts).toBe(0);
    w.close();
    expect(jobState(job)).toBe('ready');
  });

  it('overrides the TTR with another length, and -1 goes back to the job TTR', () => {
    const first = producer.put({ ttrMs: 60_000 });
    const second = producer.put({ ttrMs: 60_000 });
    const w = h.open();
    h.engine.setHold(w.session, 5000);
    expect(w.reserveNow()).toBe(first.id);
    expect(jobDeadlineAt(first)).toBe(h.now() + 5000);
    h.engine.setHold(w.session, -1);
    expect(w.reserveNow()).toBe(second.id);
    expect(jobDeadlineAt(second)).toBe(h.now() + 60_000);
    h.advance(5001);
    expect(jobState(first)).toBe('ready');
    expect(jobCounters(first).timeouts).toBe(1);
  });
});

/** An update whose bytes sit inside a larger packet, as a worker's WORK_* packet carries them. */
function news(kind: string, text: string): JobUpdate {
  const data = Buffer.from(`H:x:1\0${text}\0`, 'latin1');
  return { kind, data, start: 6, end: 6 + text.length };
}

class RecordingWatcher implements JobWatcher {
  readonly log: string[] = [];
  constructor(private readonly name: string) {}
  update(jobId: number, update: JobUpdate): void {
    this.log.push(`${this.name} ${jobId} ${update.kind} ${update.data.toString('latin1', update.start, update.end)}`);
  }
  ended(jobId: number): void {
    this.log.push(`${this.name} ${jobId} ended`);
  }
}

describe('job watchers', () => {
  it('pass each update, byte for byte and in order, to every watcher until the job is deleted', () => {
    const job = producer.put();
    const a = new RecordingWatcher('a');
    const b = new RecordingWatcher('b');
    expect(h.engine.attachWatcher(job.id, a)).toBe(true);
    expect(h.engine.attachWatcher(job.id, b)).toBe(true);
    expect(h.engine.report(job.id, news('data', '1'))).toBe(2);
    expect(h.engine.detachWatcher(job.id, a)).toBe(1);
    expect(h.engine.report(job.id, news('status', '2'))).toBe(1);
    unwrap(h.engine.delete(null, job.id));
    expect(h.engine.report(job.id, news('late', '3'))).toBe(0);
    expect(a.log).toEqual([`a ${job.id} data 1`]);
    expect(b.log).toEqual([`b ${job.id} data 1`, `b ${job.id} status 2`, `b ${job.id} ended`]);
    expect(h.engine.watcherCount(job.id)).toBe(0);
  });

  it('cannot watch a job that does not exist', () => {
    expect(h.engine.attachWatcher(99, new RecordingWatcher('x'))).toBe(false);
  });
});

describe('the job-size limit', () => {
  it('holds only a new body to it: a job kept from a run with a larger -z can still be edited', () => {
    const small = new Harness({ maxJobSize: 2 });
    // What a restart with a smaller -z recovers from the binlog.
    small.engine.restoreJob(jobImage({ id: 1, priority: 0, createdAt: small.now(), body: Buffer.from('1234') }), 0);
    small.engine.finishRestore(2);
    expect(small.engine.editJob(1, { priority: 7 }).ok).toBe(true);
    expect(small.engine.editJob(1, { tube: 'elsewhere' }).ok).toBe(true);
    expect(small.engine.editJob(1, { body: Buffer.from('123') })).toEqual({ ok: false, code: 'JOB_TOO_BIG' });
  });

  it('refuses a put or an edit with a body over maxJobSize, and takes one of exactly that size', () => {
    const small = new Harness({ maxJobSize: 4 });
    const c = small.open();
    expect(c.tryPut({ body: '12345' })).toEqual({ ok: false, code: 'JOB_TOO_BIG' });
    const job = c.put({ body: '1234' });
    expect(small.engine.editJob(job.id, { body: Buffer.from('12345') })).toEqual({ ok: false, code: 'JOB_TOO_BIG' });
    expect(jobBody(job).toString()).toBe('1234');
    expect(small.engine.isTooBig(4)).toBe(false);
    expect(small.engine.isTooBig(5)).toBe(true);
  });
});
