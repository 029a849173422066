import type { GearmanSnapshotDto } from '../../shared/dto.js';
import { COUNTED_COMMANDS, type ServerCounts, type TubeCounts } from '../operations/operations.js';
import type { ServerInfo } from '../server-info.js';
import type { AlertStates } from '../alerts/alert-service.js';
import type { ScheduleFires } from '../schedules/schedule-service.js';
import type { DenialCount } from '../acl/acl.js';

/** A Prometheus label value: backslash, quote and newline escaped. */
function label(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

type Samples = [labels: string, value: number][];

type Metric = (name: string, type: 'gauge' | 'counter', help: string, samples: Samples) => void;

/** Writes one metric (its HELP and TYPE lines, then its samples) into `lines`. */
function metricWriter(lines: string[]): Metric {
  return (name, type, help, samples) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
  };
}

/** GET /metrics: the server's counters and gauges in the Prometheus text format (0.0.4). */
export function prometheusText(
  s: ServerCounts,
  tubes: readonly TubeCounts[],
  info: ServerInfo,
  gearman: { counts: ServerCounts; snapshot: GearmanSnapshotDto } | null = null,
): string {
  const lines: string[] = [];
  const metric = metricWriter(lines);
  metric('beanpole_jobs', 'gauge', 'Jobs by state.', [
    ['{state="ready"}', s.ready],
    ['{state="reserved"}', s.reserved],
    ['{state="delayed"}', s.delayed],
    ['{state="buried"}', s.buried],
  ]);
  metric('beanpole_jobs_urgent', 'gauge', 'Ready jobs with priority below 1024.', [['', s.urgent]]);
  metric(
    'beanpole_commands_total',
    'counter',
    'Commands served, by name.',
    COUNTED_COMMANDS.map((c) => [`{command="${c}"}`, s.operations[c]]),
  );
  metric('beanpole_job_timeouts_total', 'counter', 'Reserved jobs whose TTR ran out.', [['', s.jobTimeouts]]);
  metric('beanpole_jobs_created_total', 'counter', 'Jobs put since start.', [['', s.totalJobs]]);
  metric('beanpole_connections', 'gauge', 'Open protocol connections.', [['', s.currentConnections]]);
  metric('beanpole_connections_total', 'counter', 'Protocol connections since start.', [['', s.totalConnections]]);
  metric('beanpole_producers', 'gauge', 'Connections that have put a job.', [['', s.producers]]);
  metric('beanpole_workers', 'gauge', 'Connections that have reserved.', [['', s.workers]]);
  metric('beanpole_waiting', 'gauge', 'Connections blocked in reserve.', [['', s.waiting]]);
  metric('beanpole_tubes', 'gauge', 'Tubes.', [['', s.tubes]]);
  metric('beanpole_draining', 'gauge', '1 in drain mode.', [['', s.draining ? 1 : 0]]);
  const binlog = info.binlog();
  metric('beanpole_binlog_records_written_total', 'counter', 'Binlog records written since start.', [['', binlog.recordsWritten]]);
  metric('beanpole_binlog_records_migrated_total', 'counter', 'Binlog records moved by compaction.', [['', binlog.recordsMigrated]]);
  metric('beanpole_binlog_write_failing', 'gauge', '1 while the binlog cannot write.', [['', binlog.failure ? 1 : 0]]);
  const tubeJobs: [string, number][] = [];
  for (const t of tubes) {
    const n = label(t.name);
    tubeJobs.push(
      [`{tube="${n}",state="ready"}`, t.ready],
      [`{tube="${n}",state="reserved"}`, t.reserved],
      [`{tube="${n}",state="delayed"}`, t.delayed],
      [`{tube="${n}",state="buried"}`, t.buried],
    );
  }
  metric('beanpole_tube_jobs', 'gauge', 'Jobs by tube and state.', tubeJobs);
  policyMetrics(metric, tubes);
  if (gearman !== null) {
    const g = gearman.counts;
    metric('beanpole_gearman_jobs_created_total', 'counter', 'Gearman jobs submitted since start (coalesced submits not counted).', [['', g.totalJobs]]);
    metric('beanpole_gearman_connections', 'gauge', 'Open Gearman connections.', [['', g.currentConnections]]);
    metric('beanpole_gearman_connections_total', 'counter', 'Gearman connections since start.', [['', g.totalConnections]]);
    metric('beanpole_gearman_timeouts_total', 'counter', 'Gearman jobs requeued after CAN_DO_TIMEOUT ran out.', [['', g.jobTimeouts]]);
    const fnJobs: [string, number][] = [];
    const fnWorkers: [string, number][] = [];
    for (const f of gearman.snapshot.functions) {
      const n = label(f.name);
      fnJobs.push([`{function="${n}",state="queued"}`, f.queued], [`{function="${n}",state="running"}`, f.running]);
      fnWorkers.push([`{function="${n}"}`, f.workers]);
    }
    metric('beanpole_gearman_jobs', 'gauge', 'Gearman jobs by function and state.', fnJobs);
    metric('beanpole_gearman_workers', 'gauge', 'Gearman workers that registered each function.', fnWorkers);
  }
  return lines.join('\n') + '\n';
}


/** Tube policies at work: what holds reserves back now, and what they refused or delayed. */
function policyMetrics(metric: Metric, tubes: readonly TubeCounts[]): void {
  const held: [string, number][] = [];
  const refused: [string, number][] = [];
  const backoffs: [string, number][] = [];
  for (const t of tubes) {
    if (t.policy === null) continue;
    const n = label(t.name);
    held.push([`{tube="${n}",by="concurrency"}`, t.policy.capHeld ? 1 : 0], [`{tube="${n}",by="rate"}`, t.policy.rateHeld ? 1 : 0]);
    refused.push([`{tube="${n}"}`, t.policy.refusedPuts]);
    backoffs.push([`{tube="${n}"}`, t.policy.backoffs]);
  }
  metric('beanpole_tube_policy_held', 'gauge', "1 while a tube's concurrency cap or rate holds reserves back, by tube and limit.", held);
  metric('beanpole_tube_policy_refused_puts_total', 'counter', "Puts refused by a tube's queue cap.", refused);
  metric('beanpole_tube_policy_backoffs_total', 'counter', "Timed-out jobs sent back delayed by a tube's timeout backoff.", backoffs);
}
/**
 * /metrics' lines for schedules and alert rules: this node's schedule runs (by schedule name and
 * kind) and failed puts; each rule's firing tubes (1 while firing, the cluster's shared state);
 * and this node's webhook notifications by outcome.
 */
export function automationText(fires: ScheduleFires, alerts: AlertStates): string {
  const lines: string[] = [];
  const metric = metricWriter(lines);
  metric(
    'beanpole_schedule_fires_total',
    'counter',
    'Schedule runs made by this node, by schedule and kind (slot, catch-up, run-now).',
    fires.fires.map((f) => [`{schedule_id="${f.id}",schedule="${label(f.schedule)}",kind="${f.kind}"}`, f.count]),
  );
  metric('beanpole_schedule_put_failures_total', 'counter', 'Schedule runs whose put failed (this node).', [['', fires.failures]]);
  metric('beanpole_alert_rules', 'gauge', 'Alert rules, by whether they are enabled.', [
    ['{enabled="true"}', alerts.rules.filter((r) => r.enabled).length],
    ['{enabled="false"}', alerts.rules.filter((r) => !r.enabled).length],
  ]);
  metric(
    'beanpole_alert_firing',
    'gauge',
    'Alert rules firing now, by rule and tube (1 while firing).',
    alerts.active.map((a) => [`{rule_id="${a.ruleId}",rule="${label(a.rule)}",tube="${label(a.tube)}"}`, 1]),
  );
  metric(
    'beanpole_alert_notifications_total',
    'counter',
    'Webhook notifications by this node, by outcome.',
    Object.entries(alerts.deliveries).map(([outcome, n]) => [`{outcome="${outcome}"}`, n]),
  );
  return lines.join('\n') + '\n';
}

/**
 * /metrics' line for --acl: commands refused on the job ports, by the rule key that matched the
 * client (a CN, a glob of CNs, `*`, or `(none)`) and protocol. Rule keys, not CNs: the series
 * are as many as the file's entries, however many certificates a glob lets in.
 */
export function aclText(denials: readonly DenialCount[]): string {
  const lines: string[] = [];
  metricWriter(lines)(
    'beanpole_acl_denials_total',
    'counter',
    'Commands refused by the access rules (--acl), by matching identity rule and protocol.',
    denials.map((d) => [`{identity="${label(d.identity)}",protocol="${d.protocol}"}`, d.count]),
  );
  return lines.join('\n') + '\n';
}
