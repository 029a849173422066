import type { StoreActivity } from './operations.js';

/**
 * What a change made off the protocol ports (the dashboard's API, a schedule's put) waits for
 * before it is answered: the store re-arms its timers for the change's deadlines, and every
 * record appended so far is durable (at once without a binlog).
 */
export function afterChange(ops: StoreActivity): Promise<void> {
  ops.onActivity();
  const { durability } = ops;
  return new Promise((resolve) => durability.whenDurable(durability.appendedSeq, resolve));
}
