/** The alerts page's data: the rules (with the tubes they fire for) and their history. */

import type { AlertRuleRequest } from '../../../shared/api.js';
import type { AlertEventDto, AlertRuleDto } from '../../../shared/dto.js';
import { api, describeError, isAbort } from '../api.js';
import { notices } from './notices.svelte.js';

export class AlertsView {
  rules = $state.raw<AlertRuleDto[] | null>(null);
  history = $state.raw<AlertEventDto[]>([]);
  error = $state<string | null>(null);

  readonly load = async (signal?: AbortSignal): Promise<void> => {
    try {
      const [rules, history] = await Promise.all([api.alertRules(signal), api.alertHistory(signal)]);
      this.rules = rules;
      this.history = history;
      this.error = null;
    } catch (e) {
      if (!isAbort(e)) this.error = describeError(e);
    }
  };

  async save(id: number | null, request: AlertRuleRequest): Promise<AlertRuleDto> {
    const saved = id === null ? await api.createAlertRule(request) : await api.editAlertRule(id, request);
    await this.load();
    return saved;
  }

  async setEnabled(rule: AlertRuleDto, enabled: boolean): Promise<void> {
    await this.act(() => api.editAlertRule(rule.id, { enabled }), `${rule.name}: ${enabled ? 'enabled' : 'disabled'}`);
  }

  async remove(rule: AlertRuleDto): Promise<void> {
    await this.act(() => api.deleteAlertRule(rule.id), `${rule.name}: deleted`);
  }

  private async act(step: () => Promise<unknown>, done: string): Promise<void> {
    await notices.after(step, done);
    await this.load();
  }
}
