/**
 * The job history ring: every transition of a job is recorded with its time and the connection
 * that made it, a job's events come back oldest first, and the ring keeps only the newest events.
 */
import { describe, expect, it } from 'vitest';
import { JobHistory, MAX_EVENTS_READ } from './history.js';
import { Harness, unwrap } from './testing.js';
import { jobState } from './records.js';

describe('the job history of the engine', () => {
  it('records put, reserve, release, timeout, bury, kick, edit, move, dead-letter and delete with who and when', () => {
    const h = new Harness({ deadLetterAfter: 3 });
    const producer = h.open();
    producer.session.peer = '10.0.0.1:5000';
    const worker = h.open();
    worker.session.peer = '10.0.0.2:6000';
    const t0 = h.now();
    const job = producer.put({ ttrMs: 1_000 });
    worker.reserveNow();
    h.advance(10);
    unwrap(h.engine.release(worker.session, job.id, 0, 0));
    worker.reserveNow();
    h.advance(1_001);
    worker.reserveNow();
    unwrap(h.engine.release(worker.session, job.id, 0, 0));
    unwrap(h.engine.kickJob(job.id));
    unwrap(h.engine.editJob(job.id, { priority: 5, body: Buffer.from('fixed') }));
    unwrap(h.engine.editJob(job.id, { tube: 'elsewhere' }));
    worker.watch('elsewhere');
    worker.reserveNow();
    unwrap(h.engine.bury(worker.session, job.id, 1));
    unwrap(h.engine.delete(null, job.id));

    const events = h.engine.history.of(job.id).map((e) => [e.kind, e.connection, e.peer, e.note, e.at - t0]);
    const p = producer.id;
    const w = worker.id;
    expect(events).toEqual([
      ['put', p, '10.0.0.1:5000', '', 0],
      ['reserve', w, '10.0.0.2:6000', '', 0],
      ['release', w, '10.0.0.2:6000', '', 10],
      ['reserve', w, '10.0.0.2:6000', '', 10],
      ['timeout', w, '10.0.0.2:6000', '', 1_011],
      ['reserve', w, '10.0.0.2:6000', '', 1_011],
      ['release', w, '10.0.0.2:6000', '', 1_011],
      ['dead-letter', 0, '', 'release', 1_011],
      ['kick', 0, '', '', 1_011],
      ['edit', 0, '', 'body, priority', 1_011],
      ['move', 0, '', 'default', 1_011],
      ['reserve', w, '10.0.0.2:6000', '', 1_011],
      ['bury', w, '10.0.0.2:6000', '', 1_011],
      ['delete', 0, '', '', 1_011],
    ]);
  });

  it('says when a disconnect gave a job back', () => {
    const h = new Harness();
    const c = h.open();
    const job = c.put();
    c.reserveNow();
    c.close();
    expect(h.engine.history.of(job.id).map((e) => e.kind)).toEqual(['put', 'reserve', 'disconnect']);
  });

  it('keeps only the newest events once full, oldest first', () => {
    const ring = new JobHistory(5);
    for (let i = 1; i <= 12; i++) ring.record(i % 2, i, 'kick', 0, '');
    expect(ring.recorded).toBe(12);
    expect(ring.of(0).map((e) => e.at)).toEqual([8, 10, 12]);
    expect(ring.of(1).map((e) => e.at)).toEqual([9, 11]);
    expect(new JobHistory(0).of(1)).toEqual([]);
    const none = new JobHistory(0);
    none.record(1, 1, 'put', 0, '');
    expect(none.of(1)).toEqual([]);
  });
});

describe('the order of history events when a job goes straight to a waiting worker', () => {
  const kinds = (h: Harness, id: number): string[] => h.engine.history.of(id).map((e) => `${e.kind}${e.connection === 0 ? '' : `@${e.connection}`}`);

  it('records a disconnect before the reserve that hands the job on', () => {
    const h = new Harness();
    const a = h.open();
    const b = h.open();
    const job = a.put();
    a.reserveNow();
    expect(b.reserve(null).kind).toBe('waiting');
    a.close();
    expect(h.engine.holderOf(job)).toBe(b.session);
    expect(kinds(h, job.id)).toEqual([`put@${a.id}`, `reserve@${a.id}`, `disconnect@${a.id}`, `reserve@${b.id}`]);
  });

  it('records an edit before the reserve it causes', () => {
    const h = new Harness();
    const a = h.open();
    const w = h.open();
    const job = a.put({ delayMs: 60_000 });
    expect(w.reserve(null).kind).toBe('waiting');
    unwrap(h.engine.editJob(job.id, { delayMs: 0 }));
    expect(jobState(job)).toBe('reserved');
    expect(kinds(h, job.id)).toEqual([`put@${a.id}`, 'edit', `reserve@${w.id}`]);
  });

  it('answers at most the newest MAX_EVENTS_READ events of one job', () => {
    const ring = new JobHistory(5000);
    for (let i = 1; i <= 3000; i++) ring.record(7, i, 'kick', 0, '');
    const events = ring.of(7);
    expect(events).toHaveLength(MAX_EVENTS_READ);
    expect(events[0]!.at).toBe(3000 - MAX_EVENTS_READ + 1);
  });
});
