/**
 * Model-based property tests: random command sequences over one or two connections, run against
 * a real server and against the reference model in support/beanstalk-model.ts; every reply must
 * match. The model is checked against the real beanstalkd (when installed) by the same suite.
 *
 * Reproduce a failure with PROPERTY_SEED=<seed printed below>; PROPERTY_RUNS changes the number
 * of runs (default 100).
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { BeanstalkModel, mismatch, tubeListReply, type Expected } from './support/beanstalk-model.js';
import { RawClient } from './support/raw-client.js';
import { startServer, type ServerKind } from './support/servers.js';
import { differentialKinds } from './support/targets.js';
import { seedFromEnv } from './support/prng.js';

const NUM_RUNS = Number(process.env.PROPERTY_RUNS ?? 100);
const MAX_COMMANDS = 40;
const U32_MAX = 4294967295;

/** Which job a command refers to, resolved when it runs (ids are only known from INSERTED). */
type JobRef =
  | { kind: 'recent'; back: number }
  /** One of the jobs the issuing connection has reserved (falls back to 'recent' if none). */
  | { kind: 'mine'; index: number }
  | { kind: 'unknown'; id: string };

/** The tube a command names: 0-3 are this run's tubes, 4 is `default`, 5 a name never created. */
type TubeRef = 0 | 1 | 2 | 3 | 4 | 5;

type Cmd =
  | { op: 'put'; c: number; pri: number; delay: number; ttr: number; body: Uint8Array }
  | { op: 'reserve-with-timeout'; c: number }
  | { op: 'reserve-job' | 'delete' | 'touch' | 'kick-job' | 'peek' | 'stats-job'; c: number; job: JobRef }
  | { op: 'release'; c: number; job: JobRef; pri: number; delay: number }
  | { op: 'bury'; c: number; job: JobRef; pri: number }
  | { op: 'kick'; c: number; bound: number }
  | { op: 'peek-ready' | 'peek-delayed' | 'peek-buried' | 'list-tubes' | 'list-tube-used' | 'list-tubes-watched'; c: number }
  | { op: 'use' | 'watch' | 'ignore' | 'stats-tube' | 'pause-tube'; c: number; tube: TubeRef };

function commandArb(connections: number): fc.Arbitrary<Cmd> {
  const c = fc.integer({ min: 0, max: connections - 1 });
  const pri = fc.oneof(fc.constantFrom(0, 1, 1023, 1024, U32_MAX), fc.integer({ min: 0, max: 2000 }));
  // No delay may come due during a run: 0, or at least 1000 s apart from each other.
  const delay = fc.constantFrom(0, 0, 1000, 2000, U32_MAX);
  const ttr = fc.constantFrom(1000, 3600, U32_MAX);
  const body = fc.oneof(
    fc.uint8Array({ maxLength: 16 }),
    fc.constantFrom('\r\n', 'a\r\nb', 'x\ry\n', '\0\0').map((s) => new Uint8Array(Buffer.from(s, 'latin1'))),
    fc.uint8Array({ minLength: 200, maxLength: 300 }),
  );
  const job: fc.Arbitrary<JobRef> = fc.oneof(
    { weight: 8, arbitrary: fc.nat({ max: 8 }).map((back): JobRef => ({ kind: 'recent', back })) },
    { weight: 6, arbitrary: fc.nat({ max: 3 }).map((index): JobRef => ({ kind: 'mine', index })) },
    { weight: 1, arbitrary: fc.constantFrom('0', '18446744073709551615', '9007199254740993').map((id): JobRef => ({ kind: 'unknown', id })) },
  );
  const tube = fc.constantFrom<TubeRef>(0, 1, 2, 3, 4);
  const simple = (op: 'peek-ready' | 'peek-delayed' | 'peek-buried' | 'list-tubes' | 'list-tube-used' | 'list-tubes-watched') =>
    c.map((ci): Cmd => ({ op, c: ci }));
  const withJob = (op: 'reserve-job' | 'delete' | 'touch' | 'kick-job' | 'peek' | 'stats-job') =>
    fc.record({ c, job }).map((r): Cmd => ({ op, ...r }));
  const withTube = (op: 'use' | 'watch' | 'ignore' | 'stats-tube' | 'pause-tube', tubes: fc.Arbitrary<TubeRef>) =>
    fc.record({ c, tube: tubes }).map((r): Cmd => ({ op, ...r }));
  return fc.oneof(
    { weight: 8, arbitrary: fc.record({ c, pri, delay, ttr, body }).map((r): Cmd => ({ op: 'put', ...r })) },
    { weight: 5, arbitrary: c.map((ci): Cmd => ({ op: 'reserve-with-timeout', c: ci })) },
    { weight: 2, arbitrary: withJob('reserve-job') },
    { weight: 3, arbitrary: withJob('delete') },
    { weight: 3, arbitrary: fc.record({ c, job, pri, delay }).map((r): Cmd => ({ op: 'release', ...r })) },
    { weight: 3, arbitrary: fc.record({ c, job, pri }).map((r): Cmd => ({ op: 'bury', ...r })) },
    { weight: 1, arbitrary: withJob('touch') },
    { weight: 2, arbitrary: fc.record({ c, bound: fc.constantFrom(0, 1, 2, 3, 10, U32_MAX) }).map((r): Cmd => ({ op: 'kick', ...r })) },
    { weight: 2, arbitrary: withJob('kick-job') },
    { weight: 1, arbitrary: withJob('peek') },
    { weight: 1, arbitrary: simple('peek-ready') },
    { weight: 1, arbitrary: simple('peek-delayed') },
    { weight: 1, arbitrary: simple('peek-buried') },
    { weight: 2, arbitrary: withJob('stats-job') },
    { weight: 2, arbitrary: withTube('stats-tube', fc.constantFrom<TubeRef>(0, 1, 2, 3, 4, 5)) },
    { weight: 3, arbitrary: withTube('use', tube) },
    { weight: 3, arbitrary: withTube('watch', tube) },
    { weight: 2, arbitrary: withTube('ignore', tube) },
    { weight: 1, arbitrary: simple('list-tubes') },
    { weight: 1, arbitrary: simple('list-tube-used') },
    { weight: 1, arbitrary: simple('list-tubes-watched') },
    // Never `default`: it outlives the run and a long pause would leak into later runs.
    { weight: 1, arbitrary: withTube('pause-tube', fc.constantFrom<TubeRef>(0, 1, 2, 3, 5)) },
  );
}

/** Tube names for one run: fresh per run, using every character class names allow. */
function runTubes(run: number): string[] {
  const p = `pt${run}`;
  return [`${p}.a`, `${p}-b_c`, `${p}(x)`, `${p}$;+/`, 'default', `${p}.never`];
}

function yamlValue(reply: string, key: string): number {
  const m = new RegExp(`\\n${key}: (\\d+)\\n`).exec(reply);
  if (m === null) throw new Error(`no ${key} in ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

function show(s: string): string {
  return JSON.stringify(s.length > 400 ? `${s.slice(0, 400)}...(${s.length} bytes)` : s);
}

interface ServerState {
  kind: ServerKind;
  port: number;
  admin: RawClient;
  run: number;
  /** Highest job id seen on this server; every new id must be greater. */
  lastId: number;
  /** How often each reply word was seen, to show what the runs covered. */
  coverage: Map<string, number>;
}

async function runSequence(st: ServerState, connections: number, cmds: Cmd[]): Promise<void> {
  const run = ++st.run;
  const names = runTubes(run);
  const conns: RawClient[] = [];
  const seenIds: number[] = [];
  let cleaned = false;
  const transcript: string[] = [];
  const fail = (msg: string): never => {
    throw new Error(`${st.kind}, run ${run}: ${msg}\n--- transcript (conn> command / < reply) ---\n${transcript.join('\n')}`);
  };
  try {
    // The previous run's cleanup must have freed every tube but default.
    const before = await st.admin.call('list-tubes\r\n');
    if (before !== tubeListReply(['default'])) fail(`tubes left over from the previous run: ${show(before)}`);
    const defaultStats = await st.admin.call('stats-tube default\r\n');
    const model = new BeanstalkModel({
      connections,
      outsideDefaultConns: 1,
      defaultTotalJobs: yamlValue(defaultStats, 'total-jobs'),
      defaultCmdDelete: yamlValue(defaultStats, 'cmd-delete'),
    });
    for (let i = 0; i < connections; i++) conns.push(await RawClient.connect(st.port));
    const started = Date.now();
    const slack = (): number => Math.ceil((Date.now() - started) / 1000) + 1;
    const resolve = (ref: JobRef, c: number): string => {
      if (ref.kind === 'unknown') return ref.id;
      if (ref.kind === 'mine') {
        const mine = [...model.jobs.values()].filter((j) => j.state === 'reserved' && j.reserver === c).map((j) => j.id);
        if (mine.length > 0) return String(mine.sort((a, b) => a - b)[ref.index % mine.length]);
      }
      if (seenIds.length === 0) return '0';
      const back = ref.kind === 'recent' ? ref.back : ref.index;
      return String(seenIds[seenIds.length - 1 - (back % seenIds.length)]);
    };

    for (const cmd of cmds) {
      const c = cmd.c;
      let wire: string | Buffer;
      let expected: Expected;
      switch (cmd.op) {
        case 'put': {
          const body = Buffer.from(cmd.body);
          wire = Buffer.concat([Buffer.from(`put ${cmd.pri} ${cmd.delay} ${cmd.ttr} ${body.length}\r\n`), body, Buffer.from('\r\n')]);
          expected = model.put();
          break;
        }
        case 'reserve-with-timeout':
          wire = 'reserve-with-timeout 0\r\n';
          expected = model.reserveWithTimeout0(c);
          break;
        case 'reserve-job':
        case 'delete':
        case 'touch':
        case 'kick-job':
        case 'peek':
        case 'stats-job': {
          const id = resolve(cmd.job, c);
          wire = `${cmd.op} ${id}\r\n`;
          const n = Number(id);
          expected =
            cmd.op === 'reserve-job' ? model.reserveJob(c, n)
            : cmd.op === 'delete' ? model.delete(c, n)
            : cmd.op === 'touch' ? model.touch(c, n)
            : cmd.op === 'kick-job' ? model.kickJob(n)
            : cmd.op === 'peek' ? model.peek(n)
            : model.statsJob(n, slack());
          break;
        }
        case 'release': {
          const id = resolve(cmd.job, c);
          wire = `release ${id} ${cmd.pri} ${cmd.delay}\r\n`;
          expected = model.release(c, Number(id), cmd.pri, cmd.delay);
          break;
        }
        case 'bury': {
          const id = resolve(cmd.job, c);
          wire = `bury ${id} ${cmd.pri}\r\n`;
          expected = model.bury(c, Number(id), cmd.pri);
          break;
        }
        case 'kick':
          wire = `kick ${cmd.bound}\r\n`;
          expected = model.kick(c, cmd.bound);
          break;
        case 'peek-ready':
          wire = 'peek-ready\r\n';
          expected = model.peekReady(c);
          break;
        case 'peek-delayed':
          wire = 'peek-delayed\r\n';
          expected = model.peekDelayed(c);
          break;
        case 'peek-buried':
          wire = 'peek-buried\r\n';
          expected = model.peekBuried(c);
          break;
        case 'list-tubes':
          wire = 'list-tubes\r\n';
          expected = model.listTubes();
          break;
        case 'list-tube-used':
          wire = 'list-tube-used\r\n';
          expected = model.listTubeUsed(c);
          break;
        case 'list-tubes-watched':
          wire = 'list-tubes-watched\r\n';
          expected = model.listTubesWatched(c);
          break;
        case 'use':
        case 'watch':
        case 'ignore':
        case 'stats-tube':
        case 'pause-tube': {
          const name = names[cmd.tube]!;
          wire = cmd.op === 'pause-tube' ? `pause-tube ${name} 1000\r\n` : `${cmd.op} ${name}\r\n`;
          expected =
            cmd.op === 'use' ? model.use(c, name)
            : cmd.op === 'watch' ? model.watch(c, name)
            : cmd.op === 'ignore' ? model.ignore(c, name)
            : cmd.op === 'stats-tube' ? model.statsTube(name, slack())
            : model.pauseTube(name, 1000);
          break;
        }
      }
      const wireText = typeof wire === 'string' ? wire : wire.toString('latin1');
      let actual: string;
      try {
        actual = await conns[c]!.call(wire);
      } catch (err) {
        transcript.push(`${c}> ${show(wireText)}\n  < (no reply: ${(err as Error).message})`);
        return fail('no reply');
      }
      transcript.push(`${c}> ${show(wireText)}\n  < ${show(actual)}`);
      const word = `${cmd.op}:${/^[A-Z_]+/.exec(actual)?.[0] ?? '?'}`;
      st.coverage.set(word, (st.coverage.get(word) ?? 0) + 1);
      const bad = mismatch(expected, actual);
      if (bad !== null) fail(`reply to ${show(wireText)} on connection ${c} was ${show(actual)}: ${bad}`);
      if ((cmd.op === 'put' || cmd.op === 'release') && cmd.delay > 0) await nextMillisecond();
      if (cmd.op === 'put') {
        const id = Number(/^INSERTED (\d+)/.exec(actual)![1]);
        const prev = seenIds.length > 0 ? seenIds[seenIds.length - 1]! : null;
        if (prev !== null && id !== prev + 1) fail(`ids must be consecutive: ${prev} then ${id}`);
        if (id <= st.lastId) fail(`id ${id} is not greater than an earlier id ${st.lastId}`);
        st.lastId = id;
        seenIds.push(id);
        model.commitPut(c, id, cmd.pri, cmd.delay, cmd.ttr, Buffer.from(cmd.body));
      }
    }

    // Teardown, still checked: quitting releases reserved jobs; deleting every job frees every tube.
    for (const conn of conns) {
      conn.send('quit\r\n');
      const rest = await conn.waitClosed(5000);
      if (rest !== '') fail(`quit answered ${show(rest)}`);
    }
    model.closeAll();
    for (const id of model.jobs.keys()) {
      let reply = '';
      // The server may see the close a moment after the client does; allow it a little time.
      for (let attempt = 0; attempt < 20; attempt++) {
        reply = await st.admin.call(`delete ${id}\r\n`);
        if (reply === 'DELETED\r\n') break;
        await new Promise((r) => setTimeout(r, 25));
      }
      if (reply !== 'DELETED\r\n') fail(`cleanup: delete ${id} (the job should exist, unreserved) answered ${show(reply)}`);
    }
    let after = '';
    for (let attempt = 0; attempt < 20; attempt++) {
      after = await st.admin.call('list-tubes\r\n');
      if (after === tubeListReply(['default'])) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    if (after !== tubeListReply(['default'])) {
      fail(`after all connections closed and all jobs were deleted, list-tubes is ${show(after)}; expected only default`);
    }
    cleaned = true;
  } finally {
    if (!cleaned) {
      // Best effort so the next run starts clean; replies do not matter here.
      for (const conn of conns) conn.destroy();
      await new Promise((r) => setTimeout(r, 50));
      for (const id of seenIds) await st.admin.call(`delete ${id}\r\n`).catch(() => '');
    }
  }
}

async function checkProperty(kind: ServerKind, connections: number): Promise<void> {
  const seed = seedFromEnv('PROPERTY_SEED');
  console.log(`property (${kind}, ${connections} connection(s)): seed ${seed}, ${NUM_RUNS} runs (PROPERTY_SEED=${seed} to reproduce)`);
  const server = await startServer(kind);
  const admin = await RawClient.connect(server.port);
  const st: ServerState = { kind, port: server.port, admin, run: 0, lastId: 0, coverage: new Map() };
  try {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb(connections), { minLength: 1, maxLength: MAX_COMMANDS, size: 'max' }), (cmds) =>
        runSequence(st, connections, cmds),
      ),
      { numRuns: NUM_RUNS, seed, endOnFailure: false, interruptAfterTimeLimit: 90_000, markInterruptAsFailure: true },
    );
    const cov = [...st.coverage].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`);
    console.log(`property (${kind}, ${connections} connection(s)): ${st.run} runs; replies seen: ${cov.join(' ')}`);
  } finally {
    admin.destroy();
    await server.stop();
  }
}

describe.each(differentialKinds())('model-based properties against %s', (kind) => {
  it('random command sequences on one connection match the model', () => checkProperty(kind, 1), 120_000);
  it('random command sequences on two connections match the model', () => checkProperty(kind, 2), 120_000);
});

/**
 * Waits until the wall clock reaches its next millisecond. Beanpole keeps a job's deadline to the
 * millisecond (engine/records.ts), so two jobs delayed within one millisecond come out by id, where
 * beanstalkd's nanosecond clock orders them by when they were delayed; the model orders them by
 * when, so the run gives each delay a millisecond of its own.
 */
async function nextMillisecond(): Promise<void> {
  const start = Date.now();
  while (Date.now() === start) await new Promise<void>((resolve) => setImmediate(resolve));
}
