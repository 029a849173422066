/**
 * The job history ring: every transition of a job is recorded with its time and the connection
 * that made it, a job's events come back oldest first, and the ring keeps only the newest events.
 */
import { describe, expect, it } from 'vitest';
import { JobHistory } from './history.js';
import { Harness, unwrap } from './testing.js';

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
