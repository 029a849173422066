import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClientOrder } from './client-order.js';

interface Req {
  client: number;
  n: number;
}

const order = (): ClientOrder<Req> => new ClientOrder<Req>((r) => r.client);
const any = (): boolean => true;

describe('ClientOrder', () => {
  it('takes every request of idle clients, in queue order', () => {
    const q = [
      { client: 1, n: 1 },
      { client: 2, n: 2 },
      { client: 1, n: 3 },
    ];
    expect(order().take(q, any)).toEqual({ batch: q, rest: [] });
  });

  it('holds back a busy client’s later requests until its statement is done', () => {
    const o = order();
    const first = o.take([{ client: 1, n: 1 }], any).batch;
    const next = o.take(
      [
        { client: 1, n: 2 },
        { client: 2, n: 3 },
      ],
      any,
    );
    expect(next.batch).toEqual([{ client: 2, n: 3 }]);
    expect(next.rest).toEqual([{ client: 1, n: 2 }]);
    o.done(first);
    expect(o.take(next.rest, any).batch).toEqual([{ client: 1, n: 2 }]);
  });

  it('counts a client busy in two statements until both are done', () => {
    const o = order();
    const a = o.take([{ client: 5, n: 1 }], any).batch;
    o.done([]);
    const b = o.take([{ client: 7, n: 2 }], any).batch;
    // Client 5 is still in flight in `a`.
    expect(o.take([{ client: 5, n: 3 }], any).batch).toEqual([]);
    o.done(b);
    expect(o.take([{ client: 5, n: 3 }], any).batch).toEqual([]);
    o.done(a);
    expect(o.take([{ client: 5, n: 3 }], any).batch).toEqual([{ client: 5, n: 3 }]);
  });

  it('once a client’s request does not fit, its later ones wait too (no overtaking)', () => {
    const o = order();
    const q = [
      { client: 1, n: 1 },
      { client: 2, n: 2 },
      { client: 1, n: 3 },
      { client: 3, n: 4 },
    ];
    // Room for one request per statement... then for anything.
    const taken = o.take(q, (batch, next) => batch.length === 0 || next.n === 4);
    expect(taken.batch.map((r) => r.n)).toEqual([1, 4]);
    expect(taken.rest.map((r) => r.n)).toEqual([2, 3]);
  });

  it('keeps no order for client 0 (the dashboard): its requests never wait for each other', () => {
    const o = order();
    o.take([{ client: 0, n: 1 }], any);
    expect(o.take([{ client: 0, n: 2 }], any).batch).toEqual([{ client: 0, n: 2 }]);
  });

  it('never reorders one client’s requests, whatever the statements and their ends (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }), fc.boolean()), { minLength: 1, maxLength: 40 }),
        (steps) => {
          const o = order();
          let queue: Req[] = [];
          let seq = 0;
          const inFlight: Req[][] = [];
          const ran: Req[] = [];
          for (const [client, room, finishOne] of steps) {
            queue.push({ client, n: seq++ });
            const { batch, rest } = o.take(queue, (b) => b.length < room);
            queue = rest;
            if (batch.length > 0) inFlight.push(batch);
            // A statement in flight may end before or after a later one.
            if (finishOne && inFlight.length > 0) {
              const done = inFlight.splice(inFlight.length > 1 ? 1 : 0, 1)[0]!;
              o.done(done);
              ran.push(...done);
            }
          }
          for (const done of inFlight.splice(0)) {
            o.done(done);
            ran.push(...done);
          }
          while (queue.length > 0) {
            const { batch, rest } = o.take(queue, any);
            queue = rest;
            o.done(batch);
            ran.push(...batch);
          }
          expect(ran).toHaveLength(seq);
          // Per client, the order requests were run in is the order they were queued in.
          for (let c = 1; c <= 4; c++) {
            const mine = ran.filter((r) => r.client === c).map((r) => r.n);
            expect(mine).toEqual([...mine].sort((x, y) => x - y));
          }
        },
      ),
    );
  });
});
