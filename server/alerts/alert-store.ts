import type { Pending } from '../operations/operations.js';
import type { ActiveAlert, AlertDelivery, AlertEvent, AlertRule, AlertRuleFields } from './rule.js';

/**
 * Where alert rules, their state per tube and their history are kept: in memory (rules saved to a
 * file with -b), or in PostgreSQL in cluster mode, where the claims make one node announce each
 * start and each clear.
 */
export interface AlertStore {
  /** Every rule, by id. */
  list(): Pending<AlertRule[]>;
  /** Rule `id`, or undefined. */
  get(id: number): Pending<AlertRule | undefined>;
  create(fields: AlertRuleFields, now: number): Pending<AlertRule>;
  /** Replaces the fields; a rule disabled or changed forgets its tubes' states (no clear is sent). */
  update(id: number, fields: AlertRuleFields): Pending<AlertRule | undefined>;
  remove(id: number): Pending<boolean>;
  /** Every (rule, tube) firing now, on any node. */
  active(): Pending<ActiveAlert[]>;
  /**
   * Claims the start of `ruleId` on `tube`: null when it was already firing (another node claimed
   * it), else whether to notify (false within `minIntervalMs` of the last notification).
   */
  claimStart(ruleId: number, tube: string, now: number, minIntervalMs: number): Pending<{ notify: boolean } | null>;
  /** Claims the clear: null when it was not firing; notify when its start was announced. */
  claimClear(ruleId: number, tube: string, now: number): Pending<{ notify: boolean } | null>;
  /** Adds an event to the history; answers its id. */
  addEvent(event: Omit<AlertEvent, 'id'>): Pending<number>;
  updateDelivery(id: number, delivery: AlertDelivery, attempts: number, lastError: string | null): Pending<void>;
  /** The newest events first, of one rule or of all (at most `limit`). */
  events(ruleId: number | null, limit: number): Pending<AlertEvent[]>;
}
