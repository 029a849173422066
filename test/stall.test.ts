/**
 * "No stall": a kick of a huge number of jobs must not freeze the server for other clients.
 * While one connection runs `kick 4294967295` over 1,000,000 delayed jobs (and, separately, over
 * 200,000 buried jobs), a second connection keeps sending small commands and timing each reply;
 * the worst round trip must stay under 100 ms, and the kick must still move every job.
 *
 * The same holds when a client that holds 200,000 reserved jobs disconnects: they go back to
 * ready in slices.
 *
 * This is a Beanpole requirement beyond beanstalkd: beanstalkd kicks in one synchronous loop.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PipelineClient } from './support/pipeline-client.js';
import { RawClient } from './support/raw-client.js';
import { startServer, type RunningServer } from './support/servers.js';
import { targetKinds } from './support/targets.js';

const MAX_RTT_MS = 100;
const BATCH = 10_000;
/** Batches allowed in flight before waiting for replies. */
const WINDOW = 4;

function yamlNumber(reply: string, key: string): number {
  const m = new RegExp(`\\n${key}: (\\d+)\\n`).exec(reply);
  if (m === null) throw new Error(`no ${key} in ${JSON.stringify(reply.slice(0, 300))}`);
  return Number(m[1]);
}

/** Sends `count` copies of `unit` (one command each) in pipelined batches; every reply must start with `expectPrefix`. */
async function pipelineRepeat(
  client: PipelineClient,
  unitFor: (i: number) => string,
  count: number,
  expectPrefix: RegExp,
  onReply?: (reply: string) => void,
): Promise<void> {
  const base = client.received;
  let bad: string | null = null;
  client.onReply = (r) => {
    const line = r.toString('latin1', 0, Math.min(r.length, 64));
    if (!expectPrefix.test(line)) bad ??= r.toString('latin1', 0, Math.min(r.length, 200));
    onReply?.(line);
  };
  for (let sent = 0; sent < count; ) {
    const n = Math.min(BATCH, count - sent);
    let chunk = '';
    for (let i = 0; i < n; i++) chunk += unitFor(sent + i);
    await client.write(chunk);
    sent += n;
    await client.waitReplies(base + Math.max(0, sent - WINDOW * BATCH), 60_000);
    if (bad !== null) break;
  }
  await client.waitReplies(base + count, 60_000);
  client.onReply = () => {};
  if (bad !== null) throw new Error(`unexpected reply ${JSON.stringify(bad)} (expected ${expectPrefix})`);
}

interface ProbeResult {
  /** Round trips (ms) of requests that were in flight at any time during the kick. */
  during: number[];
  all: number[];
  /** The slowest probe command during the kick. */
  slowest: string;
  kickMs: number;
  kickReply: string;
}

/**
 * Runs `kick 4294967295` on `main` while `probe` times small commands in a loop; returns the
 * round trips and the kick's reply.
 */
async function kickWhileProbing(main: PipelineClient, probe: RawClient, probeCommands: string[]): Promise<ProbeResult> {
  const all: number[] = [];
  const during: number[] = [];
  let kickStart = Infinity;
  let kickEnd = Infinity;
  let stop = false;
  let afterKick = 0;
  let slowest = '';
  let slowestMs = -1;

  const probing = (async () => {
    for (let i = 0; !stop || afterKick < 3; i++) {
      const cmd = probeCommands[i % probeCommands.length]!;
      const t0 = performance.now();
      const reply = await probe.call(cmd, 30_000);
      const t1 = performance.now();
      if (!/^(OK \d+\r\n---\n|FOUND \d+ \d+\r\n|NOT_FOUND\r\n|USING )/.test(reply)) {
        throw new Error(`probe: ${JSON.stringify(cmd)} answered ${JSON.stringify(reply.slice(0, 200))}`);
      }
      all.push(t1 - t0);
      if (t1 >= kickStart && t0 <= kickEnd) {
        during.push(t1 - t0);
        if (t1 - t0 > slowestMs) {
          slowestMs = t1 - t0;
          slowest = cmd.trim();
        }
      }
      if (stop) afterKick++;
    }
  })();

  // Let the probe run for a moment before the kick starts.
  while (all.length < 20) await new Promise((r) => setTimeout(r, 5));
  let kickReply = '';
  main.onReply = (r) => (kickReply = r.toString('latin1'));
  const before = main.received;
  kickStart = performance.now();
  await main.write('kick 4294967295\r\n');
  await main.waitReplies(before + 1, 60_000);
  kickEnd = performance.now();
  main.onReply = () => {};
  stop = true;
  await probing;
  return { during, all, slowest, kickMs: kickEnd - kickStart, kickReply };
}

function summary(label: string, r: ProbeResult): string {
  const sorted = [...r.during].sort((a, b) => a - b);
  const p50 = sorted[Math.floor(sorted.length / 2)] ?? NaN;
  const max = sorted[sorted.length - 1] ?? NaN;
  return `${label}: kick took ${r.kickMs.toFixed(0)} ms; ${r.during.length} probe replies during it, p50 ${p50.toFixed(2)} ms, max ${max.toFixed(2)} ms (${r.slowest}); max over all ${Math.max(...r.all).toFixed(2)} ms`;
}

describe.each(targetKinds())('no stall during huge kicks on %s', (kind) => {
  let server: RunningServer;
  const closers: (() => void)[] = [];

  beforeEach(async () => {
    server = await startServer(kind);
  });

  afterEach(async () => {
    for (const close of closers.splice(0)) close();
    await server.stop();
  });

  it('kick 4294967295 moves 1,000,000 delayed jobs while other clients get replies within 100 ms', async () => {
    const N = 1_000_000;
    const tube = 'stall-delayed';
    const main = await PipelineClient.connect(server.port);
    const probe = await RawClient.connect(server.port);
    closers.push(() => main.destroy(), () => probe.destroy());

    const t0 = Date.now();
    await pipelineRepeat(main, () => `use ${tube}\r\n`, 1, /^USING /);
    await pipelineRepeat(main, () => 'put 0 100000 120 1\r\nx\r\n', N, /^INSERTED \d+\r\n/);
    const putSeconds = (Date.now() - t0) / 1000;
    const st = await probe.call(`stats-tube ${tube}\r\n`, 10_000);
    expect(yamlNumber(st, 'current-jobs-delayed')).toBe(N);
    expect(yamlNumber(st, 'current-jobs-ready')).toBe(0);
    expect(await probe.call(`use ${tube}\r\n`)).toBe(`USING ${tube}\r\n`);

    const r = await kickWhileProbing(main, probe, ['stats-tube default\r\n', `stats-tube ${tube}\r\n`, 'peek-ready\r\n', 'list-tube-used\r\n']);
    console.log(`stall (${kind}): ${N} delayed puts in ${putSeconds.toFixed(1)} s; ${summary('delayed', r)}`);

    expect(r.kickReply).toBe(`KICKED ${N}\r\n`);
    expect(r.during.length).toBeGreaterThan(0);
    expect(Math.max(...r.during), `slowest reply while kicking ${N} delayed jobs`).toBeLessThan(MAX_RTT_MS);
    const after = await probe.call(`stats-tube ${tube}\r\n`, 10_000);
    expect(yamlNumber(after, 'current-jobs-ready')).toBe(N);
    expect(yamlNumber(after, 'current-jobs-delayed')).toBe(0);
    expect(yamlNumber(after, 'total-jobs')).toBe(N);
  }, 120_000);

  it('kick 4294967295 moves 200,000 buried jobs while other clients get replies within 100 ms', async () => {
    const N = 200_000;
    const tube = 'stall-buried';
    const main = await PipelineClient.connect(server.port);
    const probe = await RawClient.connect(server.port);
    closers.push(() => main.destroy(), () => probe.destroy());

    const t0 = Date.now();
    const ids: string[] = [];
    await pipelineRepeat(main, () => `use ${tube}\r\n`, 1, /^USING /);
    await pipelineRepeat(main, () => 'put 0 0 120 1\r\nx\r\n', N, /^INSERTED \d+\r\n/, (line) => ids.push(line.slice(9, line.indexOf('\r'))));
    expect(ids.length).toBe(N);
    // Each job: reserve-job <id>, then bury <id> 0 (two pipelined commands per job).
    const reserveThenBury = (i: number): string => (i % 2 === 0 ? `reserve-job ${ids[i >> 1]}\r\n` : `bury ${ids[i >> 1]} 0\r\n`);
    await pipelineRepeat(main, reserveThenBury, 2 * N, /^(RESERVED \d+ 1\r\n|BURIED\r\n)/);
    const setupSeconds = (Date.now() - t0) / 1000;
    const st = await probe.call(`stats-tube ${tube}\r\n`, 10_000);
    expect(yamlNumber(st, 'current-jobs-buried')).toBe(N);
    expect(yamlNumber(st, 'current-jobs-ready')).toBe(0);
    expect(await probe.call(`use ${tube}\r\n`)).toBe(`USING ${tube}\r\n`);

    const r = await kickWhileProbing(main, probe, ['stats-tube default\r\n', `stats-tube ${tube}\r\n`, 'peek-ready\r\n', 'peek-buried\r\n']);
    console.log(`stall (${kind}): ${N} put+reserve+bury in ${setupSeconds.toFixed(1)} s; ${summary('buried', r)}`);

    expect(r.kickReply).toBe(`KICKED ${N}\r\n`);
    expect(r.during.length).toBeGreaterThan(0);
    expect(Math.max(...r.during), `slowest reply while kicking ${N} buried jobs`).toBeLessThan(MAX_RTT_MS);
    const after = await probe.call(`stats-tube ${tube}\r\n`, 10_000);
    expect(yamlNumber(after, 'current-jobs-ready')).toBe(N);
    expect(yamlNumber(after, 'current-jobs-buried')).toBe(0);
  }, 120_000);

  it('a client that disconnects holding 200,000 reserved jobs does not stall others', async () => {
    const N = 200_000;
    const tube = 'stall-reserved';
    const main = await PipelineClient.connect(server.port);
    const probe = await RawClient.connect(server.port);
    closers.push(() => probe.destroy());

    await pipelineRepeat(main, () => `use ${tube}\r\n`, 1, /^USING /);
    await pipelineRepeat(main, () => `watch ${tube}\r\n`, 1, /^WATCHING /);
    await pipelineRepeat(main, () => 'put 0 0 1000 1\r\nx\r\n', N, /^INSERTED \d+\r\n/);
    await pipelineRepeat(main, () => 'reserve-with-timeout 0\r\n', N, /^RESERVED \d+ 1\r\n/);
    expect(yamlNumber(await probe.call(`stats-tube ${tube}\r\n`, 10_000), 'current-jobs-reserved')).toBe(N);

    const rtts: number[] = [];
    main.destroy();
    const started = performance.now();
    for (;;) {
      const t0 = performance.now();
      const reply = await probe.call(`stats-tube ${tube}\r\n`, 30_000);
      rtts.push(performance.now() - t0);
      if (yamlNumber(reply, 'current-jobs-ready') === N) break;
      if (performance.now() - started > 60_000) throw new Error('reserved jobs did not come back within 60 s');
    }
    console.log(`stall (${kind}): ${N} reserved jobs released on disconnect; ${rtts.length} probes, max ${Math.max(...rtts).toFixed(2)} ms`);
    expect(Math.max(...rtts), 'slowest reply while a departing client\'s jobs return to ready').toBeLessThan(MAX_RTT_MS);
  }, 120_000);
});
