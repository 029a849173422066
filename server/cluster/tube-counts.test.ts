import { describe, expect, it } from 'vitest';
import { zeroCounts } from './job-row.js';
import { referenced, tubeCountsOf, type TubeFacts } from './tube-counts.js';
import type { TubeRow } from './tube-policies.js';

const row = (over: Partial<TubeRow> = {}): TubeRow => ({
  pause_ms: 0,
  unpause_at: 0,
  dead_letter_after: null,
  policy: null,
  tokens: 0,
  refilled_at: 0,
  refused_puts: 0,
  backoffs: 0,
  ...over,
});

const facts = (over: Partial<TubeFacts> = {}): TubeFacts => ({
  counts: { urgent: 1, ready: 3, reserved: 2, delayed: 4, buried: 5 },
  totalJobs: 20,
  row: undefined,
  nextReadyCreatedAt: 77,
  local: undefined,
  ...over,
});

describe('tubeCountsOf', () => {
  it('takes the counts from the database and the clients from this node', () => {
    const local = { using: 1, watching: 2, waiting: 3, deletes: 4, pauses: 5 };
    const c = tubeCountsOf('t', facts({ local }), 1000, 0);
    expect(c).toMatchObject({ name: 't', urgent: 1, ready: 3, reserved: 2, delayed: 4, buried: 5, totalJobs: 20, nextReadyCreatedAt: 77, ...local });
    // The counts stand in for a count of state changes (none is kept in the database).
    expect(c.stateChanges).toEqual([23, 2, 4, 5]);
    expect(c.policy).toBeNull();
  });

  it('has no clients, pause or settings of its own without a local entry or a tubes row', () => {
    const c = tubeCountsOf('t', facts({ counts: zeroCounts(), totalJobs: 0 }), 1000, 7);
    expect(c).toMatchObject({ using: 0, watching: 0, waiting: 0, deletes: 0, pauses: 0, pauseMs: 0, unpauseAt: 0, deadLetterAfter: 7, ownSettings: null });
  });

  it('is paused only until the pause ends', () => {
    const paused = facts({ row: row({ pause_ms: 500, unpause_at: 1200 }) });
    expect(tubeCountsOf('t', paused, 1000, 0)).toMatchObject({ pauseMs: 500, unpauseAt: 1200 });
    expect(tubeCountsOf('t', paused, 1200, 0)).toMatchObject({ pauseMs: 0, unpauseAt: 0 });
  });

  it('uses the tube’s own dead-letter limit over the node’s default', () => {
    const c = tubeCountsOf('t', facts({ row: row({ dead_letter_after: 3 }) }), 1000, 9);
    expect(c).toMatchObject({ deadLetterAfter: 3, ownSettings: { deadLetterAfter: 3 } });
  });

  it('shows a policy whose cap the reserved jobs reach as held', () => {
    const policy = { concurrency: 2, rate: null, queueCap: null, timeoutBackoff: null };
    const c = tubeCountsOf('t', facts({ row: row({ policy, refused_puts: 6 }) }), 1000, 0);
    expect(c.policy).toMatchObject({ capHeld: true, rateHeld: false, refusedPuts: 6 });
  });
});

describe('referenced', () => {
  it('is true while a client uses, watches or waits on the tube; deletes and pauses do not count', () => {
    expect(referenced(undefined)).toBe(false);
    expect(referenced({ using: 0, watching: 0, waiting: 0, deletes: 3, pauses: 1 })).toBe(false);
    expect(referenced({ using: 0, watching: 1, waiting: 0, deletes: 0, pauses: 0 })).toBe(true);
  });
});
