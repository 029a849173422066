import type { AlertStore } from '../alerts/alert-store.js';
import { EVENTS_KEPT, type ActiveAlert, type AlertDelivery, type AlertEvent, type AlertRule, type AlertRuleFields } from '../alerts/rule.js';
import type pg from 'pg';
import { AutomationTableStore } from './automation-tables.js';

interface RuleRow {
  id: number;
  name: string;
  condition: AlertRule['condition'];
  threshold: number;
  for_ms: number;
  tubes: string;
  webhook_url: string;
  format: AlertRule['format'];
  min_interval_ms: number;
  enabled: boolean;
  created_at: number;
}

interface EventRow {
  id: number;
  rule_id: number;
  rule_name: string;
  tube: string;
  kind: AlertEvent['kind'];
  at: number;
  value: number;
  delivery: AlertDelivery;
  attempts: number;
  last_error: string | null;
  node: number;
}

const ruleOf = (r: RuleRow): AlertRule => ({
  id: r.id,
  name: r.name,
  condition: r.condition,
  threshold: r.threshold,
  forMs: r.for_ms,
  tubes: r.tubes,
  webhookUrl: r.webhook_url,
  format: r.format,
  minIntervalMs: r.min_interval_ms,
  enabled: r.enabled,
  createdAt: r.created_at,
});

const fieldValues = (f: AlertRuleFields): unknown[] => [f.name, f.condition, f.threshold, f.forMs, f.tubes, f.webhookUrl, f.format, f.minIntervalMs, f.enabled];

/** Alert rules shared by every node of a cluster; flipping a state row is the claim of a start or a clear. */
export class AlertTableStore extends AutomationTableStore<RuleRow, AlertRule> implements AlertStore {
  constructor(pool: pg.Pool, ready: Promise<void>) {
    super(pool, ready, 'beanpole_alert_rules', ruleOf);
  }

  async create(fields: AlertRuleFields, now: number): Promise<AlertRule> {
    const { rows } = await this.query<RuleRow>(
      `INSERT INTO beanpole_alert_rules (name, condition, threshold, for_ms, tubes, webhook_url, format, min_interval_ms, enabled, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
      [...fieldValues(fields), now],
    );
    return ruleOf(rows[0]!);
  }

  async update(id: number, fields: AlertRuleFields): Promise<AlertRule | undefined> {
    const { rows } = await this.query<RuleRow>(
      `UPDATE beanpole_alert_rules SET name = $1, condition = $2, threshold = $3, for_ms = $4, tubes = $5, webhook_url = $6, format = $7,
         min_interval_ms = $8, enabled = $9 WHERE id = $10 RETURNING *`,
      [...fieldValues(fields), id],
    );
    if (rows[0] === undefined) return undefined;
    await this.query('DELETE FROM beanpole_alert_states WHERE rule_id = $1', [id]);
    return ruleOf(rows[0]);
  }

  async remove(id: number): Promise<boolean> {
    const r = await this.query('DELETE FROM beanpole_alert_rules WHERE id = $1', [id]);
    return (r.rowCount ?? 0) > 0;
  }

  async active(): Promise<ActiveAlert[]> {
    const { rows } = await this.query<{ rule_id: number; tube: string }>('SELECT rule_id, tube FROM beanpole_alert_states WHERE active');
    return rows.map((r) => ({ ruleId: r.rule_id, tube: r.tube }));
  }

  async claimStart(ruleId: number, tube: string, now: number, minIntervalMs: number): Promise<{ notify: boolean } | null> {
    // Inserted, or flipped from inactive: this node won the start. Already active: another did.
    const { rows } = await this.query<{ notified: boolean }>(
      `INSERT INTO beanpole_alert_states AS s (rule_id, tube, active, notified, notified_at, changed_at)
       SELECT $1, $2, true, true, $3, $3 WHERE EXISTS (SELECT 1 FROM beanpole_alert_rules WHERE id = $1)
       ON CONFLICT (rule_id, tube) DO UPDATE SET active = true, changed_at = $3,
         notified = (s.notified_at IS NULL OR s.notified_at <= $3 - $4),
         notified_at = CASE WHEN s.notified_at IS NULL OR s.notified_at <= $3 - $4 THEN $3 ELSE s.notified_at END
       WHERE NOT s.active
       RETURNING notified`,
      [ruleId, tube, now, minIntervalMs],
    );
    return rows[0] === undefined ? null : { notify: rows[0].notified };
  }

  async claimClear(ruleId: number, tube: string, now: number): Promise<{ notify: boolean } | null> {
    const { rows } = await this.query<{ notified: boolean }>(
      `UPDATE beanpole_alert_states SET active = false, changed_at = $3,
         notified_at = CASE WHEN notified THEN $3 ELSE notified_at END
       WHERE rule_id = $1 AND tube = $2 AND active RETURNING notified`,
      [ruleId, tube, now],
    );
    return rows[0] === undefined ? null : { notify: rows[0].notified };
  }

  async addEvent(e: Omit<AlertEvent, 'id'>): Promise<number> {
    const { rows } = await this.query<{ id: number }>(
      `INSERT INTO beanpole_alert_events (rule_id, rule_name, tube, kind, at, value, delivery, attempts, last_error, node)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
      [e.ruleId, e.ruleName, e.tube, e.kind, e.at, e.value, e.delivery, e.attempts, e.lastError, e.node],
    );
    const id = rows[0]!.id;
    if (id % 100 === 0) await this.query('DELETE FROM beanpole_alert_events WHERE id <= $1', [id - EVENTS_KEPT]);
    return id;
  }

  async updateDelivery(id: number, delivery: AlertDelivery, attempts: number, lastError: string | null): Promise<void> {
    await this.query('UPDATE beanpole_alert_events SET delivery = $2, attempts = $3, last_error = $4 WHERE id = $1', [id, delivery, attempts, lastError]);
  }

  async events(ruleId: number | null, limit: number): Promise<AlertEvent[]> {
    const { rows } = await this.query<EventRow>(
      'SELECT * FROM beanpole_alert_events WHERE $1::integer IS NULL OR rule_id = $1 ORDER BY id DESC LIMIT $2',
      [ruleId, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      ruleId: r.rule_id,
      ruleName: r.rule_name,
      tube: r.tube,
      kind: r.kind,
      at: r.at,
      value: r.value,
      delivery: r.delivery,
      attempts: r.attempts,
      lastError: r.last_error,
      node: r.node,
    }));
  }
}
