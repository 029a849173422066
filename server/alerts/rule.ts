/** Alert rules and their history as the alerts' store and service keep them: durations in ms. */
import type { AlertCondition, AlertEventDto } from '../../shared/dto.js';

export type { AlertCondition };

export interface AlertRuleFields {
  name: string;
  condition: AlertCondition;
  /** In the condition's own unit, as on the wire: buried: jobs; oldest-ready: seconds; backlog-rising: jobs above the low; unwatched: unused. */
  threshold: number;
  forMs: number;
  /** Tube name or glob (`*`, `?`). */
  tubes: string;
  webhookUrl: string;
  format: 'json' | 'slack';
  minIntervalMs: number;
  enabled: boolean;
}

export interface AlertRule extends AlertRuleFields {
  id: number;
  createdAt: number;
}

export type AlertDelivery = AlertEventDto['delivery'];

/** One entry of a rule's history: it carries no duration, so the store keeps the wire's shape. */
export type AlertEvent = AlertEventDto;

/** A rule firing for a tube now. */
export interface ActiveAlert {
  ruleId: number;
  tube: string;
}

/** Events kept (the newest; a single server in memory, a cluster in its table). */
export const EVENTS_KEPT = 500;
