import type { AlertStore } from './alert-store.js';
import { EVENTS_KEPT, type ActiveAlert, type AlertDelivery, type AlertEvent, type AlertRule, type AlertRuleFields } from './rule.js';

/** What a single server saves of its alerts (alert-file.ts): the rules; state and history start afresh. */
export interface AlertRulesState {
  nextId: number;
  rules: AlertRule[];
}

interface TubeState {
  active: boolean;
  /** When the last notification went (epoch ms; -Infinity: never). */
  notifiedAt: number;
  /** Whether the current (or last) start was announced. */
  notified: boolean;
}

/** A single server's alerts, in memory; `save` is called with the rules after every change to them. */
export class MemoryAlertStore implements AlertStore {
  private nextId: number;
  private nextEventId = 1;
  private readonly byId = new Map<number, AlertRule>();
  private readonly states = new Map<string, TubeState & ActiveAlert>();
  private readonly history: AlertEvent[] = [];

  constructor(
    initial: AlertRulesState | null = null,
    private readonly save: (state: AlertRulesState) => void = () => undefined,
  ) {
    this.nextId = initial?.nextId ?? 1;
    for (const r of initial?.rules ?? []) this.byId.set(r.id, r);
  }

  list(): AlertRule[] {
    return [...this.byId.values()].map((r) => ({ ...r }));
  }

  get(id: number): AlertRule | undefined {
    const r = this.byId.get(id);
    return r === undefined ? undefined : { ...r };
  }

  create(fields: AlertRuleFields, now: number): AlertRule {
    const rule: AlertRule = { ...fields, id: this.nextId++, createdAt: now };
    this.byId.set(rule.id, rule);
    this.persist();
    return { ...rule };
  }

  update(id: number, fields: AlertRuleFields): AlertRule | undefined {
    const old = this.byId.get(id);
    if (old === undefined) return undefined;
    const rule: AlertRule = { ...old, ...fields };
    this.byId.set(id, rule);
    this.forgetStates(id);
    this.persist();
    return { ...rule };
  }

  remove(id: number): boolean {
    const had = this.byId.delete(id);
    this.forgetStates(id);
    if (had) this.persist();
    return had;
  }

  active(): ActiveAlert[] {
    return [...this.states.values()].filter((s) => s.active).map(({ ruleId, tube }) => ({ ruleId, tube }));
  }

  claimStart(ruleId: number, tube: string, now: number, minIntervalMs: number): { notify: boolean } | null {
    if (!this.byId.has(ruleId)) return null;
    const key = `${ruleId}\0${tube}`;
    const state = this.states.get(key) ?? { ruleId, tube, active: false, notifiedAt: -Infinity, notified: false };
    if (state.active) return null;
    const notify = now - state.notifiedAt >= minIntervalMs;
    state.active = true;
    state.notified = notify;
    if (notify) state.notifiedAt = now;
    this.states.set(key, state);
    return { notify };
  }

  claimClear(ruleId: number, tube: string, now: number): { notify: boolean } | null {
    const state = this.states.get(`${ruleId}\0${tube}`);
    if (state === undefined || !state.active) return null;
    state.active = false;
    if (state.notified) state.notifiedAt = now;
    return { notify: state.notified };
  }

  addEvent(event: Omit<AlertEvent, 'id'>): number {
    const id = this.nextEventId++;
    this.history.unshift({ ...event, id });
    if (this.history.length > EVENTS_KEPT) this.history.length = EVENTS_KEPT;
    return id;
  }

  updateDelivery(id: number, delivery: AlertDelivery, attempts: number, lastError: string | null): void {
    const event = this.history.find((e) => e.id === id);
    if (event === undefined) return;
    event.delivery = delivery;
    event.attempts = attempts;
    event.lastError = lastError;
  }

  events(ruleId: number | null, limit: number): AlertEvent[] {
    const out: AlertEvent[] = [];
    for (const e of this.history) {
      if (out.length >= limit) break;
      if (ruleId === null || e.ruleId === ruleId) out.push({ ...e });
    }
    return out;
  }

  private forgetStates(ruleId: number): void {
    for (const [key, s] of this.states) if (s.ruleId === ruleId) this.states.delete(key);
  }

  private persist(): void {
    this.save({ nextId: this.nextId, rules: [...this.byId.values()] });
  }
}
