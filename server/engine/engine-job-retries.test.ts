/**
 * Gearman's job retries (dropAfterFailures, `--gearman-job-retries N`): a job whose holder
 * disconnects, or whose hold runs out, for the N-th time is dropped; its watchers are told it
 * ended, and its history says why. 0: retried for ever.
 */
import { describe, expect, it } from 'vitest';
import type { JobWatcher } from './watchers.js';
import { Harness, RecordingJournal, unwrap } from './testing.js';
import { jobState } from './records.js';

/** A watcher that notes the jobs it was told ended (a waiting Gearman client). */
function endings(): JobWatcher & { ended: (id: number) => void; ids: number[] } {
  const ids: number[] = [];
  return { ids, update: () => undefined, ended: (id) => ids.push(id) };
}

describe('dropAfterFailures', () => {
  it('is off by default: a job goes back to ready at every disconnect', () => {
    const h = new Harness();
    const job = h.open().put();
    for (let i = 0; i < 20; i++) {
      const w = h.open();
      expect(w.reserveNow()).toBe(job.id);
      w.close();
      expect(jobState(job)).toBe('ready');
    }
  });

  it('drops a job at its N-th failure, disconnects and hold timeouts alike, tells its watchers and says why', () => {
    const journal = new RecordingJournal();
    const h = new Harness({ dropAfterFailures: 3, journal });
    const job = h.open().put();
    const watcher = endings();
    expect(h.engine.attachWatcher(job.id, watcher)).toBe(true);

    const first = h.open();
    first.reserveNow();
    first.close(); // failure 1
    const second = h.open();
    second.reserveNow();
    unwrap(h.engine.hold(second.session, job.id, 1_000));
    h.advance(1_001); // failure 2: the hold ran out
    expect(jobState(job)).toBe('ready');
    expect(watcher.ids).toEqual([]);

    const third = h.open();
    expect(third.reserveNow()).toBe(job.id);
    third.close(); // failure 3: dropped
    expect(h.engine.job(job.id)).toBeUndefined();
    expect(watcher.ids).toEqual([job.id]);
    expect(journal.writes).toContain(`delete ${job.id}`);
    const kinds = h.engine.history.of(job.id).map((e) => `${e.kind}${e.note === '' ? '' : `:${e.note}`}`);
    expect(kinds.slice(-2)).toEqual(['disconnect', 'retries-exhausted:3 disconnect']);
    expect(kinds).toContain('timeout');
  });

  it('makes the job ready again when the journal cannot record the drop', () => {
    const journal = new RecordingJournal();
    const h = new Harness({ dropAfterFailures: 1, journal });
    const job = h.open().put();
    journal.failDelete = true;
    const w = h.open();
    w.reserveNow();
    w.close();
    expect(jobState(job)).toBe('ready');
  });

  it('says a timeout was the last failure when it was', () => {
    const h = new Harness({ dropAfterFailures: 1 });
    const job = h.open().put();
    const w = h.open();
    w.reserveNow();
    unwrap(h.engine.hold(w.session, job.id, 500));
    h.advance(501);
    expect(h.engine.job(job.id)).toBeUndefined();
    expect(h.engine.history.of(job.id).at(-1)).toMatchObject({ kind: 'retries-exhausted', note: '1 timeout' });
  });
});
