import { forecastScript, type Conversation, type Script } from './conversation-gen.js';

/**
 * Shrinks a script that makes two servers disagree: cuts everything after the first difference,
 * then drops whole conversations, then steps (in halves, quarters, ... and finally one at a time),
 * keeping each cut only while the script still fails, and last drops connections nothing is sent
 * on. `fails` runs a candidate on fresh servers; it must answer false for a candidate it cannot
 * run (for example one whose framing makes it timing-dependent).
 *
 * Job ids are handed out in order, so dropping a put renumbers every later job. When a cut alone
 * no longer fails, the same cut is tried once more with the job ids in later commands
 * (`peek 7`, `bury 7 0`, ...) renumbered to match.
 */

export interface ShrinkBudget {
  /** Candidate runs at most. */
  runs: number;
  /** Stop trying new candidates after this time (epoch ms). */
  deadline: number;
}

export interface ShrinkResult {
  script: Script;
  runs: number;
  /** True if the budget ran out before no single step could be dropped. */
  exhausted: boolean;
}

/** Where a difference was found: conversation and step indexes, or null for the final drain. */
export function parseWhere(where: string): { conv: number; step: number } | null {
  const m = /^conversation (\d+) (?:step (\d+) |opens)/.exec(where);
  return m === null ? null : { conv: Number(m[1]), step: m[2] === undefined ? -1 : Number(m[2]) };
}

/** The script up to and including the step where the difference showed. */
export function prefixUpTo(script: Script, where: string): Script {
  const at = parseWhere(where);
  if (at === null) return script;
  const out = script.slice(0, at.conv + 1).map((c) => ({ ...c, steps: [...c.steps] }));
  const last = out[at.conv]!;
  last.steps = last.steps.slice(0, at.step + 1);
  return out;
}

function countSteps(script: Script): number {
  return script.reduce((n, c) => n + c.steps.length, 0);
}

/**
 * The script without the flattened steps [from, from + n); empty conversations are dropped. With
 * `renumber`, job ids in the commands kept are rewritten as if the dropped steps' puts had never
 * been made; null if that changes nothing.
 */
function withoutSteps(script: Script, from: number, n: number, renumber = false): Script | null {
  const newIds = forecastScript(script).forecasts.flat().map((f) => f.newIds);
  const ids = new Map<number, number>();
  let oldId = 0;
  let newId = 0;
  newIds.forEach((count, k) => {
    for (let i = 0; i < count; i++) {
      oldId++;
      if (k < from || k >= from + n) ids.set(oldId, ++newId);
    }
  });
  const changes = renumber && [...ids].some(([a, b]) => a !== b);
  if (renumber && !changes) return null;
  const out: Script = [];
  let k = 0;
  for (const c of script) {
    const steps = c.steps.flatMap((step) => {
      const keep = k < from || k >= from + n;
      const after = k >= from + n;
      k++;
      if (!keep) return [];
      return [changes && after ? { conn: step.conn, bytes: renumberIds(step.bytes, ids) } : step];
    });
    if (steps.length > 0) out.push({ conns: c.conns, steps });
  }
  return out;
}

const ID_COMMAND = /^((?:peek|stats-job|delete|reserve-job|kick-job|touch|bury|release) +)(\d+)(?= |$)/;

/** Rewrites the job id of every command line (between CRLFs) that takes one. */
function renumberIds(bytes: Buffer, ids: Map<number, number>): Buffer {
  const lines = bytes.toString('latin1').split('\r\n');
  return Buffer.from(
    lines
      .map((line) => {
        const m = ID_COMMAND.exec(line);
        const to = m === null ? undefined : ids.get(Number(m[2]));
        return m === null || to === undefined ? line : `${m[1]}${to}${line.slice(m[0].length)}`;
      })
      .join('\r\n'),
    'latin1',
  );
}

/** Removes connections that no step uses and renumbers the rest. */
function compactConnections(c: Conversation): Conversation {
  const used = [...new Set(c.steps.map((s) => s.conn))].sort((a, b) => a - b);
  const map = new Map(used.map((conn, i) => [conn, i]));
  return { conns: Math.max(1, used.length), steps: c.steps.map((s) => ({ conn: map.get(s.conn)!, bytes: s.bytes })) };
}

export async function shrinkScript(script: Script, fails: (s: Script) => Promise<boolean>, budget: ShrinkBudget): Promise<ShrinkResult> {
  let best = script;
  let runs = 0;
  const left = (): boolean => runs < budget.runs && Date.now() < budget.deadline;
  const attempt = async (candidate: Script): Promise<boolean> => {
    if (!left()) return false;
    runs++;
    if (await fails(candidate)) {
      best = candidate;
      return true;
    }
    return false;
  };

  const cut = async (from: number, n: number): Promise<boolean> => {
    if (await attempt(withoutSteps(best, from, n)!)) return true;
    const renumbered = withoutSteps(best, from, n, true);
    return renumbered !== null && (await attempt(renumbered));
  };
  // Whole conversations first: they are the biggest cuts.
  for (let i = 0; i < best.length && best.length > 1; ) {
    const from = countSteps(best.slice(0, i));
    const n = best[i]!.steps.length;
    const dropped = n === 0 ? await attempt([...best.slice(0, i), ...best.slice(i + 1)]) : await cut(from, n);
    if (!dropped) i++;
  }
  // Then steps, in chunks that halve down to single steps.
  for (let chunk = Math.max(1, Math.floor(countSteps(best) / 2)); ; chunk = Math.floor(chunk / 2)) {
    for (let from = 0; from < countSteps(best); ) {
      if (!(await cut(from, chunk))) from += chunk;
    }
    if (chunk <= 1) break;
  }
  // One more pass of single steps: an earlier cut can make others possible.
  for (let from = 0; from < countSteps(best); ) {
    if (!(await cut(from, 1))) from++;
  }
  const compact = best.map(compactConnections);
  if (JSON.stringify(compact.map((c) => c.conns)) !== JSON.stringify(best.map((c) => c.conns))) await attempt(compact);
  return { script: best, runs, exhausted: !left() };
}
