import type { Request } from 'express';
import type { HistoryActor } from '../../shared/history.js';

const DASHBOARD: HistoryActor = Object.freeze({ via: 'dashboard', user: null });

/**
 * Who a change made through the admin API is by, as the job's history says it. The dashboard has
 * no users yet; once it has, this is the one place that reads the signed-in user off `req`.
 */
export function actorOf(_req: Request): HistoryActor {
  return DASHBOARD;
}
