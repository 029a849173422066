/**
 * Schedules and alert rules, wired to the operations and driven by timers of their own (the
 * engine's scheduler.ts stays the engine's only timer). Built by the composition root, the same
 * way for a single server (in memory, saved in -b DIR) and for a cluster node (PostgreSQL); the
 * dashboard's routes only read and change them through the services.
 */
import { afterChange } from '../operations/after-change.js';
import os from 'node:os';
import type { Logger } from 'pino';
import { AlertService } from '../alerts/alert-service.js';
import type { AlertStore } from '../alerts/alert-store.js';
import { loadAlertRules, saveAlertRules } from '../alerts/alert-file.js';
import { MemoryAlertStore } from '../alerts/memory-alert-store.js';
import { WebhookSender } from '../alerts/webhook-sender.js';
import type { Operations, Result } from '../operations/operations.js';
import { MemoryScheduleStore } from '../schedules/memory-schedule-store.js';
import { loadSchedules, saveSchedules } from '../schedules/schedule-file.js';
import { ScheduleService, type PutJob } from '../schedules/schedule-service.js';
import type { ScheduleStore } from '../schedules/schedule-store.js';
import { realTimer, type Timer } from '../common/timer.js';

/** Default evaluation periods: slots are whole seconds at best; alert conditions move slowly. */
export const SCHEDULE_TICK_MS = 1000;
export const ALERT_TICK_MS = 5000;

/** Where schedules and alert rules are kept: the backend's choice (memory and -b DIR, or PostgreSQL). */
export interface AutomationStores {
  schedules: ScheduleStore;
  alerts: AlertStore;
  /** This node's id in a cluster (who claimed a slot, who fired an alert); 0 on a single server. */
  node: number;
}

export interface AutomationOptions {
  ops: Operations;
  log: Logger;
  stores: AutomationStores;
  /** --automation-tick (ms); null: the defaults above. */
  tickMs: number | null;
  timer?: Timer;
}

/**
 * A single server's stores: in memory, and with -b saved as DIR/schedules.json and
 * DIR/alerts.json. Throws when a saved file is damaged.
 */
export function localAutomationStores(dir: string | null, log: Logger): AutomationStores {
  const saving = <T>(what: string, save: (dir: string, state: T) => void) => (state: T) => {
    if (dir === null) return;
    try {
      save(dir, state);
    } catch (err) {
      log.error({ err: (err as Error).message }, `${what}: saving failed; the change holds until a restart`);
    }
  };
  return {
    schedules: new MemoryScheduleStore(dir === null ? null : loadSchedules(dir), saving('schedules', saveSchedules)),
    alerts: new MemoryAlertStore(dir === null ? null : loadAlertRules(dir), saving('alerts', saveAlertRules)),
    node: 0,
  };
}

export interface Automation {
  /** The store's clock in whole ms (slots, claims and rows keep whole ms). */
  now(): number;
  schedules: ScheduleService;
  alerts: AlertService;
  stop(): void;
}

/** Builds the services over the backend's stores and starts their timers. */
export function startAutomation(options: AutomationOptions): Automation {
  const { ops, log, stores } = options;
  const now = (): number => Math.floor(ops.now());
  const timer = options.timer ?? realTimer;
  const { node } = stores;
  // The same operation as the admin API's put: size limit, TTR floor and draining apply once;
  // answered once the job is durable, as the API's changes are.
  const put: PutJob = async (tube, job) => {
    const r = await ops.put(tube, job);
    if (!r.ok) return r;
    await afterChange(ops);
    return { ok: true, value: { id: r.value.id } } satisfies Result<{ id: number }>;
  };
  const schedules = new ScheduleService({ store: stores.schedules, put, node });
  let alerts: AlertService | null = null;
  const sender = new WebhookSender({ timer, onUpdate: (...args) => alerts?.deliveryUpdated(...args) });
  alerts = new AlertService({
    store: stores.alerts,
    sender,
    node,
    server: os.hostname(),
    facts: { tubes: () => ops.tubes(true), readyAges: () => ops.readyAges(0.2) },
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
