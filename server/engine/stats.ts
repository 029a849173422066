/** Commands counted by `stats` (in beanstalkd's output order), plus those counted but never shown. */
export const COUNTED_COMMANDS = [
  'put',
  'peek',
  'peek-ready',
  'peek-delayed',
  'peek-buried',
  'reserve',
  'reserve-with-timeout',
  'delete',
  'release',
  'use',
  'watch',
  'ignore',
  'bury',
  'kick',
  'touch',
  'stats',
  'stats-job',
  'stats-tube',
  'list-tubes',
  'list-tube-used',
  'list-tubes-watched',
  'pause-tube',
  'reserve-job',
  'kick-job',
] as const;

export type CountedCommand = (typeof COUNTED_COMMANDS)[number];

/** Cumulative and current counters behind `stats`. */
export class ServerStats {
  readonly commands: Record<CountedCommand, number>;
  jobTimeouts = 0;
  totalJobs = 0;
  urgent = 0;
  reserved = 0;
  buried = 0;
  delayed = 0;
  ready = 0;
  currentConnections = 0;
  totalConnections = 0;
  producers = 0;
  workers = 0;
  waiting = 0;

  constructor() {
    const commands = {} as Record<CountedCommand, number>;
    for (const name of COUNTED_COMMANDS) commands[name] = 0;
    this.commands = commands;
  }
}
