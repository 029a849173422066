import type { Request } from 'express';
import type { HistoryActor } from '../../shared/history.js';
import { principalOf } from './access.js';

/**
 * One frozen actor per user name: the job history ring keeps a reference per event, and a few
 * users make millions of events, so they share these rather than each event holding its own.
 */
const actors = new Map<string | null, HistoryActor>();

/**
 * Who a change made through the admin API is by, as the job's history says it: the dashboard,
 * and the signed-in user (null when the dashboard needs no token).
 */
export function actorOf(req: Request): HistoryActor {
  const user = principalOf(req)?.user ?? null;
  let actor = actors.get(user);
  if (actor === undefined) {
    actor = Object.freeze({ via: 'dashboard', user });
    // Bounded by the users file (and --admin-token): names come only from it.
    actors.set(user, actor);
  }
  return actor;
}
