/**
 * Differential fuzzing: random conversations (valid commands of every kind mixed with mutated and
 * malformed input, over 1-3 connections) are sent to a fresh Debian beanstalkd 1.12 and a fresh
 * Beanpole, and everything each connection receives must be the same bytes. Only process and host
 * facts in `stats` are masked, and a stats-job `age`/`time-left` or stats-tube `pause-time-left`
 * may differ by one second (diff-transcript.ts `normalizePair`).
 *
 * Conversations are grouped in scripts of DIFF_FUZZ_BATCH; a script runs on its own server pair,
 * one conversation after the other (their connections stay open, so job ids and tubes carry over).
 * Nothing depends on time: the framing model (beanstalkd-framing.ts) keeps out blocking reserves,
 * positive reserve timeouts and delays, pauses or TTRs under 1000 s, and it predicts how many
 * replies each step gets, so a step costs one round trip rather than a timeout. The runner
 * (diff-transcript.ts) makes sure each server has accepted a conversation's connections and read
 * each step before the next one is sent, so steps on different connections cannot swap places.
 *
 * On a difference the script is rerun on fresh servers, cut down to a minimal script that still
 * differs (diff-shrink.ts), and the test fails with its exact bytes and both servers' replies. A
 * difference that does not come back on the rerun is printed as a probable timing artifact and
 * does not fail the test (unless DIFF_FUZZ_STRICT=1).
 *
 *   DIFF_FUZZ_SEED=<u32>        seed (printed on every run)
 *   DIFF_FUZZ_RUNS=300          conversations
 *   DIFF_FUZZ_BATCH=10          conversations per script (per server pair)
 *   DIFF_FUZZ_JOBS=3            scripts in flight at once
 *   DIFF_FUZZ_REPLY_MS=300      wait for one reply before recording <timeout>
 *   DIFF_FUZZ_TARGET=beanstalkd compare beanstalkd with itself (checks the fuzzer has no false positives)
 *   DIFF_FUZZ_KEEP_GOING=1      go on after a difference and shrink every new kind (long local runs)
 *   DIFF_FUZZ_REPORT=<file>     append every shrunk difference to <file> (JSON lines)
 *   DIFF_FUZZ_STRICT=1          also fail on a difference that does not come back on a rerun
 *   DIFF_FUZZ_AVOID=<quirk,...> do not generate input that touches these known differences
 *                               (names in beanstalkd-framing.ts QUIRKS); default: the intentional
 *                               difference stats-job-in-flight
 */
import { appendFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConversationGenerator, forecastScript, type Script } from './support/conversation-gen.js';
import {
  compareTranscripts,
  escapeBytes,
  normalizePair,
  renderRun,
  runScript,
  scriptJson,
  stopAllServers,
  type Mismatch,
  type RunOptions,
  type Transcripts,
} from './support/diff-transcript.js';
import { prefixUpTo, shrinkScript } from './support/diff-shrink.js';
import { QUIRKS, type Quirk } from './support/beanstalkd-framing.js';
import { Prng, seedFromEnv } from './support/prng.js';
import { BEANPOLE_BIN, hasBeanstalkd, type ServerKind } from './support/servers.js';

function intEnv(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer >= ${min}, got ${raw}`);
  return n;
}

const SEED = seedFromEnv('DIFF_FUZZ_SEED');
const RUNS = intEnv('DIFF_FUZZ_RUNS', 300);
const PER_SCRIPT = intEnv('DIFF_FUZZ_BATCH', 10);
const JOBS = intEnv('DIFF_FUZZ_JOBS', 3);
const KEEP_GOING = process.env.DIFF_FUZZ_KEEP_GOING === '1';
const STRICT = process.env.DIFF_FUZZ_STRICT === '1';
const REPORT = process.env.DIFF_FUZZ_REPORT;
// Beanpole deliberately never shows a job whose body is still arriving (README, "Differences"),
// so by default the generator keeps clear of that corner; DIFF_FUZZ_AVOID= (empty) looks at it.
const AVOID = new Set(
  (process.env.DIFF_FUZZ_AVOID ?? 'stats-job-in-flight')
    .split(',')
    .map((q) => q.trim())
    .filter((q) => q !== '')
    .map((q) => {
      if (!(q in QUIRKS)) throw new Error(`DIFF_FUZZ_AVOID: unknown quirk ${q}; known: ${Object.keys(QUIRKS).join(', ')}`);
      return q as Quirk;
    }),
);
const TARGET: ServerKind = process.env.DIFF_FUZZ_TARGET === 'beanstalkd' ? 'beanstalkd' : 'beanpole';
const OPTIONS: RunOptions = {
  reference: 'beanstalkd',
  target: TARGET,
  replyMs: intEnv('DIFF_FUZZ_REPLY_MS', 300),
};
const LABELS: [string, string] = ['beanstalkd', TARGET === 'beanpole' ? 'beanpole' : 'beanstalkd#2'];
/** Shrinking one difference stops after this many candidate runs or this long. */
const SHRINK_RUNS = intEnv('DIFF_FUZZ_SHRINK_RUNS', 150);
const SHRINK_MS = intEnv('DIFF_FUZZ_SHRINK_MS', 90_000);
/** In keep-going mode, a difference whose kind was already shrunk this often is only counted. */
const SHRINK_SAME_KIND = 2;
/** Without keep-going, only the first difference that comes back is shrunk (the CI budget). */
const SHRINK_AT_MOST = KEEP_GOING ? Infinity : 1;
/** Generous: about 25 ms per conversation on a loaded 2-core machine, plus shrinking. */
const TEST_TIMEOUT_MS = 120_000 + RUNS * 250 + (KEEP_GOING ? 24 * 3_600_000 : SHRINK_MS + 60_000);

const DIST_MAIN = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));

function problems(): string[] {
  const out: string[] = [];
  if (!hasBeanstalkd()) out.push('beanstalkd is not installed (apt-get install beanstalkd); the differential fuzzer needs the real server.');
  if (TARGET === 'beanpole' && (!existsSync(BEANPOLE_BIN) || !existsSync(DIST_MAIN))) {
    out.push(`Beanpole is not built (${DIST_MAIN} is missing); run npm run build:server first.`);
  }
  return out;
}

/** The seed of script `i`: every script can be regenerated on its own. */
function scriptSeed(i: number): number {
  return (SEED + Math.imul(i + 1, 0x9e3779b9)) >>> 0;
}

function makeScript(i: number): Script {
  const count = Math.min(PER_SCRIPT, RUNS - i * PER_SCRIPT);
  return new ConversationGenerator(new Prng(scriptSeed(i)), AVOID).script(count);
}

interface Finding {
  script: number;
  kind: string;
  mismatch: Mismatch;
  /**
   * Whether a rerun on fresh servers showed a difference again; same-kind: not rerun because a
   * difference of the same kind was; unchecked: not rerun because one difference was enough.
   */
  status: 'reproduced' | 'not-reproduced' | 'same-kind' | 'unchecked';
  minimal?: Script;
  minimalRun?: Transcripts;
  minimalMismatch?: Mismatch;
  shrinkRuns?: number;
}

/** Runs a script; returns the transcripts and the first difference (null when none or unusable). */
async function check(script: Script): Promise<{ t: Transcripts; mismatch: Mismatch | null } | null> {
  const forecast = forecastScript(script);
  if (forecast.hazard !== null || [...forecast.quirks].some((q) => AVOID.has(q))) return null;
  const t = await runScript(script, forecast, OPTIONS);
  return { t, mismatch: compareTranscripts(t) };
}

/**
 * A coarse kind for a difference, to tell new differences from known ones: the first pair of
 * replies (or YAML lines) that differ, with numbers blurred.
 */
function kindOf(m: Mismatch): string {
  const blur = (x: string | undefined): string => (x === undefined ? '(none)' : escapeBytes(x.slice(0, 60)).replace(/\d+/g, '#'));
  for (let k = 0; k < Math.max(m.expected.length, m.actual.length); k++) {
    const x = m.expected[k];
    const y = m.actual[k];
    if (x === undefined || y === undefined) return `${blur(x)} => ${blur(y)}`;
    const [nx, ny] = normalizePair(x, y);
    if (nx === ny) continue;
    const lx = nx.split('\n');
    const ly = ny.split('\n');
    const i = lx.findIndex((l, j) => l !== ly[j]);
    return i > 0 ? `${blur(lx[0])} ... ${blur(lx[i])} => ${blur(ly[i])}` : `${blur(lx[0])} => ${blur(ly[0])}`;
  }
  return 'no difference';
}

function describeFinding(f: Finding): string {
  const head = `script ${f.script} (DIFF_FUZZ_SEED=${SEED} DIFF_FUZZ_RUNS=${RUNS} DIFF_FUZZ_BATCH=${PER_SCRIPT})`;
  if (f.minimal === undefined || f.minimalRun === undefined || f.minimalMismatch === undefined) {
    return [
      `${head}: first difference at ${f.mismatch.where}`,
      `  expected ${f.mismatch.expected.map((x) => `"${escapeBytes(x)}"`).join(' + ')}`,
      `  actual   ${f.mismatch.actual.map((x) => `"${escapeBytes(x)}"`).join(' + ')}`,
      f.status === 'not-reproduced' ? '  (it did not come back when the script ran again on fresh servers: probably a timing artifact)' : '',
    ].join('\n');
  }
  const m = f.minimalMismatch;
  return [
    `${head}: shrunk in ${f.shrinkRuns} runs to ${f.minimal.reduce((n, c) => n + c.steps.length, 0)} step(s)`,
    `first difference at ${m.where}:`,
    `  ${LABELS[0]}: ${m.expected.map((x) => `"${escapeBytes(x)}"`).join(' + ') || '(nothing)'}`,
    `  ${LABELS[1]}: ${m.actual.map((x) => `"${escapeBytes(x)}"`).join(' + ') || '(nothing)'}`,
    'minimal conversation:',
    renderRun(f.minimal, f.minimalRun, LABELS),
    `replay JSON: ${scriptJson(f.minimal)}`,
  ].join('\n');
}

describe(`differential fuzz: beanstalkd 1.12 vs ${TARGET}`, () => {
  // Also after a timeout: no server process may outlive the test.
  afterAll(stopAllServers);

  it('has beanstalkd installed and Beanpole built', () => {
    // Fail loudly rather than skip: without the reference there is nothing to compare with.
    expect(problems()).toEqual([]);
  });

  it(`${RUNS} random conversations get the same bytes (seed ${SEED})`, async () => {
    const missing = problems();
    if (missing.length > 0) throw new Error(missing.join('\n'));
    console.log(
      `differential-fuzz: seed ${SEED}, ${RUNS} conversations, ${PER_SCRIPT} per script, ${JOBS} in flight` +
        (AVOID.size > 0 ? `, avoiding ${[...AVOID].join(', ')} ` : ' ') +
        `(reproduce with DIFF_FUZZ_SEED=${SEED} DIFF_FUZZ_RUNS=${RUNS})`,
    );
    const started = Date.now();
    const scripts = Math.ceil(RUNS / PER_SCRIPT);
    const raw: { script: number; mismatch: Mismatch }[] = [];
    let steps = 0;
    let refTimeouts = 0;
    let refUnread = 0;
    let lateReads = 0;
    /** How often beanstalkd gave each kind of reply: shows how deep the conversations got. */
    const replyKinds = new Map<string, number>();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < scripts && (KEEP_GOING || raw.length === 0)) {
        const i = next++;
        const script = makeScript(i);
        const forecast = forecastScript(script);
        if (forecast.hazard !== null) throw new Error(`generator bug: script ${i} is timing-dependent (${forecast.hazard})`);
        const t = await runScript(script, forecast, OPTIONS);
        steps += script.reduce((n, c) => n + c.steps.length, 0);
        // The framing model should predict beanstalkd exactly; count where it did not.
        refTimeouts += t.reference.filter((e) => e.got.includes('<timeout>')).length;
        refUnread += t.reference.filter((e) => e.got.some((g) => g.startsWith('<unread'))).length;
        lateReads += t.lateReads[0] + t.lateReads[1];
        for (const e of t.reference) {
          if (!/^conversation \d+ step /.test(e.where)) continue;
          for (const g of e.got) {
            const word = /^([A-Z_]+)(?: (\d+))?/.exec(g);
            const key = word === null ? g.split(' ')[0]! : word[1] === 'KICKED' && word[2] !== undefined && word[2] !== '0' ? 'KICKED n>0' : word[1]!;
            replyKinds.set(key, (replyKinds.get(key) ?? 0) + 1);
          }
        }
        const mismatch = compareTranscripts(t);
        if (mismatch !== null) raw.push({ script: i, mismatch });
      }
    };
    await Promise.all(Array.from({ length: JOBS }, worker));
    const fuzzMs = Date.now() - started;
    console.log(
      `differential-fuzz: ${Math.min(next * PER_SCRIPT, RUNS)} conversations, ${steps} steps in ${(fuzzMs / 1000).toFixed(1)} s; ` +
        `${raw.length} script(s) differed; framing model misses on beanstalkd: ${refTimeouts} late, ${refUnread} unread; ` +
        `steps a server had not read in time: ${lateReads}`,
    );
    console.log(
      `differential-fuzz: beanstalkd replies: ${[...replyKinds].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ')}`,
    );

    const findings: Finding[] = [];
    const shrunkKinds = new Map<string, number>();
    for (const r of raw) {
      const kind = kindOf(r.mismatch);
      const f: Finding = { script: r.script, kind, mismatch: r.mismatch, status: 'same-kind' };
      findings.push(f);
      const seen = shrunkKinds.get(kind) ?? 0;
      const shrunk = [...shrunkKinds.values()].reduce((a, b) => a + b, 0);
      if (seen >= (KEEP_GOING ? SHRINK_SAME_KIND : 1)) continue;
      if (shrunk >= SHRINK_AT_MOST) {
        f.status = 'unchecked';
        continue;
      }
      // Rerun on fresh servers, first only up to the difference: a difference that does not come
      // back is reported as a probable timing artifact, not shrunk.
      const full = makeScript(r.script);
      let start: Script | null = null;
      for (const candidate of [prefixUpTo(full, r.mismatch.where), full]) {
        if ((await check(candidate))?.mismatch != null) {
          start = candidate;
          break;
        }
      }
      f.status = start === null ? 'not-reproduced' : 'reproduced';
      if (start === null) continue;
      shrunkKinds.set(kind, seen + 1);
      const result = await shrinkScript(start, async (s) => (await check(s))?.mismatch != null, {
        runs: SHRINK_RUNS,
        deadline: Date.now() + SHRINK_MS,
      });
      const final = await check(result.script);
      if (final !== null && final.mismatch !== null) {
        f.minimal = result.script;
        f.minimalRun = final.t;
        f.minimalMismatch = final.mismatch;
        f.shrinkRuns = result.runs;
      }
      if (REPORT !== undefined) {
        const replay = f.minimal === undefined ? null : (JSON.parse(scriptJson(f.minimal)) as unknown);
        appendFileSync(REPORT, `${JSON.stringify({ seed: SEED, script: f.script, kind, text: describeFinding(f), replay })}\n`);
      }
      console.log(`differential-fuzz: difference\n${describeFinding(f)}`);
    }

    // A difference of a kind already reproduced counts; one that did not come back is only a warning.
    const reproducedKinds = new Set(findings.filter((f) => f.status === 'reproduced').map((f) => f.kind));
    const failing = findings.filter(
      (f) => STRICT || f.status === 'reproduced' || f.status === 'unchecked' || (f.status === 'same-kind' && reproducedKinds.has(f.kind)),
    );
    const flaky = findings.filter((f) => !failing.includes(f));
    if (flaky.length > 0) console.warn(`differential-fuzz: differences that did not come back on a rerun:\n${flaky.map(describeFinding).join('\n')}`);
    console.log(`differential-fuzz: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (failing.length > 0) {
      const kinds = [...new Set(failing.map((f) => f.kind))];
      const shown = failing.filter((f) => f.minimal !== undefined);
      const others = failing.filter((f) => f.minimal === undefined);
      throw new Error(
        `beanstalkd and ${TARGET} answered differently in ${failing.length} script(s), ${kinds.length} kind(s) ` +
          `(seed ${SEED}).\n\n${(shown.length > 0 ? shown : failing).map(describeFinding).join('\n\n')}` +
          (shown.length > 0 && others.length > 0 ? `\n\nalso differed (not shrunk):\n${others.map((f) => `  script ${f.script}: ${f.kind}`).join('\n')}` : ''),
      );
    }
  }, TEST_TIMEOUT_MS);
});
