/**
 * Differential suite: every case in `cases/` runs on a fresh real beanstalkd 1.12 and a fresh
 * Beanpole (each with the case's flags), and the transcripts of what each connection received
 * must be equal byte for byte, after masking the host/process facts in `stats` (normalize.ts).
 *
 *   npx vitest run test/differential
 *
 * Environment (see runner.ts `configFromEnv`):
 *   BEANPOLE_EXTRA_ARGS="-b /tmp/x"   extra flags on Beanpole's side only (-b gets a fresh subdir per case)
 *   BEANSTALKD_EXTRA_ARGS="..."       extra flags on beanstalkd's side only
 *   DIFF_TARGET=beanstalkd            compare beanstalkd with itself (checks the cases are deterministic)
 *   DIFF_ONLY=<regex>                 run only the cases whose name matches
 *   DIFF_CONCURRENCY=6                cases in flight at once
 *   DIFF_RETRIES=1                    reruns of a case that differs only in age/time-left (loaded machine)
 *   DIFF_DUMP=<file>                  also write both transcripts of every case to <file>
 */
import { existsSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { BEANPOLE_BIN, hasBeanstalkd } from '../support/servers.js';
import { ALL_CASES } from './cases/index.js';
import { CLUSTER_RELAXATIONS } from './cluster-relaxations.js';
import { configFromEnv, matches, runAll, type CaseResult } from './runner.js';

const cfg = configFromEnv();
const only = process.env.DIFF_ONLY !== undefined ? new RegExp(process.env.DIFF_ONLY) : null;
/** A cluster node differs from beanstalkd in a few documented ways (cluster-relaxations.ts). */
const cluster = cfg.targetArgs.includes('--cluster');
const cases = ALL_CASES.filter((c) => (only === null || only.test(c.name)) && !(cluster && c.name in CLUSTER_RELAXATIONS));

function problems(): string[] {
  const out: string[] = [];
  if (!hasBeanstalkd()) {
    out.push('beanstalkd is not installed (apt-get install beanstalkd); the differential suite needs the real server.');
  }
  if (cfg.target === 'beanpole' && !existsSync(BEANPOLE_BIN)) {
    out.push(`${BEANPOLE_BIN} does not exist; build Beanpole first (npm run build:server).`);
  }
  return out;
}

describe('differential: beanstalkd 1.12 vs ' + cfg.target, () => {
  const missing = problems();
  // Fail loudly rather than skip: CI installs beanstalkd and builds Beanpole.
  it('has both servers available', () => {
    expect(missing).toEqual([]);
  });

  it('has unique case names', () => {
    const seen = new Set<string>();
    const dups = ALL_CASES.map((c) => c.name).filter((n) => (seen.has(n) ? true : (seen.add(n), false)));
    expect(dups).toEqual([]);
  });

  it('names only existing cases among the cluster relaxations', () => {
    const names = new Set(ALL_CASES.map((c) => c.name));
    expect(Object.keys(CLUSTER_RELAXATIONS).filter((n) => !names.has(n))).toEqual([]);
  });

  const results = new Map<string, CaseResult>();
  beforeAll(async () => {
    if (missing.length > 0) return;
    const all = await runAll(cases, cfg);
    for (const r of all) results.set(r.name, r);
    const flaky = all.filter((r) => r.attempts > 1 && matches(r));
    if (flaky.length > 0) {
      console.warn(`differential: passed on a retry after a clock-only difference: ${flaky.map((r) => r.name).join('; ')}`);
    }
    if (process.env.DIFF_DUMP !== undefined) {
      const render = (r: CaseResult, label: string): string =>
        [
          `=== ${r.name} (${r.ms} ms${label})`,
          `--- beanstalkd${r.reference.error !== undefined ? ` ERROR ${r.reference.error}` : ''}`,
          ...r.reference.transcript,
          `--- ${r.target.kind}${r.target.error !== undefined ? ` ERROR ${r.target.error}` : ''}`,
          ...r.target.transcript,
          ...(matches(r) ? [] : [`--- ${r.target.kind} stderr`, r.target.stderr]),
          '',
        ].join('\n');
      const text = all
        .map((r) =>
          r.firstAttempt === undefined
            ? render(r, '')
            : `${render(r.firstAttempt, ', first attempt')}\n${render(r, `, attempt ${r.attempts}`)}`,
        )
        .join('\n');
      writeFileSync(process.env.DIFF_DUMP, text);
    }
  }, 600_000);

  for (const c of cases) {
    it(c.name, () => {
      expect(missing).toEqual([]);
      const r = results.get(c.name);
      expect(r, 'case did not run').toBeDefined();
      if (r === undefined) return;
      expect(r.reference.error, `beanstalkd side failed: ${r.reference.stderr}`).toBeUndefined();
      for (const s of c.refIncludes ?? []) {
        expect(r.reference.transcript.join('\n'), 'case no longer reaches what it is named after').toContain(s);
      }
      expect(r.target.error, `${r.target.kind} side failed: ${r.target.stderr}`).toBeUndefined();
      expect(r.target.transcript, `${r.target.kind} transcript differs from beanstalkd`).toEqual(r.reference.transcript);
    });
  }
});
