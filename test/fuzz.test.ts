/**
 * Protocol fuzzing against a real server process: at least 100,000 random and mutated inputs over
 * many connections, while a well-behaved client keeps checking that put / reserve / delete / stats
 * still give exactly the right answers. The server must never exit, must answer `stats` at the
 * end, and must not leak the fuzzers' connections.
 *
 * Reproduce with FUZZ_SEED=<seed printed below>. On failure, the inputs of the connections in
 * flight (and the last ones finished) are written to a JSON file whose path is printed.
 */
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FuzzInputs, isTerminal } from './support/fuzz-inputs.js';
import { Prng, seedFromEnv } from './support/prng.js';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';
import { targetKinds } from './support/targets.js';

const TOTAL_INPUTS = Number(process.env.FUZZ_INPUTS ?? 100_000);
const CONCURRENCY = 16;
/** Hard stop for the fuzzing phase; the test fails if the inputs were not all sent by then. */
const FUZZ_BUDGET_MS = 40_000;
/** The well-behaved client's limit for any single reply. */
const CHECK_REPLY_MS = 3000;
const CHECK_TUBE_PREFIX = 'fuzz-checker';
/** Fuzz connections started per checked round at most: fuzzers wait when the checker lags. */
const PLANS_PER_CHECK = 4;

type Ending = 'end' | 'destroy' | 'abort-midway';

interface Plan {
  index: number;
  inputs: Buffer[];
  ending: Ending;
  /** Number of write() calls the concatenated inputs are split into. */
  writes: number;
}

interface PlanResult {
  bytesIn: number;
  closedByServer: boolean;
}

function makePlanner(rng: Prng, gen: FuzzInputs): () => Plan | null {
  let made = 0;
  let index = 0;
  return () => {
    if (made >= TOTAL_INPUTS) return null;
    const size = rng.weighted<() => number>([
      [3, () => rng.range(1, 5)], // many short-lived connections
      [5, () => rng.range(20, 300)],
      [1, () => rng.range(500, 1500)],
    ])();
    const n = Math.min(size, TOTAL_INPUTS - made);
    // Inputs that make the server swallow the rest of the connection (quit, a put declaring a huge
    // body) go last, so the others are still parsed.
    const inputs: Buffer[] = [];
    const terminal: Buffer[] = [];
    for (let i = 0; i < n; i++) {
      const input = gen.next();
      (isTerminal(input) ? terminal : inputs).push(input);
    }
    inputs.push(...terminal);
    made += n;
    const ending = rng.weighted<Ending>([
      [7, 'end'],
      [2, 'destroy'],
      [1, 'abort-midway'],
    ]);
    return { index: index++, inputs, ending, writes: rng.range(1, 4) };
  };
}

/** Sends one plan's bytes on a fresh connection and ends it as planned. */
async function runPlan(port: number, plan: Plan): Promise<PlanResult> {
  const sock = net.connect({ port, host: '127.0.0.1' });
  sock.setNoDelay(true);
  let bytesIn = 0;
  let lastData = Date.now();
  let closed = false;
  let closedByServer = false;
  const closedPromise = new Promise<void>((resolve) => sock.once('close', () => ((closed = true), resolve())));
  sock.on('data', (d: Buffer) => {
    bytesIn += d.length;
    lastData = Date.now();
  });
  sock.on('end', () => (closedByServer = true));
  sock.on('error', () => undefined); // resets are expected: the fuzzer closes rudely on purpose
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', () => resolve());
    sock.once('error', reject);
  });

  const all = Buffer.concat(plan.inputs);
  const cut = plan.ending === 'abort-midway' ? Math.floor(all.length / 2) : all.length;
  const step = Math.max(1, Math.ceil(cut / plan.writes));
  for (let off = 0; off < cut && !closed; off += step) {
    if (!sock.write(all.subarray(off, Math.min(cut, off + step)))) {
      await Promise.race([new Promise((r) => sock.once('drain', r)), closedPromise, new Promise((r) => setTimeout(r, 1000))]);
    }
  }

  if (plan.ending === 'end') {
    sock.end();
    // The server should close after end of input; don't wait long if it keeps the connection open
    // (for example because it is still discarding a declared body that will never come).
    const started = Date.now();
    while (!closed && Date.now() - started < 2000 && Date.now() - lastData < 250) {
      await Promise.race([closedPromise, new Promise((r) => setTimeout(r, 50))]);
    }
  } else if (plan.ending === 'destroy') {
    await Promise.race([closedPromise, new Promise((r) => setTimeout(r, 20))]);
  }
  sock.destroy();
  await closedPromise;
  return { bytesIn, closedByServer };
}

/** The well-behaved client: every reply must be exactly right, within CHECK_REPLY_MS. */
class Checker {
  iterations = 0;
  maxLatencyMs = 0;
  readonly tube: string;
  private readonly rng: Prng;

  constructor(
    private readonly client: RawClient,
    private readonly port: number,
    seed: number,
  ) {
    this.rng = new Prng(seed ^ 0x5eed);
    this.tube = `${CHECK_TUBE_PREFIX}-${seed.toString(16)}`;
  }

  private async call(cmd: string | Buffer, what: string): Promise<string> {
    const t0 = performance.now();
    const reply = await this.client.call(cmd, CHECK_REPLY_MS).catch((err: Error) => {
      throw new Error(`checker: no reply to ${what} within ${CHECK_REPLY_MS} ms: ${err.message}`);
    });
    this.maxLatencyMs = Math.max(this.maxLatencyMs, performance.now() - t0);
    return reply;
  }

  private async reply(what: string): Promise<string> {
    const t0 = performance.now();
    const reply = await this.client.reply(CHECK_REPLY_MS).catch((err: Error) => {
      throw new Error(`checker: no reply to ${what} within ${CHECK_REPLY_MS} ms: ${err.message}`);
    });
    this.maxLatencyMs = Math.max(this.maxLatencyMs, performance.now() - t0);
    return reply;
  }

  private static expectEq(what: string, got: string, want: string | RegExp): void {
    const ok = typeof want === 'string' ? got === want : want.test(got);
    if (!ok) throw new Error(`checker: ${what} answered ${JSON.stringify(got)}, expected ${typeof want === 'string' ? JSON.stringify(want) : want}`);
  }

  async setup(): Promise<void> {
    Checker.expectEq('use', await this.call(`use ${this.tube}\r\n`, 'use'), `USING ${this.tube}\r\n`);
    Checker.expectEq('watch', await this.call(`watch ${this.tube}\r\n`, 'watch'), 'WATCHING 2\r\n');
    Checker.expectEq('ignore default', await this.call('ignore default\r\n', 'ignore'), 'WATCHING 1\r\n');
  }

  /** One round: put + reserve (pipelined, so no fuzzer can touch the job in between), checks, delete. */
  async step(): Promise<void> {
    const i = this.iterations++;
    const r = this.rng;
    const body = r.chance(0.5) ? r.bytes(r.int(120)) : Buffer.from(`job ${i}`);
    const pri = r.int(5000);
    this.client.send(Buffer.concat([Buffer.from(`put ${pri} 0 60 ${body.length}\r\n`), body, Buffer.from('\r\nreserve-with-timeout 0\r\n')]));
    const inserted = await this.reply('put');
    Checker.expectEq('put', inserted, /^INSERTED \d+\r\n$/);
    const id = inserted.slice(9, -2);
    const reserved = await this.reply('reserve-with-timeout 0');
    Checker.expectEq('reserve-with-timeout 0', reserved, `RESERVED ${id} ${body.length}\r\n${body.toString('latin1')}\r\n`);
    if (i % 3 === 0) {
      const st = await this.call(`stats-job ${id}\r\n`, 'stats-job');
      Checker.expectEq('stats-job', st, new RegExp(`^OK \\d+\\r\\n---\\nid: ${id}\\ntube: "?${this.tube.replace(/[.$()+]/g, '\\$&')}"?\\nstate: reserved\\npri: ${pri}\\n[^]*\\r\\n$`));
    }
    if (i % 7 === 0) {
      Checker.expectEq('touch', await this.call(`touch ${id}\r\n`, 'touch'), 'TOUCHED\r\n');
    }
    Checker.expectEq('delete', await this.call(`delete ${id}\r\n`, 'delete'), 'DELETED\r\n');
    if (i % 5 === 0) Checker.expectEq('peek deleted', await this.call(`peek ${id}\r\n`, 'peek'), 'NOT_FOUND\r\n');
    if (i % 10 === 0) {
      Checker.expectEq('reserve-with-timeout 0 (empty)', await this.call('reserve-with-timeout 0\r\n', 'reserve-with-timeout 0'), 'TIMED_OUT\r\n');
    }
    if (i % 10 === 5) checkStatsReply(await this.call('stats\r\n', 'stats'));
    if (i % 20 === 0) {
      const ts = await this.call(`stats-tube ${this.tube}\r\n`, 'stats-tube');
      Checker.expectEq('stats-tube', ts, /\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n/);
    }
    if (i % 200 === 100) {
      // New connections are still accepted and served.
      const fresh = await RawClient.connect(this.port);
      try {
        Checker.expectEq('list-tube-used (fresh connection)', await fresh.call('list-tube-used\r\n', CHECK_REPLY_MS), 'USING default\r\n');
      } finally {
        fresh.destroy();
      }
    }
  }
}

/** A `stats` reply must be framed exactly and carry the usual keys. */
function checkStatsReply(reply: string): Map<string, string> {
  const m = /^OK (\d+)\r\n/.exec(reply);
  if (m === null) throw new Error(`stats answered ${JSON.stringify(reply.slice(0, 200))}`);
  const body = reply.slice(m[0].length);
  if (body.length !== Number(m[1]) + 2 || !body.startsWith('---\n') || !body.endsWith('\n\r\n')) {
    throw new Error(`stats reply is badly framed: ${JSON.stringify(reply.slice(0, 200))}`);
  }
  const out = new Map<string, string>();
  for (const line of body.slice(4, -2).split('\n')) {
    if (line === '') continue;
    const kv = /^([a-z-]+): (.*)$/.exec(line);
    if (kv === null) throw new Error(`stats has a malformed line ${JSON.stringify(line)}`);
    out.set(kv[1]!, kv[2]!);
  }
  for (const key of ['current-connections', 'total-connections', 'current-jobs-ready', 'cmd-put', 'uptime']) {
    if (!/^\d+$/.test(out.get(key) ?? '')) throw new Error(`stats lacks a numeric ${key}`);
  }
  return out;
}

function dumpPlans(seed: number, kind: string, plans: Plan[], reason: string): string {
  const file = path.join(os.tmpdir(), `beanpole-fuzz-${kind}-${seed}.json`);
  const data = {
    seed,
    reason,
    plans: plans.map((p) => ({ index: p.index, ending: p.ending, writes: p.writes, inputs: p.inputs.map((b) => b.toString('latin1')) })),
  };
  writeFileSync(file, JSON.stringify(data, null, 1));
  return file;
}

describe.each(targetKinds())('protocol fuzzing against %s', (kind) => {
  it(`survives ${TOTAL_INPUTS} random and mutated inputs while serving a well-behaved client`, async () => {
    const seed = seedFromEnv('FUZZ_SEED');
    console.log(`fuzz (${kind}): seed ${seed} (FUZZ_SEED=${seed} to reproduce the inputs)`);
    const rng = new Prng(seed);
    const gen = new FuzzInputs(new Prng(rng.u32()), CHECK_TUBE_PREFIX);
    const nextPlan = makePlanner(rng, gen);

    const server: RunningServer = await startServer(kind);
    let exitInfo: string | null = null;
    server.process.once('exit', (code, signal) => (exitInfo = `exited with code ${code} signal ${signal}`));
    const inFlight = new Map<number, Plan>();
    const recent: Plan[] = [];
    let checkerError: Error | null = null;
    let fuzzError: Error | null = null;

    try {
      const checkClient = await RawClient.connect(server.port);
      const checker = new Checker(checkClient, server.port, seed);
      await checker.setup();

      let sent = 0;
      let bytesOut = 0;
      let bytesIn = 0;
      let connections = 0;
      let startedPlans = 0;
      let closedByServer = 0;
      let fuzzDone = false;
      const started = Date.now();

      const checkLoop = (async () => {
        while (!fuzzDone && exitInfo === null) await checker.step();
      })().catch((err: Error) => {
        checkerError = err;
      });

      const worker = async (): Promise<void> => {
        for (;;) {
          if (checkerError !== null || exitInfo !== null) return;
          if (Date.now() - started > FUZZ_BUDGET_MS) throw new Error(`fuzzing did not finish within ${FUZZ_BUDGET_MS} ms (${sent} inputs sent)`);
          // Keep the well-behaved client interleaved with the fuzzing all the way through.
          while (startedPlans >= PLANS_PER_CHECK * (checker.iterations + 1) && checkerError === null && exitInfo === null) {
            await new Promise((r) => setTimeout(r, 1));
          }
          if (checkerError !== null || exitInfo !== null) return;
          const plan = nextPlan();
          if (plan === null) return;
          startedPlans++;
          inFlight.set(plan.index, plan);
          let result: PlanResult;
          try {
            result = await runPlan(server.port, plan);
          } catch (err) {
            throw new Error(`fuzz connection ${plan.index} failed: ${(err as Error).message}${exitInfo !== null ? ` (server ${exitInfo})` : ''}`);
          }
          inFlight.delete(plan.index);
          recent.push(plan);
          if (recent.length > 32) recent.shift();
          sent += plan.inputs.length;
          connections++;
          bytesOut += plan.inputs.reduce((n, b) => n + b.length, 0);
          bytesIn += result.bytesIn;
          if (result.closedByServer) closedByServer++;
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, () => worker())).catch((err: Error) => {
        fuzzError = err;
      });
      fuzzDone = true;
      await checkLoop;
      const seconds = (Date.now() - started) / 1000;

      const generators = [...gen.counts].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(' ');
      console.log(
        `fuzz (${kind}): ${sent} inputs, ${(bytesOut / 1e6).toFixed(1)} MB over ${connections} connections ` +
          `(${closedByServer} closed by the server after end/quit) in ${seconds.toFixed(1)} s; ${(bytesIn / 1e6).toFixed(1)} MB of replies; ` +
          `checker: ${checker.iterations} rounds, slowest reply ${checker.maxLatencyMs.toFixed(1)} ms\n  generators: ${generators}`,
      );

      if (exitInfo !== null) throw new Error(`server ${exitInfo}; stderr tail:\n${server.stderr().slice(-4000)}`);
      if (checkerError !== null) throw checkerError;
      if (fuzzError !== null) throw fuzzError;
      expect(sent).toBeGreaterThanOrEqual(TOTAL_INPUTS);
      expect(checker.iterations).toBeGreaterThanOrEqual(Math.floor(connections / PLANS_PER_CHECK) - 1);

      // The server still answers stats. Connections whose client is gone may linger: a client blocked
      // in reserve is not read from (as in beanstalkd), so a FIN queued behind unread bytes never
      // arrives. beanstalkd 1.12 keeps 5-15 such connections after this fuzzing, so the count is only
      // reported, not asserted.
      checkClient.destroy();
      const last = await RawClient.connect(server.port);
      let stats = checkStatsReply(await last.call('stats\r\n', CHECK_REPLY_MS));
      for (let i = 0; i < 20 && stats.get('current-connections') !== '1'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        stats = checkStatsReply(await last.call('stats\r\n', CHECK_REPLY_MS));
      }
      console.log(`fuzz (${kind}): ${Number(stats.get('current-connections')) - 1} fuzz connection(s) still open on the server 1 s after the clients closed`);
      expect(Number(stats.get('total-connections'))).toBeGreaterThanOrEqual(connections + 2);
      // The checker's tube went away with its last reference (beanstalkd frees unreferenced tubes).
      expect(await last.call(`stats-tube ${checker.tube}\r\n`, CHECK_REPLY_MS)).toBe('NOT_FOUND\r\n');
      last.destroy();
      expect(exitInfo).toBeNull();
    } catch (err) {
      const file = dumpPlans(seed, kind, [...recent, ...inFlight.values()], (err as Error).message);
      console.log(`fuzz (${kind}): FAILED with seed ${seed}; inputs of the last and in-flight connections: ${file}`);
      throw err;
    } finally {
      await server.stop();
    }
  }, 60_000);
});
