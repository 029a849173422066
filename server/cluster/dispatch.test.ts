import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ReserveDispatch, type WaitingClient } from './dispatch.js';

/** A waiting client that records when it was offered a job. */
function client(name: string, arrival: number, offered: string[]): WaitingClient {
  return {
    arrival,
    watchedTubes: () => ['t'],
    offer: async () => {
      offered.push(name);
      return true;
    },
  };
}

describe('ReserveDispatch', () => {
  it('offers jobs to the waiters in the order their reserves came, whichever began waiting first', async () => {
    const offered: string[] = [];
    const dispatch = new ReserveDispatch<WaitingClient>(pino({ level: 'silent' }));
    // b's reserve came before c's, but c's first statement came back first.
    dispatch.add(client('a', 1, offered));
    dispatch.add(client('c', 3, offered));
    dispatch.add(client('b', 2, offered));
    dispatch.add(client('d', 4, offered));
    dispatch.wake(null);
    await new Promise((resolve) => setImmediate(resolve));
    expect(offered).toEqual(['a', 'b', 'c', 'd']);
  });
});
