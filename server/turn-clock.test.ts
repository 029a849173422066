import { describe, expect, it } from 'vitest';
import { FakeClock } from './engine/clock.js';
import { TurnClock } from './turn-clock.js';

describe('TurnClock', () => {
  it('keeps its first reading for the rest of the turn, then reads again', async () => {
    const source = new FakeClock(1000);
    let reads = 0;
    const clock = new TurnClock({ now: () => (reads++, source.now()) });
    expect(clock.now()).toBe(1000);
    source.advance(5);
    expect(clock.now()).toBe(1000);
    expect(reads).toBe(1);
    await Promise.resolve(); // the turn's microtasks have run
    expect(clock.now()).toBe(1005);
    expect(reads).toBe(2);
  });

  it('never goes back: a later turn reads a later time', async () => {
    const source = new FakeClock(1000);
    const clock = new TurnClock(source);
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      seen.push(clock.now());
      source.advance(1);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    expect(seen).toEqual([1000, 1001, 1002, 1003, 1004]);
  });
});
