import { inject } from 'vitest';
import { withFreshDatabase } from '../support/cluster-db.js';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ServerKind } from '../support/servers.js';
import { ByteClient, type Address } from './client.js';
import { REPLY_TIMEOUT_MS } from './dsl.js';
import { normalizeTranscript, renderTranscript } from './normalize.js';
import { startProcessServer } from '../support/servers.js';
import type { Case, Step, TranscriptEntry } from './types.js';

/** How long to wait after the last step for replies nobody asked for. */
const SETTLE_MS = 100;

/** Which servers a run compares, and with which extra flags. */
export interface DiffConfig {
  /** The side under test: normally 'beanpole'; 'beanstalkd' checks the harness and cases. */
  target: ServerKind;
  /** Flags added on the reference (beanstalkd) side only. */
  referenceArgs: string[];
  /** Flags added on the target side only (e.g. ['-b', '/tmp/x']). */
  targetArgs: string[];
  /** Cases run at the same time (each uses two servers). */
  concurrency: number;
  /**
   * How many times a case is run again (after all others, two at a time) when its transcripts
   * differ *only* in clock readings: `age`, `time-left`, `pause-time-left` (and hence maybe an
   * `OK <n>` length). On an overloaded machine one side can cross a second boundary that the
   * other does not. Any other difference fails at once, with no retry.
   */
  retries: number;
}

/** Splits a flag string like `-b /tmp/x -f 0` on whitespace. */
export function splitArgs(s: string | undefined): string[] {
  return (s ?? '').split(/\s+/).filter((x) => x.length > 0);
}

/**
 * Reads the configuration from the environment:
 * - `BEANPOLE_EXTRA_ARGS`: flags for Beanpole's side only (e.g. `-b /tmp/x`).
 * - `BEANSTALKD_EXTRA_ARGS`: flags for beanstalkd's side only.
 * - `DIFF_TARGET=beanstalkd`: compare beanstalkd with itself (validates the cases).
 * - `DIFF_CONCURRENCY`: cases in flight at once (default 6).
 * - `DIFF_RETRIES`: extra attempts for a clock-only mismatch (default 1; 0 turns retries off).
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): DiffConfig {
  const target = env.DIFF_TARGET === 'beanstalkd' ? 'beanstalkd' : 'beanpole';
  const concurrency = Number(env.DIFF_CONCURRENCY ?? '6');
  const retries = Number(env.DIFF_RETRIES ?? '1');
  return {
    target,
    referenceArgs: splitArgs(env.BEANSTALKD_EXTRA_ARGS),
    targetArgs: splitArgs(env.BEANPOLE_EXTRA_ARGS),
    concurrency: Number.isInteger(concurrency) && concurrency > 0 ? concurrency : 6,
    retries: Number.isInteger(retries) && retries >= 0 ? retries : 1,
  };
}

function hasBinlogFlag(args: readonly string[]): boolean {
  return args.some((a) => a.startsWith('-b'));
}

/**
 * Gives every server its own fresh binlog directory: `-b DIR` (or `-bDIR`) becomes
 * `-b DIR/<case>-XXXXXX`, so cases stay independent and can run at the same time.
 * Returns the new flags and the directories made.
 */
function privateBinlogDirs(args: readonly string[], caseName: string): { args: string[]; dirs: string[] } {
  const out: string[] = [];
  const dirs: string[] = [];
  const slug = caseName.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 60);
  const fresh = (base: string): string => {
    mkdirSync(base, { recursive: true });
    const dir = mkdtempSync(path.join(base, `${slug}-`));
    dirs.push(dir);
    return dir;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-b' && i + 1 < args.length) {
      out.push('-b', fresh(args[i + 1]!));
      i++;
    } else if (a.startsWith('-b') && a.length > 2) {
      out.push(`-b${fresh(a.slice(2))}`);
    } else {
      out.push(a);
    }
  }
  return { args: out, dirs };
}

/** A started server, TCP or UNIX, as the step runner sees it. */
export interface ServerHandle {
  address: Address;
  stderr(): string;
  signal(sig: NodeJS.Signals): void;
  stop(): Promise<void>;
}

/** Starts one server of `kind` with `args`; a second call restarts it on the same UNIX path. */
export type ServerStarter = () => Promise<ServerHandle>;

function makeStarter(kind: ServerKind, args: readonly string[], unixPath: string | null): ServerStarter {
  return () => startProcessServer(kind, unixPath === null ? { tcp: true } : { path: unixPath }, args);
}

async function readReplies(
  client: ByteClient,
  conn: string,
  n: number,
  timeoutMs: number,
  out: TranscriptEntry[],
): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await client.reply(timeoutMs);
    if (r === null) {
      // One missing reply is enough to show; waiting for the rest would only add time.
      out.push(failedRead(client, conn));
      return;
    }
    out.push({ conn, kind: 'reply', data: r });
  }
}

/** After a read gave up: what did arrive, and whether the server had closed the connection. */
function failedRead(client: ByteClient, conn: string): TranscriptEntry {
  return { conn, kind: client.closed ? 'closed' : 'timeout', partial: client.takeAll() };
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs a case's steps against a server and returns what each connection received, in step
 * order. `start` is called once at the beginning and again for each `restart` step; the
 * server is stopped at the end. Stderr of every server run is appended to `stderr`.
 */
export async function runSteps(
  start: ServerStarter,
  steps: readonly Step[],
  stderr: string[] = [],
): Promise<TranscriptEntry[]> {
  let server = await start();
  let stopped = false;
  /** null: connecting failed (recorded once); later steps on that connection are skipped. */
  const clients = new Map<string, ByteClient | null>();
  const out: TranscriptEntry[] = [];
  const get = async (name: string): Promise<ByteClient | null> => {
    let c = clients.get(name);
    if (c === undefined) {
      c = await ByteClient.connect(server.address).catch(() => null);
      if (c === null) out.push({ conn: name, kind: 'connect-failed' });
      clients.set(name, c);
    }
    return c;
  };
  try {
    for (const step of steps) {
      if (step.op === 'sleep') {
        await delay(step.ms);
        continue;
      }
      if (step.op === 'signal') {
        server.signal(step.signal);
        await delay(step.settleMs);
        continue;
      }
      if (step.op === 'restart') {
        for (const c of clients.values()) c?.destroy();
        clients.clear();
        stderr.push(server.stderr());
        if (step.hard) server.signal('SIGKILL');
        await server.stop();
        try {
          server = await start();
        } catch (err) {
          // Keep the transcript so far; the rest of the case cannot run.
          const first = (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
          out.push({ conn: '*', kind: 'error', message: `server did not restart: ${first.slice(0, 300)}` });
          stopped = true;
          break;
        }
        continue;
      }
      const c = await get(step.conn);
      if (c === null) continue;
      switch (step.op) {
        case 'open':
          break;
        case 'send':
          c.send(step.data);
          await readReplies(c, step.conn, step.replies, step.timeoutMs ?? REPLY_TIMEOUT_MS, out);
          break;
        case 'read':
          await readReplies(c, step.conn, step.n, step.timeoutMs ?? REPLY_TIMEOUT_MS, out);
          break;
        case 'bytes': {
          const b = await c.bytes(step.n, step.timeoutMs ?? REPLY_TIMEOUT_MS);
          out.push(b === null ? failedRead(c, step.conn) : { conn: step.conn, kind: 'bytes', data: b });
          break;
        }
        case 'fill':
          await c.fill(step.byte, step.count);
          break;
        case 'half-close':
          c.end();
          break;
        case 'close':
          c.destroy();
          break;
        case 'expect-closed': {
          const closed = await c.waitClosed(step.timeoutMs ?? REPLY_TIMEOUT_MS);
          out.push({ conn: step.conn, kind: closed ? 'closed' : 'still-open', partial: c.takeAll() });
          break;
        }
      }
    }
    // Anything that arrived but no step read is part of the transcript too.
    await delay(SETTLE_MS);
    for (const [conn, c] of clients) {
      if (c === null) continue;
      const rest = c.takeAll();
      if (rest.length > 0) out.push({ conn, kind: 'leftover', data: rest });
    }
  } finally {
    for (const c of clients.values()) c?.destroy();
    if (!stopped) {
      stderr.push(server.stderr());
      await server.stop();
    }
  }
  return out;
}

export interface SideResult {
  kind: ServerKind;
  /** Rendered, normalised transcript (one line per entry). */
  transcript: string[];
  /** Server stderr, for failure messages. */
  stderr: string;
  /** Set when the side could not run at all (server failed to start, harness error). */
  error?: string;
}

export interface CaseResult {
  name: string;
  reference: SideResult;
  target: SideResult;
  ms: number;
  /** 1 unless the case was retried. */
  attempts: number;
  /** The first mismatching attempt, when a later one was run. */
  firstAttempt?: CaseResult;
}

/** Both sides ran and received the same bytes. */
export function matches(r: CaseResult): boolean {
  return (
    r.reference.error === undefined &&
    r.target.error === undefined &&
    r.reference.transcript.length === r.target.transcript.length &&
    r.reference.transcript.every((line, i) => line === r.target.transcript[i])
  );
}

const CLOCK_LINE = /\\n(age|time-left|pause-time-left): -?\d+/g;

/** The transcript line with its clock readings (and the body length they change) masked. */
function maskClock(line: string): string {
  return line.replace(CLOCK_LINE, '\\n$1: #').replace(/^([^:]+: "OK )\d+/, '$1#');
}

/** The sides differ, but only in clock readings (see `DiffConfig.retries`). */
export function differsOnlyInClock(r: CaseResult): boolean {
  return (
    !matches(r) &&
    r.reference.error === undefined &&
    r.target.error === undefined &&
    r.reference.transcript.length === r.target.transcript.length &&
    r.reference.transcript.every((line, i) => maskClock(line) === maskClock(r.target.transcript[i]!))
  );
}

async function runSide(kind: ServerKind, c: Case, extraArgs: readonly string[], binlogNorm: boolean): Promise<SideResult> {
  const binlogArgs = privateBinlogDirs([...(c.args ?? []), ...extraArgs], c.name);
  const dirs = binlogArgs.dirs;
  // Cluster mode (BEANPOLE_EXTRA_ARGS='--cluster @test'): a fresh database per case, kept across
  // the case's restarts as a binlog directory would be.
  const args = kind === 'beanpole' ? await withFreshDatabase(binlogArgs.args, inject('pgUrl'), c.name) : binlogArgs.args;
  const sockDir = c.unix === true ? mkdtempSync(path.join(os.tmpdir(), 'beanpole-diff-')) : null;
  const stderr: string[] = [];
  try {
    const start = makeStarter(kind, args, sockDir === null ? null : path.join(sockDir, 'sock'));
    const raw = await runSteps(start, c.steps, stderr);
    return { kind, transcript: renderTranscript(normalizeTranscript(raw, { binlog: binlogNorm })), stderr: stderr.join('') };
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    return { kind, transcript: [], stderr: stderr.join(''), error: msg };
  } finally {
    for (const d of [...dirs, ...(sockDir === null ? [] : [sockDir])]) {
      if (existsSync(d)) rmSync(d, { recursive: true, force: true });
    }
  }
}

/** Runs one case on a fresh beanstalkd and a fresh target server at the same time. */
export async function runCase(c: Case, cfg: DiffConfig): Promise<CaseResult> {
  const t0 = Date.now();
  let referenceArgs = cfg.referenceArgs;
  // A case that restarts the server only compares like with like if both sides keep (or both
  // lose) their jobs: when only the target has -b, give the reference a binlog too.
  const restarts = c.steps.some((s) => s.op === 'restart');
  const targetKeepsJobs = hasBinlogFlag(cfg.targetArgs) || cfg.targetArgs.includes('--cluster');
  if (restarts && targetKeepsJobs && !hasBinlogFlag(referenceArgs)) {
    referenceArgs = [...referenceArgs, '-b', path.join(os.tmpdir(), 'beanpole-diff-ref')];
  }
  // With -b, file numbers and record counts depend on the on-disk format (and are simply
  // different when only one side has -b); blank them on both sides. Without -b: no change.
  const binlogNorm = hasBinlogFlag(referenceArgs) || hasBinlogFlag(cfg.targetArgs);
  const [reference, target] = await Promise.all([
    runSide('beanstalkd', c, referenceArgs, binlogNorm),
    runSide(cfg.target, c, cfg.targetArgs, binlogNorm),
  ]);
  return { name: c.name, reference, target, ms: Date.now() - t0, attempts: 1 };
}

async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/**
 * Runs all cases, at most `concurrency` at a time, then retries the mismatching ones (see
 * `DiffConfig.retries`). Results keep the order of `cases`.
 */
export async function runAll(cases: readonly Case[], cfg: DiffConfig): Promise<CaseResult[]> {
  const results: CaseResult[] = new Array<CaseResult>(cases.length);
  await pool(cases, cfg.concurrency, async (c, i) => {
    results[i] = await runCase(c, cfg);
  });
  for (let attempt = 2; attempt <= cfg.retries + 1; attempt++) {
    const again = cases.map((c, i) => ({ c, i })).filter(({ i }) => differsOnlyInClock(results[i]!));
    await pool(again, Math.min(2, cfg.concurrency), async ({ c, i }) => {
      const first = results[i]!.firstAttempt ?? results[i]!;
      results[i] = { ...(await runCase(c, cfg)), attempts: attempt, firstAttempt: first };
    });
  }
  return results;
}
