/**
 * The dead-letter rule: the N-th release or TTR timeout of a job since it was put or last kicked
 * buries it instead of making it ready again; a tube's own setting overrides the server's, and
 * outlives the tube.
 */
import { describe, expect, it } from 'vitest';
import { BURY_CAUSES, jobState, jobCounters, jobPriority } from './records.js';
import { Harness, RecordingJournal, unwrap } from './testing.js';

const cause = (code: number): string => BURY_CAUSES[code]!;

describe('the dead-letter rule', () => {
  it('is off by default: a job may be released for ever (beanstalkd)', () => {
    const h = new Harness();
    const c = h.open();
    const job = c.put();
    for (let i = 0; i < 50; i++) {
      c.reserveNow();
      unwrap(h.engine.release(c.session, job.id, 0, 0));
      expect(jobState(job)).toBe('ready');
    }
    expect(jobCounters(job).strikes).toBe(50);
  });

  it('buries at the N-th release, with the priority the release gave, and says why', () => {
    const h = new Harness({ deadLetterAfter: 3 });
    const c = h.open();
    const job = c.put({ priority: 7 });
    for (let i = 1; i <= 2; i++) {
      c.reserveNow();
      unwrap(h.engine.release(c.session, job.id, 7, i === 2 ? 5_000 : 0));
      if (i === 2) h.advance(5_000);
      expect(jobState(job)).toBe('ready');
    }
    c.reserveNow();
    unwrap(h.engine.release(c.session, job.id, 42, 0));
    expect(jobState(job)).toBe('buried');
    expect(jobPriority(job)).toBe(42);
    expect(cause(jobCounters(job).buryCause)).toBe('dead-letter-release');
    expect(jobCounters(job).releases).toBe(3);
    expect(jobCounters(job).buries).toBe(1);
    expect(h.engine.stats.buried).toBe(1);
    expect(h.problems(10)).toEqual([]);
  });

  it('counts timeouts with releases, and buries at a timeout that reaches N', () => {
    const h = new Harness({ deadLetterAfter: 2 });
    const c = h.open();
    const job = c.put({ ttrMs: 1_000 });
    c.reserveNow();
    unwrap(h.engine.release(c.session, job.id, 0, 0));
    c.reserveNow();
    h.advance(1_001);
    expect(jobState(job)).toBe('buried');
    expect(jobCounters(job).timeouts).toBe(1);
    expect(cause(jobCounters(job).buryCause)).toBe('dead-letter-timeout');
    expect(h.problems(10)).toEqual([]);
  });

  it('starts counting again after a kick; a worker bury is told apart', () => {
    const h = new Harness({ deadLetterAfter: 1 });
    const c = h.open();
    const job = c.put();
    c.reserveNow();
    unwrap(h.engine.release(c.session, job.id, 0, 0));
    expect(jobState(job)).toBe('buried');
    unwrap(h.engine.kickJob(job.id));
    expect(jobCounters(job).strikes).toBe(0);
    expect(cause(jobCounters(job).buryCause)).toBe('none');
    c.reserveNow();
    unwrap(h.engine.bury(c.session, job.id, 0));
    expect(cause(jobCounters(job).buryCause)).toBe('bury');
    expect(h.engine.kick(job.tube, 10)).toBe(1);
    c.reserveNow();
    unwrap(h.engine.release(c.session, job.id, 0, 0));
    expect(cause(jobCounters(job).buryCause)).toBe('dead-letter-release');
  });

  it('a disconnect is no strike: the job goes back to ready', () => {
    const h = new Harness({ deadLetterAfter: 1 });
    const c = h.open();
    const job = c.put();
    c.reserveNow();
    c.close();
    expect(jobState(job)).toBe('ready');
    expect(jobCounters(job).strikes).toBe(0);
  });

  it('takes a tube setting over the server one: stricter, looser or off, and back to the default', () => {
    const h = new Harness({ deadLetterAfter: 2 });
    const c = h.open();
    c.use('strict');
    c.watch('strict');
    unwrap(h.engine.setTubeSettings('strict', { deadLetterAfter: 1 }));
    const strict = c.put();
    unwrap(h.engine.setTubeSettings('off', { deadLetterAfter: 0 }));
    c.use('off');
    c.watch('off');
    const off = c.put();
    expect(h.engine.tube('strict')!.deadLetterAfter).toBe(1);
    expect(h.engine.tube('off')!.deadLetterAfter).toBe(0);
    c.ignore('default');
    for (let i = 0; i < 5; i++) {
      const id = c.reserveNow();
      unwrap(h.engine.release(c.session, id, 0, 0));
    }
    expect(jobState(strict)).toBe('buried');
    expect(jobState(off)).toBe('ready');
    expect(jobCounters(off).strikes).toBe(4);
    // Back to the server's limit (2): the job's strikes are already past it, so its next release buries it.
    unwrap(h.engine.setTubeSettings('off', null));
    expect(h.engine.tube('off')!.deadLetterAfter).toBe(2);
    c.reserveNow();
    unwrap(h.engine.release(c.session, off.id, 0, 0));
    expect(jobState(off)).toBe('buried');
  });

  it('keeps a tube setting while the tube comes and goes, and journals every change', () => {
    const journal = new RecordingJournal();
    const h = new Harness({ journal });
    unwrap(h.engine.setTubeSettings('emails', { deadLetterAfter: 5 }));
    expect(h.engine.tube('emails')).toBeUndefined();
    const c = h.open();
    c.use('emails');
    expect(h.engine.tube('emails')!.deadLetterAfter).toBe(5);
    c.use('default');
    expect(h.engine.tube('emails')).toBeUndefined();
    expect(h.engine.ownTubeSettings('emails')).toEqual({ deadLetterAfter: 5 });
    unwrap(h.engine.setTubeSettings('emails', null));
    expect(h.engine.ownTubeSettings('emails')).toBeNull();
    expect(journal.writes.filter((w) => w.startsWith('tube'))).toEqual(['tube emails dead-letter-after 5', 'tube emails cleared']);
    journal.failUpdate = true;
    expect(h.engine.setTubeSettings('emails', { deadLetterAfter: 1 })).toEqual({ ok: false, code: 'INTERNAL_ERROR' });
    expect(h.engine.ownTubeSettings('emails')).toBeNull();
  });
});
