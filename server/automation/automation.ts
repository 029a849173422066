/**
 * Schedules and alert rules, wired to the operations and driven by timers of their own (the
 * engine's scheduler.ts stays the engine's only timer). Built by the composition root, the same
 * way for a single server (in memory, saved in -b DIR) and for a cluster node (PostgreSQL); the
 * dashboard's routes only read and change them through the services.
 */
import os from 'node:os';
import type pg from 'pg';
import type { Logger } from 'pino';
import { AlertService } from '../alerts/alert-service.js';
import type { AlertStore } from '../alerts/alert-store.js';
import { loadAlertRules, saveAlertRules } from '../alerts/alert-file.js';
import { MemoryAlertStore } from '../alerts/memory-alert-store.js';
import { WebhookSender } from '../alerts/webhook-sender.js';
import { AlertTableStore } from '../cluster/alert-table-store.js';
import { createAutomationTables } from '../cluster/automation-tables.js';
import { ScheduleTableStore } from '../cluster/schedule-table-store.js';
import type { Operations, Result } from '../operations/operations.js';
import { readyAges } from '../operations/ready-ages.js';
import { MemoryScheduleStore } from '../schedules/memory-schedule-store.js';
import { loadSchedules, saveSchedules } from '../schedules/schedule-file.js';
import { ScheduleService, type PutJob } from '../schedules/schedule-service.js';
import type { ScheduleStore } from '../schedules/schedule-store.js';
import { realTimer, type Timer } from './timer.js';

/** Default evaluation periods: slots are whole seconds at best; alert conditions move slowly. */
export const SCHEDULE_TICK_MS = 1000;
export const ALERT_TICK_MS = 5000;

export interface AutomationOptions {
  ops: Operations;
  log: Logger;
  /** Called after a schedule's put, as the admin API does, so the engine's scheduler re-arms. */
  onActivity: () => void;
  /** -b DIR: schedules.json and alerts.json are kept there; null: in memory only. */
  dir: string | null;
  /** Cluster mode: the node's pool and id; schedules and rules are in PostgreSQL. */
  cluster: { pool: pg.Pool; node: number } | null;
  /** --automation-tick (ms); null: the defaults above. */
  tickMs: number | null;
  timer?: Timer;
}

export interface Automation {
  /** The store's clock in whole ms (slots, claims and rows keep whole ms). */
  now(): number;
  schedules: ScheduleService;
  alerts: AlertService;
  stop(): void;
}

/** Builds the stores and services and starts their timers. Throws when a saved file is damaged. */
export async function startAutomation(options: AutomationOptions): Promise<Automation> {
  const { ops, log, dir, cluster } = options;
  const now = (): number => Math.floor(ops.now());
  const timer = options.timer ?? realTimer;
  let scheduleStore: ScheduleStore;
  let alertStore: AlertStore;
  if (cluster !== null) {
    // Not awaited: a node starts serving jobs without waiting for these tables; the stores'
    // statements wait for them, and a failure is said by each evaluation until it is fixed.
    const tables = createAutomationTables(cluster.pool);
    tables.catch((err: Error) => log.error({ err: err.message }, 'schedules and alerts: cannot create their tables'));
    scheduleStore = new ScheduleTableStore(cluster.pool, tables);
    alertStore = new AlertTableStore(cluster.pool, tables);
  } else {
    const saving = <T>(what: string, save: (dir: string, state: T) => void) => (state: T) => {
      if (dir === null) return;
      try {
        save(dir, state);
      } catch (err) {
        log.error({ err: (err as Error).message }, `${what}: saving failed; the change holds until a restart`);
      }
    };
    scheduleStore = new MemoryScheduleStore(dir === null ? null : loadSchedules(dir), saving('schedules', saveSchedules));
    alertStore = new MemoryAlertStore(dir === null ? null : loadAlertRules(dir), saving('alerts', saveAlertRules));
  }
  const node = cluster?.node ?? 0;
  // The same operation as the admin API's put: size limit, TTR floor and draining apply once;
  // answered once the job is durable, as the API's changes are.
  const put: PutJob = async (tube, job) => {
    const r = await ops.put(tube, job);
    if (!r.ok) return r;
    options.onActivity();
    const { durability } = ops;
    await new Promise<void>((resolve) => durability.whenDurable(durability.appendedSeq, resolve));
    return { ok: true, value: { id: r.value.id } } satisfies Result<{ id: number }>;
  };
  const schedules = new ScheduleService({ store: scheduleStore, put, node });
  let alerts: AlertService | null = null;
  const sender = new WebhookSender({ timer, onUpdate: (...args) => alerts?.deliveryUpdated(...args) });
  alerts = new AlertService({
    store: alertStore,
    sender,
    node,
    server: os.hostname(),
    facts: { tubes: () => ops.tubes(true), readyAges: () => readyAges(ops, 0.2) },
  });
  const stops = [
    every(timer, options.tickMs ?? SCHEDULE_TICK_MS, now, () => schedules.tick(now()), (err) => log.warn({ err: err.message }, 'schedules: evaluation failed')),
    every(timer, options.tickMs ?? ALERT_TICK_MS, now, () => alerts.tick(now()), (err) => log.warn({ err: err.message }, 'alerts: evaluation failed')),
  ];
  return {
    now,
    schedules,
    alerts,
    stop: () => {
      for (const stop of stops) stop();
      alerts.stop();
    },
  };
}

/**
 * Runs `work` every `periodMs`, on the period's boundaries (a cron slot on the second is seen a
 * few ms after it), never two at once; a failure is reported and the next period tries again.
 */
function every(timer: Timer, periodMs: number, now: () => number, work: () => Promise<void>, failed: (err: Error) => void): () => void {
  let stopped = false;
  let cancel: () => void = () => undefined;
  const arm = (): void => {
    if (stopped) return;
    const wait = periodMs - (now() % periodMs) + 5;
    cancel = timer.after(wait, () => {
      work()
        .catch((err: unknown) => failed(err as Error))
        .finally(arm);
    });
  };
  arm();
  return () => {
    stopped = true;
    cancel();
  };
}
