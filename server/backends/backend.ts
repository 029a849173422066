import type { Logger } from 'pino';
import type { AutomationStores } from '../automation/automation.js';
import type { ServerOptions } from '../cli.js';
import type { AuditLog } from '../common/audit-log.js';
import type { GearmanRegistry } from '../gearman/registry.js';
import type { ClusterNodes } from '../operations/cluster-nodes.js';
import type { Operations } from '../operations/operations.js';
import type { RunAs } from '../privileges.js';
import type { ServerInfo } from '../server-info.js';

/**
 * Where the jobs are: in this process (engines, schedulers, optionally a binlog) or in the
 * cluster's PostgreSQL. A backend gives the composition root what the front doors need and
 * knows no door; main.ts wires the doors to whichever backend the options ask for, once.
 */
export interface Backend {
  /** The beanstalkd realm's store. */
  readonly beanstalk: Operations;
  /** The Gearman realm's store and its registry; null without a Gearman port. */
  readonly gearman: { readonly ops: Operations; readonly registry: GearmanRegistry } | null;
  /** What `stats` says of this process. */
  readonly info: ServerInfo;
  /** What the dashboard says of where the jobs are. */
  readonly dashboard: {
    /** Jobs are journaled to a binlog (-b). */
    readonly binlog: boolean;
    /** Where the minute history is kept across restarts (with -b: DIR/stats-history), or null. */
    readonly historyDir: string | null;
    /** Cluster mode: the nodes view. */
    readonly cluster: ClusterNodes | null;
    /** Where changes made through the dashboard are recorded. */
    readonly audit: AuditLog;
  };
  /** Where schedules and alert rules are kept. */
  readonly automation: AutomationStores;
  /** Said in the "listening" log line (the cluster node's id), or empty. */
  readonly label: Record<string, number>;
  /** From now on, puts answer DRAINING (SIGUSR1, Gearman's `shutdown graceful`). */
  setDraining(): void;
  /** Jobs this process's clients hold (a graceful shutdown waits until none). */
  heldJobs(): number;
  /**
   * Shutdown, before the doors close: timers stop, and everything journaled is written and
   * fsynced (which releases replies held for it). Failures are logged, never thrown.
   */
  stop(): void;
  /** Shutdown, after the doors closed (their clients' jobs given back): leave for good. */
  close(): Promise<void>;
}

/** What opening a backend needs besides the options. */
export interface BackendContext {
  options: ServerOptions;
  log: Logger;
  /** -u USER: files are made as USER (the process gives up root once the doors listen). */
  user: RunAs | null;
}

/** A backend that cannot start: one line that says what to fix, and the exit status to use. */
export class StartupError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
