import type { JobEventDto } from '../../shared/history.js';

/**
 * Why a buried job is buried, in one sentence from its last events: who buried it (a worker's
 * bury), or which release or timeout made the dead-letter rule bury it, by which connection and
 * from which address. Null when the job is not buried or its burying fell out of the history ring.
 */
export function buryStory(events: readonly JobEventDto[], strikes: number, formatTime: (at: number) => string): string | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'kick' || e.kind === 'put' || e.kind === 'reserve') return null;
    if (e.kind === 'bury') return `Buried at ${formatTime(e.at)} by its worker, ${who(e)}.`;
    if (e.kind !== 'dead-letter') continue;
    // The rule fires on the release or timeout recorded just before it.
    let cause: JobEventDto | undefined;
    for (let j = i - 1; j >= 0 && cause === undefined; j--) if (events[j]!.kind === 'release' || events[j]!.kind === 'timeout') cause = events[j];
    const rule = `the dead-letter rule buried it after ${strikes} releases and timeouts since it was put or last kicked`;
    if (cause === undefined) return `Buried at ${formatTime(e.at)}: ${rule}.`;
    const act = cause.kind === 'release' ? `released by ${who(cause)}` : `held past its TTR by ${who(cause)}`;
    return `Buried at ${formatTime(e.at)}: ${act}, ${rule}.`;
  }
  return null;
}

/** "connection 12 (10.0.0.5:41234)", or what did it when no client did. */
function who(e: JobEventDto): string {
  if (e.connection === 0) return e.actor !== null ? 'the dashboard' : 'the server';
  return e.peer === '' ? `connection ${e.connection}` : `connection ${e.connection} (${e.peer})`;
}
