import { describe, expect, it } from 'vitest';
import { BodyStore, LARGE_BODY_BYTES, bodyLengthOf, bodyOffsetOf, bodyView, type BodyHolder } from './body-store.js';
import { FakeClock } from './clock.js';
import { Engine } from './engine.js';
import { jobBody } from './records.js';

function holder(): BodyHolder {
  return {} as BodyHolder;
}

describe('BodyStore', () => {
  it('keeps an exact copy, independent of the source', () => {
    const store = new BodyStore();
    const src = Buffer.from([0, 1, 2, 13, 10, 255]);
    const h = holder();
    store.place(h, src);
    src.fill(9);
    expect([...bodyView(h)]).toEqual([0, 1, 2, 13, 10, 255]);
    expect(bodyLengthOf(h)).toBe(6);
  });

  it('packs small bodies into shared slabs and gives large ones their own buffer', () => {
    const store = new BodyStore();
    const a = holder();
    const b = holder();
    const big = holder();
    const empty = holder();
    store.place(a, Buffer.from('first'));
    store.place(b, Buffer.from('second'));
    store.place(big, Buffer.alloc(LARGE_BODY_BYTES, 'x'));
    store.place(empty, Buffer.alloc(0));
    expect(a.slab).toBe(b.slab);
    expect(bodyOffsetOf(b)).toBe(5);
    expect(bodyLengthOf(b)).toBe(6);
    expect(bodyLengthOf(big)).toBe(LARGE_BODY_BYTES);
    expect(bodyLengthOf(empty)).toBe(0);
    expect(big.slab).not.toBe(a.slab);
    expect(big.slab.buf.length).toBe(LARGE_BODY_BYTES);
    expect(bodyView(empty).length).toBe(0);
    expect(store.liveBytes).toBe(11);
    store.release(a);
    store.release(big);
    store.release(empty);
    expect(store.liveBytes).toBe(6);
  });

  it('asks for compaction once dead slab bytes exceed live ones and the floor, and moves bodies out', () => {
    const store = new BodyStore();
    const all = Array.from({ length: 20_000 }, (_, i) => {
      const h = holder();
      store.place(h, Buffer.alloc(1000, i % 251));
      return h;
    });
    expect(store.needsCompaction).toBe(false);
    const survivors = all.filter((_, i) => i % 100 === 0);
    for (const [i, h] of all.entries()) if (i % 100 !== 0) store.release(h);
    expect(store.needsCompaction).toBe(true);
    for (const h of survivors) if (store.isSparse(h)) store.move(h);
    expect(store.needsCompaction).toBe(false);
    // The survivors fill two slabs, plus the slab that was current when they were kept.
    expect(store.slabBytes).toBeLessThanOrEqual(3 * 128 * 1024);
    for (const [k, h] of survivors.entries()) expect(bodyView(h).equals(Buffer.alloc(1000, (k * 100) % 251))).toBe(true);
  });
});

describe('engine body compaction', () => {
  it('moves long-lived bodies out of mostly dead slabs as puts continue, keeping every byte', () => {
    const engine = new Engine({ clock: new FakeClock() });
    const put = (fill: number): number => {
      const r = engine.put({ tube: engine.defaultTube, priority: 0, delayMs: 0, ttrMs: 60_000, body: Buffer.alloc(1000, fill) });
      if (!r.ok) throw new Error(r.code);
      return r.value.id;
    };
    const ids = Array.from({ length: 20_000 }, (_, i) => put(i % 251));
    const kept = ids.filter((_, i) => i % 100 === 0);
    for (const [i, id] of ids.entries()) if (i % 100 !== 0) expect(engine.delete(null, id).ok).toBe(true);
    const slabsBefore = new Set(kept.map((id) => engine.job(id)!.slab)).size;
    expect(slabsBefore).toBeGreaterThan(100);
    for (let i = 0; i < 100; i++) put(7);
    const slabsAfter = new Set(kept.map((id) => engine.job(id)!.slab)).size;
    expect(slabsAfter).toBeLessThanOrEqual(3);
    for (const [k, id] of kept.entries()) expect(jobBody(engine.job(id)!).equals(Buffer.alloc(1000, (k * 100) % 251))).toBe(true);
  });
});
