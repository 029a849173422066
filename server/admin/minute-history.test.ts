/**
 * The minute history behind the long charts: rates per second over each minute and counts at its
 * end, for the server and each busy tube; kept across restarts in its directory, bounded.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../engine/clock.js';
import { Engine } from '../engine/engine.js';
import { immediateDurability } from '../engine/journal.js';
import { T0 } from '../engine/testing.js';
import { MemoryOperations } from '../operations/memory-operations.js';
import { MinuteHistory, TUBE_MINUTES } from './minute-history.js';

const log = pino({ level: 'silent' });
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(): { ops: MemoryOperations; clock: FakeClock } {
  const clock = new FakeClock(T0);
  const engine = new Engine({ clock });
  return { ops: new MemoryOperations({ engine, durability: immediateDurability, onActivity: () => undefined }), clock };
}

const job = { priority: 0, delayMs: 0, ttrMs: 60_000, body: Buffer.from('x') };

describe('MinuteHistory', () => {
  it('samples rates and counts for the server and each busy tube, and keeps them across a restart', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-minutes-'));
    dirs.push(dir);
    const { ops, clock } = setup();
    const history = new MinuteHistory(ops, dir, log);
    await history.sample(clock.now());
    for (let i = 0; i < 120; i++) ops.put('orders', job);
    ops.put('idle', job);
    clock.advance(60_000);
    await history.sample(clock.now());
    const [minute] = history.serverHistory();
    expect(minute).toMatchObject({ at: T0 + 60_000, put: 2, ready: 121, buried: 0 });
    expect(history.tubeHistory('orders')).toEqual([{ at: T0 + 60_000, ready: 120, buried: 0, in: 120, out: 0 }]);
    expect(history.tubeHistory('idle')).toEqual([{ at: T0 + 60_000, ready: 1, buried: 0, in: 1, out: 0 }]);
    expect(history.tubeHistory('none')).toEqual([]);

    const again = new MinuteHistory(setup().ops, dir, log);
    expect(again.serverHistory()).toEqual(history.serverHistory());
    expect(again.tubeHistory('orders')).toEqual(history.tubeHistory('orders'));
  });

  it('keeps 24 hours per tube, and its file stays bounded', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-minutes-'));
    dirs.push(dir);
    const { ops, clock } = setup();
    const history = new MinuteHistory(ops, dir, log);
    ops.put('t', job);
    for (let m = 0; m <= 2 * TUBE_MINUTES + 10; m++) {
      await history.sample(clock.now());
      clock.advance(60_000);
    }
    expect(history.tubeHistory('t')).toHaveLength(TUBE_MINUTES);
    const lines = readFileSync(path.join(dir, 'tubes.jsonl'), 'utf8').trim().split('\n').length;
    expect(lines).toBeLessThanOrEqual(2 * TUBE_MINUTES);
    expect(new MinuteHistory(setup().ops, dir, log).tubeHistory('t')).toHaveLength(TUBE_MINUTES);
  });

  it('lives without a directory, and skips a torn line after a crash', async () => {
    const { ops, clock } = setup();
    const history = new MinuteHistory(ops, null, log);
    await history.sample(clock.now());
    clock.advance(60_000);
    await history.sample(clock.now());
    expect(history.serverHistory()).toHaveLength(1);

    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-minutes-'));
    dirs.push(dir);
    const line = JSON.stringify(history.serverHistory()[0]);
    writeFileSync(path.join(dir, 'server.jsonl'), `${line}\n${line.slice(0, 20)}`);
    expect(new MinuteHistory(setup().ops, dir, log).serverHistory()).toEqual(history.serverHistory());
  });
});
