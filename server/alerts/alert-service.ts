import type { AlertWebhookPayload } from '../../shared/dto.js';
import type { Pending, TubeAges, TubeCounts } from '../operations/operations.js';
import type { AlertStore } from './alert-store.js';
import { ReadyLows, conditionHolds } from './conditions.js';
import type { ActiveAlert, AlertEvent, AlertRule, AlertRuleFields } from './rule.js';
import { tubeMatcher } from '../common/tube-glob.js';
import type { WebhookSender } from './webhook-sender.js';

/** What the alerts read of the jobs at each tick. */
export interface AlertFacts {
  /** Every tube's counts as of now (not a cached moment-old copy: see tick). */
  tubes(): Pending<TubeCounts[]>;
  /** Per tube, when its oldest ready job was put (only asked when a rule needs it: it may walk every job). */
  readyAges(): Promise<Map<string, TubeAges>>;
}

export interface AlertServiceOptions {
  store: AlertStore;
  facts: AlertFacts;
  sender: WebhookSender;
  /** This node's id in a cluster (0 on a single server). */
  node: number;
  /** Named in each notification (host name). */
  server: string;
}

/** What /metrics says of the alerts. */
export interface AlertStates {
  rules: { id: number; name: string; enabled: boolean }[];
  active: { ruleId: number; rule: string; tube: string }[];
  /** Notifications this node sent, by outcome. */
  deliveries: Record<'delivered' | 'failed' | 'dropped' | 'suppressed', number>;
}

/**
 * Alert rules: at each `tick(now)` every enabled rule is checked against every tube its glob
 * matches; a condition that has held for the rule's `for` starts the alert, one that no longer
 * holds clears it. Each start and clear is claimed in the store (one node of a cluster wins it)
 * before its webhook is queued.
 */
export class AlertService {
  private readonly store: AlertStore;
  private readonly facts: AlertFacts;
  private readonly sender: WebhookSender;
  private readonly lows = new ReadyLows();
  /** Since when each (rule, tube) condition has held, as this node saw it. */
  private readonly since = new Map<string, number>();
  private readonly deliveries: AlertStates['deliveries'] = { delivered: 0, failed: 0, dropped: 0, suppressed: 0 };

  constructor(private readonly options: AlertServiceOptions) {
    this.store = options.store;
    this.facts = options.facts;
    this.sender = options.sender;
  }

  rules(): Pending<AlertRule[]> {
    return this.store.list();
  }

  rule(id: number): Pending<AlertRule | undefined> {
    return this.store.get(id);
  }

  create(fields: AlertRuleFields, now: number): Pending<AlertRule> {
    return this.store.create(fields, now);
  }

  update(id: number, fields: AlertRuleFields): Pending<AlertRule | undefined> {
    this.forgetSince(id);
    return this.store.update(id, fields);
  }

  remove(id: number): Pending<boolean> {
    this.forgetSince(id);
    return this.store.remove(id);
  }

  active(): Pending<ActiveAlert[]> {
    return this.store.active();
  }

  events(ruleId: number | null, limit: number): Pending<AlertEvent[]> {
    return this.store.events(ruleId, limit);
  }

  /** Called by the sender after each attempt. */
  readonly deliveryUpdated = (eventId: number, delivery: AlertEvent['delivery'], attempts: number, lastError: string | null): void => {
    if (delivery === 'delivered' || delivery === 'failed') this.deliveries[delivery]++;
    void Promise.resolve(this.store.updateDelivery(eventId, delivery, attempts, lastError)).catch(() => undefined);
  };

  async states(): Promise<AlertStates> {
    const rules = await this.store.list();
    const names = new Map(rules.map((r) => [r.id, r.name]));
    const active = (await this.store.active()).flatMap((a) => {
      const rule = names.get(a.ruleId);
      return rule === undefined ? [] : [{ ruleId: a.ruleId, rule, tube: a.tube }];
    });
    return { rules: rules.map((r) => ({ id: r.id, name: r.name, enabled: r.enabled })), active, deliveries: { ...this.deliveries } };
  }

  async tick(now: number): Promise<void> {
    const rules = (await this.store.list()).filter((r) => r.enabled);
    // No rule, no reading of every tube's counts (in a cluster, a query per tick).
    if (rules.length === 0) return;
    // The states before the counts: a node then only clears (or starts) what another node
    // claimed on counts at least as new as its own, so two nodes never undo each other's claim
    // on counts read a moment apart.
    const active = new Set((await this.store.active()).map((a) => `${a.ruleId}\0${a.tube}`));
    const tubes = await this.facts.tubes();
    this.lows.update(tubes);
    const ages = rules.some((r) => r.condition === 'oldest-ready') ? await this.facts.readyAges() : null;
    for (const rule of rules) {
      const matches = tubeMatcher(rule.tubes);
      const seen = new Set<string>();
      for (const counts of tubes) {
        if (!matches(counts.name)) continue;
        const key = `${rule.id}\0${counts.name}`;
        seen.add(key);
        const facts = { counts, oldestReadyCreatedAt: ages?.get(counts.name)?.oldestReadyCreatedAt ?? Infinity, readyLow: this.lows.low(counts.name) };
        const { holds, value } = conditionHolds(rule, facts, now);
        let since = this.since.get(key);
        if (!holds) this.since.delete(key);
        else if (since === undefined) this.since.set(key, (since = now));
        const firing = holds && now - since! >= rule.forMs;
        if (firing && !active.has(key)) await this.start(rule, counts.name, value, now);
        if (!firing && active.has(key) && !holds) await this.clear(rule, counts.name, value, now);
      }
      // A tube that is gone has nothing wrong with it any more.
      for (const key of active) {
        if (!key.startsWith(`${rule.id}\0`) || seen.has(key)) continue;
        this.since.delete(key);
        await this.clear(rule, key.slice(key.indexOf('\0') + 1), 0, now);
      }
    }
  }

  stop(): void {
    this.sender.stop();
  }

  private async start(rule: AlertRule, tube: string, value: number, now: number): Promise<void> {
    const claim = await this.store.claimStart(rule.id, tube, now, rule.minIntervalMs);
    if (claim !== null) await this.announce(rule, tube, 'fired', value, now, claim.notify);
  }

  private async clear(rule: AlertRule, tube: string, value: number, now: number): Promise<void> {
    const claim = await this.store.claimClear(rule.id, tube, now);
    if (claim !== null) await this.announce(rule, tube, 'cleared', value, now, claim.notify);
  }

  private async announce(rule: AlertRule, tube: string, kind: 'fired' | 'cleared', value: number, now: number, notify: boolean): Promise<void> {
    const event: Omit<AlertEvent, 'id'> = {
      ruleId: rule.id,
      ruleName: rule.name,
      tube,
      kind,
      at: now,
      value,
      delivery: notify ? 'pending' : 'suppressed',
      attempts: 0,
      lastError: null,
      node: this.options.node,
    };
    const id = await this.store.addEvent(event);
    if (!notify) {
      this.deliveries.suppressed++;
      return;
    }
    const payload = webhookPayload(rule, tube, kind, value, now, this.options.server);
    const body = rule.format === 'slack' ? { text: payload.message } : payload;
    if (!this.sender.send(id, rule.webhookUrl, body)) {
      this.deliveries.dropped++;
      await this.store.updateDelivery(id, 'dropped', 0, 'too many webhook deliveries waiting');
    }
  }

  private forgetSince(ruleId: number): void {
    for (const key of this.since.keys()) if (key.startsWith(`${ruleId}\0`)) this.since.delete(key);
  }
}

const CONDITION_WORDS: Record<AlertRule['condition'], (rule: AlertRule, value: number) => string> = {
  buried: (r, v) => `${v} buried (more than ${r.threshold})`,
  'oldest-ready': (r, v) => `oldest ready job ${v} s old (over ${r.threshold} s)`,
  unwatched: (_r, v) => `${v} ready and no worker watching`,
  'backlog-rising': (_r, v) => `backlog up ${v} ready jobs and not coming down`,
  'cap-saturated': (_r, v) => `concurrency cap full: ${v} jobs reserved`,
};

/** The JSON a rule posts; `message` is also the Slack text. */
export function webhookPayload(rule: AlertRule, tube: string, kind: 'fired' | 'cleared', value: number, now: number, server: string): AlertWebhookPayload {
  const what = kind === 'fired' ? CONDITION_WORDS[rule.condition](rule, value) : 'cleared';
  return {
    event: kind,
    rule: { id: rule.id, name: rule.name, condition: rule.condition, threshold: rule.threshold, forSeconds: rule.forMs / 1000 },
    tube,
    value,
    at: new Date(now).toISOString(),
    message: `[beanpole ${server}] ${rule.name}: tube ${tube}: ${what}`,
    server,
  };
}
