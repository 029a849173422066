import { describe, expect, it } from 'vitest';
import { JobWatchers, type JobUpdate, type JobWatcher } from './watchers.js';

/** A watcher that writes down what it hears, and may act on it (detach itself) while it does. */
function recorder(name: string, heard: string[], onUpdate?: (id: number) => void): JobWatcher {
  return {
    update: (id, update) => {
      heard.push(`${name} ${id} ${update.kind}`);
      onUpdate?.(id);
    },
    ended: (id) => heard.push(`${name} ${id} ended`),
  };
}

const COMPLETE: JobUpdate = { kind: '13', data: Buffer.from('done'), start: 0, end: 4 };

describe('JobWatchers', () => {
  it('keeps a lone watcher, tells it, and forgets it when it detaches', () => {
    const heard: string[] = [];
    const watchers = new JobWatchers();
    const a = recorder('a', heard);
    watchers.attach(7, a);
    watchers.attach(7, a); // twice is once
    expect(watchers.count(7)).toBe(1);
    expect(watchers.report(7, COMPLETE)).toBe(1);
    expect(watchers.detach(7, recorder('other', heard))).toBe(1);
    expect(watchers.detach(7, a)).toBe(0);
    expect(watchers.any).toBe(false);
    expect(watchers.report(7, COMPLETE)).toBe(0);
    expect(heard).toEqual(['a 7 13']);
  });

  it('tells several watchers in attach order, and each once', () => {
    const heard: string[] = [];
    const watchers = new JobWatchers();
    const [a, b, c] = ['a', 'b', 'c'].map((n) => recorder(n, heard));
    watchers.attach(1, a!);
    watchers.attach(1, b!);
    watchers.attach(1, c!);
    watchers.attach(1, b!);
    expect(watchers.count(1)).toBe(3);
    expect(watchers.report(1, COMPLETE)).toBe(3);
    expect(watchers.detach(1, b!)).toBe(2);
    watchers.end(1);
    expect(heard).toEqual(['a 1 13', 'b 1 13', 'c 1 13', 'a 1 ended', 'c 1 ended']);
    expect(watchers.count(1)).toBe(0);
    expect([...watchers.ids()]).toEqual([]);
  });

  it('lets a watcher detach while a report is passed round: the others still hear it', () => {
    const heard: string[] = [];
    const watchers = new JobWatchers();
    const a = recorder('a', heard, (id) => watchers.detach(id, a));
    const b = recorder('b', heard, (id) => watchers.detach(id, b));
    watchers.attach(3, a);
    watchers.attach(3, b);
    expect(watchers.report(3, COMPLETE)).toBe(2);
    expect(heard).toEqual(['a 3 13', 'b 3 13']);
    expect(watchers.any).toBe(false);
  });

  it('tells the watchers of a job that ends, once, and keeps the other jobs', () => {
    const heard: string[] = [];
    const watchers = new JobWatchers();
    const a = recorder('a', heard);
    watchers.attach(1, a);
    watchers.attach(2, a);
    watchers.end(1);
    watchers.end(1);
    expect(heard).toEqual(['a 1 ended']);
    expect([...watchers.ids()]).toEqual([2]);
  });
});
