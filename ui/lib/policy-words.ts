/** A tube policy in words, for the tube page and the tubes list (shared/policy.ts). */
import type { TubePolicy } from '../../shared/policy.js';
import { formatCount } from './format.js';

/** A duration in ms as the dashboard writes it: "750 ms", "3 s", "2.5 min". */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(1)} min`;
  return `${+(ms / 3_600_000).toFixed(1)} h`;
}

/** Each limit of `policy` in a few words, in a fixed order (empty: no limit). */
export function policyParts(policy: TubePolicy | null): string[] {
  if (policy === null) return [];
  const parts: string[] = [];
  if (policy.concurrency !== null) parts.push(`at most ${formatCount(policy.concurrency)} reserved`);
  if (policy.rate !== null) parts.push(`${+policy.rate.perSecond.toFixed(3)}/s (burst ${formatCount(policy.rate.burst)})`);
  if (policy.queueCap !== null) parts.push(`queue ≤ ${formatCount(policy.queueCap)}`);
  const b = policy.timeoutBackoff;
  if (b !== null) parts.push(`timeout backoff ${formatMs(b.baseMs)} ×${b.factor} up to ${formatMs(b.maxMs)}${b.jitter > 0 ? `, jitter ${Math.round(b.jitter * 100)}%` : ''}`);
  return parts;
}
