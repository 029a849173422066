/**
 * Tube lifetime and lists: reference counting (uses, watches, jobs), the `default` tube, the
 * order of list-tubes and list-tubes-watched after removals, watch and ignore.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { Harness, type Client } from './testing.js';
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

describe('tube reference counting', () => {
  it('starts with only default, used and watched by each new session', () => {
    expect(h.tubeNames()).toEqual(['default']);
    expect(c.session.used).toBe(h.engine.defaultTube);
    expect(c.watched()).toEqual(['default']);
    expect(h.engine.defaultTube.using).toBe(1);
    expect(h.engine.defaultTube.watching).toBe(1);
    h.open();
    expect(h.engine.defaultTube.using).toBe(2);
    expect(h.engine.defaultTube.watching).toBe(2);
  });

  it('use creates a tube; leaving it removes it once nothing refers to it', () => {
    const foo = c.use('foo-');
    expect(h.tubeNames()).toEqual(['default', 'foo-']);
    expect(foo.using).toBe(1);
    expect(h.engine.defaultTube.using).toBe(0);
    c.use('bar');
    expect(h.tubeNames()).toEqual(['default', 'bar']);
    expect(h.engine.tube('foo-')).toBeUndefined();
    expectConsistent();
  });

  it('a tube used by a session goes away when the session closes', () => {
    c.use('foo-');
    c.close();
    expect(h.tubeNames()).toEqual(['default']);
  });

  it('using the tube already in use changes nothing', () => {
    const foo = c.use('foo');
    const log = h.recordEvents();
    expect(c.use('foo')).toBe(foo);
    expect(foo.using).toBe(1);
    expect(log).toEqual([]);
    expect(h.tubeNames()).toEqual(['default', 'foo']);
  });

  it('jobs keep a tube alive after it is no longer used; deleting the last one removes it', () => {
    c.use('jobs');
    c.put(); // 1
    c.put({ delayMs: 1000 }); // 2
    c.put(); // 3 reserved
    h.engine.reserveJob(c.session, 3);
    c.put(); // 4 buried
    h.engine.reserveJob(c.session, 4);
    h.engine.bury(c.session, 4, 0);
    c.use('default');
    expect(h.tubeNames()).toEqual(['default', 'jobs']);
    for (const id of [1, 2, 3]) {
      h.engine.delete(c.session, id);
      expect(h.tubeNames()).toEqual(['default', 'jobs']);
    }
    const log = h.recordEvents();
    h.engine.delete(c.session, 4);
    expect(h.tubeNames()).toEqual(['default']);
    expect(log).toEqual(['deleted 4 buried', 'removed jobs']);
    expectConsistent();
  });

  it('a reserved job keeps its tube alive when its holder closes; the job returns there', () => {
    const w = h.open();
    c.use('t');
    c.put();
    h.engine.reserveJob(w.session, 1);
    c.close();
    expect(h.tubeNames()).toEqual(['default', 't']);
    w.close();
    expect(jobState(h.engine.job(1)!)).toBe('ready');
    expect(h.engine.tube('t')!.ready.size).toBe(1);
  });

  it('a watched tube stays while watched, even when empty', () => {
    expect(c.watch('w')).toBe(2);
    expect(h.tubeNames()).toEqual(['default', 'w']);
    expect(c.ignore('w')).toEqual({ ok: true, value: 1 });
    expect(h.tubeNames()).toEqual(['default']);
  });

  it('a waiting session does not keep a tube alive on its own: its watch does', () => {
    c.watch('w');
    expect(c.reserve(null).kind).toBe('waiting');
    expect(h.engine.tube('w')!.watching).toBe(1);
    c.close();
    expect(h.tubeNames()).toEqual(['default']);
  });

  it('never removes default', () => {
    c.use('other');
    c.watch('other');
    c.ignore('default');
    expect(h.tubeNames()).toEqual(['default', 'other']);
    const d = h.engine.defaultTube;
    expect(d.using + d.watching + d.jobCount).toBe(0);
    c.close();
    expect(h.tubeNames()).toEqual(['default']);
    expect(h.engine.tube('default')).toBe(d);
  });

  it('a removed tube comes back fresh, with zero counters', () => {
    c.use('t');
    c.put();
    h.engine.delete(c.session, 1);
    h.engine.pauseTube('t', 1000);
    const old = h.engine.tube('t')!;
    expect(old.totalJobs).toBe(1);
    c.use('default');
    expect(h.engine.tube('t')).toBeUndefined();
    const fresh = c.use('t');
    expect(fresh).not.toBe(old);
    expect(fresh).toMatchObject({ totalJobs: 0, cmdDelete: 0, cmdPause: 0, paused: false });
  });

  it('a paused tube that goes away leaves no timer behind', () => {
    c.use('p');
    h.engine.pauseTube('p', 10_000);
    expect(h.engine.nextDeadline()).toBeDefined();
    c.use('default');
    expect(h.engine.tube('p')).toBeUndefined();
    expect(h.engine.nextDeadline()).toBeUndefined();
    h.advance(20_000);
    expectConsistent();
  });

  it('findOrCreateTube returns the same tube for the same name', () => {
    const a = h.engine.findOrCreateTube('a');
    expect(h.engine.findOrCreateTube('a')).toBe(a);
    expect(h.engine.tube('a')).toBe(a);
    expect(h.tubeNames()).toEqual(['default', 'a']);
  });
});

describe('list order', () => {
  it('is creation order (upstream list_tube)', () => {
    expect(c.watch('w')).toBe(2);
    c.use('u');
    expect(h.tubeNames()).toEqual(['default', 'w', 'u']);
    expect(c.session.used.name).toBe('u');
    expect(c.watched()).toEqual(['default', 'w']);
    expect(c.ignore('default')).toEqual({ ok: true, value: 1 });
    expect(c.watched()).toEqual(['w']);
    expect(c.ignore('w')).toEqual({ ok: false, code: 'NOT_IGNORED' });
    expect(c.watched()).toEqual(['w']);
  });

  it('fills the slot of a removed tube with the last tube (swap-remove)', () => {
    const others = ['a', 'b', 'c'].map((name) => {
      const s = h.open();
      s.use(name);
      return s;
    });
    expect(h.tubeNames()).toEqual(['default', 'a', 'b', 'c']);
    others[0]!.close();
    expect(h.tubeNames()).toEqual(['default', 'c', 'b']);
    const d = h.open();
    d.use('d');
    expect(h.tubeNames()).toEqual(['default', 'c', 'b', 'd']);
    others[2]!.close(); // c
    expect(h.tubeNames()).toEqual(['default', 'd', 'b']);
  });

  it('after closeSession, follows beanstalkd clearing the watch list by removing its first item each time', () => {
    // The session watches default, a, b, c; x, y, z are kept alive by other sessions.
    c.watch('a');
    c.watch('b');
    c.watch('c');
    for (const name of ['x', 'y', 'z']) h.open().use(name);
    expect(h.tubeNames()).toEqual(['default', 'a', 'b', 'c', 'x', 'y', 'z']);
    const log = h.recordEvents();
    c.close();
    // watch list [default, a, b, c] is cleared as default, c, b, a (first item, then the last moved up)
    expect(log).toEqual(['removed c', 'removed b', 'removed a']);
    expect(h.tubeNames()).toEqual(['default', 'x', 'y', 'z']);
    expectConsistent();
  });

  it('removes the watched tubes before the used one at close', () => {
    c.watch('w1');
    c.watch('w2');
    c.use('u');
    const keep = h.open();
    keep.use('k');
    const log = h.recordEvents();
    c.close();
    expect(log).toEqual(['removed w2', 'removed w1', 'removed u']);
    expect(h.tubeNames()).toEqual(['default', 'k']);
  });
});

describe('watch and ignore', () => {
  it('watch returns the count, creates the tube, and a repeated watch is a no-op', () => {
    expect(c.watch('a')).toBe(2);
    expect(c.watch('a')).toBe(2);
    expect(h.engine.tube('a')!.watching).toBe(1);
    expect(c.watch('default')).toBe(2);
    expect(h.engine.defaultTube.watching).toBe(1);
    expect(c.watched()).toEqual(['default', 'a']);
  });

  it('ignore of a tube not watched, or that does not exist, returns the count and creates nothing', () => {
    expect(c.ignore('nowhere')).toEqual({ ok: true, value: 1 });
    expect(h.engine.tube('nowhere')).toBeUndefined();
    h.open().use('elsewhere');
    expect(c.ignore('elsewhere')).toEqual({ ok: true, value: 1 });
    expect(h.tubeNames()).toEqual(['default', 'elsewhere']);
  });

  it('ignore of the last watched tube is NOT_IGNORED', () => {
    expect(c.ignore('default')).toEqual({ ok: false, code: 'NOT_IGNORED' });
    expect(c.watched()).toEqual(['default']);
    expect(h.engine.defaultTube.watching).toBe(1);
  });

  it('ignore swap-removes in the watch list and decrements the tube count', () => {
    for (const name of ['a', 'b', 'c']) c.watch(name);
    const other = h.open();
    other.watch('a');
    expect(c.ignore('a')).toEqual({ ok: true, value: 3 });
    expect(c.watched()).toEqual(['default', 'c', 'b']);
    expect(h.engine.tube('a')!.watching).toBe(1);
    expect(h.tubeNames()).toEqual(['default', 'a', 'b', 'c']);
    other.ignore('a');
    expect(h.tubeNames()).toEqual(['default', 'c', 'b']);
    expectConsistent();
  });

  it('a newly watched tube takes part in reserve at once', () => {
    c.use('late');
    c.put();
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
    c.watch('late');
    expect(c.reserveNow()).toBe(1);
  });

  it('an ignored tube no longer takes part in reserve', () => {
    c.watch('gone');
    c.use('gone');
    c.put();
    c.ignore('gone');
    expect(c.reserve(0)).toEqual({ kind: 'timed-out' });
  });
});
