/**
 * Run order: for each pinning mode, each scenario, each round: Beanpole, then beanstalkd
 * (A B A B), a fresh server process per run. A failed run is recorded and the rest go on.
 */
import { cpuLayout, pinGenerator, type CpuLayout, type PinMode } from './pinning.js';
import { progressLine, type RunRecord } from './report.js';
import type { RunSettings, Scenario } from './scenario.js';
import type { TargetKind } from './targets.js';

/** What to run. */
export interface RunPlan {
  modes: PinMode[];
  scenarios: readonly Scenario[];
  rounds: number;
  /** beanstalkd takes part (installed, and not --beanpole-only). */
  beanstalkd: boolean;
  /** gearmand takes part in the Gearman scenarios (installed, and not --beanpole-only). */
  gearmand: boolean;
  settings: RunSettings;
}

/** The layout each mode actually used. */
export interface ModeRecord {
  mode: PinMode;
  layout: CpuLayout;
}

/** Scenarios of `mode`: unpinned repeats only its subset when pinned runs too. */
export function scenariosFor(plan: RunPlan, mode: PinMode): Scenario[] {
  return plan.scenarios.filter((s) => mode === 'pinned' || plan.modes.length === 1 || s.unpinned);
}

/** The servers a scenario runs against: Beanpole, then its reference when that takes part. */
export function targetsOf(plan: RunPlan, sc: Scenario): TargetKind[] {
  const reference = sc.reference ?? 'beanstalkd';
  const available = reference === 'gearmand' ? plan.gearmand : plan.beanstalkd;
  return available && sc.beanstalkd ? ['beanpole', reference] : ['beanpole'];
}

/** Runs the plan; `log` gets progress lines and notes. */
export async function runPlan(plan: RunPlan, log: (line: string) => void): Promise<{ runs: RunRecord[]; modes: ModeRecord[]; notes: string[] }> {
  const runs: RunRecord[] = [];
  const modes: ModeRecord[] = [];
  const notes: string[] = [];
  for (const mode of plan.modes) {
    const layout = cpuLayout(mode);
    // Before any worker thread of this mode starts: new threads inherit the mask.
    pinGenerator(layout);
    modes.push({ mode, layout });
    log(`[${mode}] server on CPU ${layout.server ?? 'any'}, generator on CPUs ${layout.generator}`);
    for (const sc of scenariosFor(plan, mode)) {
      const targets = targetsOf(plan, sc);
      for (let round = 1; round <= plan.rounds; round++) {
        for (const target of targets) {
          const started = performance.now();
          const record: RunRecord = { scenario: sc.name, mode, target, round, error: null, metrics: {}, info: {}, wallMs: 0 };
          try {
            const outcome = await sc.run({
              scenario: sc.name,
              target,
              mode,
              round,
              layout,
              settings: plan.settings,
              note: (message) => {
                notes.push(message);
                log(`note: ${message}`);
              },
            });
            record.metrics = outcome.metrics;
            record.info = outcome.info;
          } catch (err) {
            record.error = (err as Error).message;
          }
          record.wallMs = Math.round(performance.now() - started);
          runs.push(record);
          log(progressLine(sc, record, plan.rounds));
        }
      }
    }
  }
  return { runs, modes, notes };
}
