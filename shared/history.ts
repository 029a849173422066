/**
 * Job history events, as the engine records them and the API and dashboard show them. The index
 * of a kind in HISTORY_KINDS is what the engine's ring stores, so the order is fixed.
 */
export const HISTORY_KINDS = [
  'put',
  'reserve',
  'release',
  'bury',
  'timeout',
  'disconnect',
  'kick',
  'edit',
  'move',
  'delete',
  'dead-letter',
  // Gearman's --gearman-job-retries dropped the job; the note: `<failures> disconnect|timeout`.
  'retries-exhausted',
] as const;
export type HistoryKind = (typeof HISTORY_KINDS)[number];

/**
 * Who made a change that no client connection made: the dashboard, and which of its users
 * (--admin-users, or `--admin-token`); null when the dashboard needs no token.
 */
export interface HistoryActor {
  via: 'dashboard';
  user: string | null;
}

/** One thing that happened to a job. */
export interface JobEventDto {
  /** Epoch ms. */
  at: number;
  kind: HistoryKind;
  /** The connection that did it (0: the server itself, a kick, or the dashboard). */
  connection: number;
  /** That connection's address ('' for none). */
  peer: string;
  /**
   * More about it: the fields an edit changed, the tube a move came from, `release` or `timeout`
   * for the dead-letter rule, `<failures> disconnect|timeout` for a job dropped by
   * --gearman-job-retries.
   */
  note: string;
  /** Set when the dashboard did it (connection is then 0); null for a client or the server itself. */
  actor: HistoryActor | null;
}

/** GET /api/jobs/:id/history (and a Gearman job's): its events still in the ring, oldest first. */
export interface JobHistoryDto {
  id: number;
  events: JobEventDto[];
  /** The ring's size (`--history-events`) and how many events it has taken since start. */
  capacity: number;
  recorded: number;
}
