/**
 * The binlog across restarts, with real server processes: every kind of job state survives a
 * SIGTERM and a SIGKILL with its body, its counters, its place in the buried list and its
 * absolute delay deadline; reservations come back ready; deleted jobs stay deleted; ids never
 * repeat; a second restart changes nothing; the directory lock keeps a second server off.
 *
 * Also upstream beanstalkd's binlog_empty_exit, binlog_basic, binlog_bury and binlog_read
 * (testserv.c), adapted to Beanpole's files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  rmdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { BEANPOLE_BIN, freePort, startProcessServer, type ServerProcess } from './support/servers.js';

type StopSignal = 'SIGTERM' | 'SIGKILL';

const CRLF = Buffer.from('\r\n', 'latin1');
/** beanstalkd's exit status when the binlog directory cannot be used. */
const BINLOG_EXIT = 10;

const servers: ServerProcess[] = [];
const clients: RawClient[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-restart-'));
  dirs.push(dir);
  return dir;
}

async function start(dir: string, extra: readonly string[] = []): Promise<ServerProcess> {
  const server = await startProcessServer('beanpole', { tcp: true }, ['-b', dir, ...extra]);
  servers.push(server);
  return server;
}

function portOf(server: ServerProcess): number {
  return (server.address as { port: number }).port;
}

async function connect(server: ServerProcess): Promise<RawClient> {
  const client = await RawClient.connect(portOf(server));
  clients.push(client);
  return client;
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

async function waitExit(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (hasExited(child)) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    once(child, 'exit'),
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`)), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Stops a server with `sig` and waits for it; a SIGTERM must end in a clean exit 0. */
async function stopWith(server: ServerProcess, sig: StopSignal): Promise<void> {
  server.signal(sig);
  await waitExit(server.process, 5000);
  if (sig === 'SIGTERM') {
    expect(server.process.exitCode, `exit status after SIGTERM; stderr:\n${server.stderr()}`).toBe(0);
  } else {
    expect(server.process.signalCode).toBe('SIGKILL');
  }
  const i = servers.indexOf(server);
  if (i >= 0) servers.splice(i, 1);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- protocol helpers ----------------------------------------------------------------------------

function putCommand(pri: number, delay: number, ttr: number, body: Buffer | string): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  return Buffer.concat([Buffer.from(`put ${pri} ${delay} ${ttr} ${b.length}\r\n`, 'latin1'), b, CRLF]);
}

async function put(c: RawClient, pri: number, delay: number, ttr: number, body: Buffer | string): Promise<number> {
  const reply = await c.call(putCommand(pri, delay, ttr, body));
  const m = /^INSERTED (\d+)\r\n$/.exec(reply);
  if (m === null) throw new Error(`put: unexpected reply ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

/** Sends a command and checks the whole reply. */
async function expectReply(c: RawClient, command: string, expected: string | RegExp): Promise<string> {
  const reply = await c.call(`${command}\r\n`);
  if (typeof expected === 'string') expect(reply, command).toBe(`${expected}\r\n`);
  else expect(reply, command).toMatch(expected);
  return reply;
}

/** Splits `FOUND id n` / `RESERVED id n` / `OK n` replies into the line and the body. */
function splitBody(reply: string): { line: string; body: Buffer } {
  const eol = reply.indexOf('\r\n');
  return { line: reply.slice(0, eol), body: Buffer.from(reply.slice(eol + 2, reply.length - 2), 'latin1') };
}

async function peekBody(c: RawClient, id: number): Promise<Buffer | null> {
  const reply = await c.call(`peek ${id}\r\n`);
  if (reply === 'NOT_FOUND\r\n') return null;
  const { line, body } = splitBody(reply);
  expect(line).toMatch(new RegExp(`^FOUND ${id} \\d+$`));
  return body;
}

async function reserveJob(c: RawClient, id: number): Promise<void> {
  const reply = await c.call(`reserve-job ${id}\r\n`);
  expect(splitBody(reply).line, `reserve-job ${id}`).toMatch(new RegExp(`^RESERVED ${id} \\d+$`));
}

function yamlDict(yaml: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of yaml.split('\n')) {
    const m = /^([a-z-]+): (.*)$/.exec(line);
    if (m !== null) out.set(m[1]!, m[2]!.replace(/^"(.*)"$/, '$1'));
  }
  return out;
}

async function statsJob(c: RawClient, id: number): Promise<Map<string, string> | null> {
  const reply = await c.call(`stats-job ${id}\r\n`);
  if (reply === 'NOT_FOUND\r\n') return null;
  const { line, body } = splitBody(reply);
  expect(line).toMatch(/^OK \d+$/);
  return yamlDict(body.toString('latin1'));
}

async function stats(c: RawClient): Promise<Map<string, string>> {
  const { line, body } = splitBody(await c.call('stats\r\n'));
  expect(line).toMatch(/^OK \d+$/);
  return yamlDict(body.toString('latin1'));
}

function num(m: Map<string, string>, key: string): number {
  const v = m.get(key);
  if (v === undefined || !/^-?\d+$/.test(v)) throw new Error(`no numeric ${key} in ${JSON.stringify([...m])}`);
  return Number(v);
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

function segmentFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((n) => /^binlog\.\d+\.bp$/.test(n))
    .sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1]));
}

// ---- the scenario ----------------------------------------------------------------------------------

/** Every byte value, CRLF in the middle, and every value again backwards. */
function binaryBody(): Buffer {
  const up = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const down = Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i));
  return Buffer.concat([up, Buffer.from('\r\nput 0 0 1 1\r\n', 'latin1'), down, CRLF]);
}

function bigBody(): Buffer {
  const b = Buffer.alloc(60_000);
  for (let i = 0; i < b.length; i++) b[i] = (i * 31 + 7) & 0xff;
  b.write('\r\n', 30_000, 'latin1');
  return b;
}

interface Scenario {
  /** Live jobs and their bodies. */
  bodies: Map<number, Buffer>;
  deleted: number[];
  /** Highest id ever handed out by INSERTED. */
  maxId: number;
  /** Buried jobs of tubes gamma and beta, in bury order (peek-buried and kick order). */
  buriedGamma: number[];
  buriedBeta: number[];
  /** Reserved when the server stops (by reserve-job from ready: the reserve itself is not journaled). */
  heldFromReady: number;
  /** Reserved when the server stops, by reserve-job of a buried job (journaled). */
  heldFromBuried: number;
  /** Delayed ~1 s just before the stop: the deadline passes while the server is down. */
  shortDelay: number;
  /** Delayed for a long time: time-left must shrink by the downtime. */
  longDelayed: number[];
  /** Jobs whose state and counters the scenario pins down. */
  expected: Map<number, Partial<Record<string, string>>>;
}

/** Drives a fresh server through every state the binlog must keep. */
async function buildScenario(server: ServerProcess): Promise<Scenario> {
  const p = await connect(server);
  const w = await connect(server);
  const bodies = new Map<number, Buffer>();
  const expected = new Map<number, Partial<Record<string, string>>>();
  let maxId = 0;
  const add = async (pri: number, delay: number, ttr: number, body: Buffer | string): Promise<number> => {
    const id = await put(p, pri, delay, ttr, body);
    expect(id).toBeGreaterThan(maxId);
    maxId = id;
    bodies.set(id, typeof body === 'string' ? Buffer.from(body, 'latin1') : body);
    return id;
  };
  const use = (tube: string): Promise<string> => expectReply(p, `use ${tube}`, `USING ${tube}`);

  // A TTR timeout (journaled as a counter): reserved with ttr 1, left to expire while we go on.
  const w2 = await connect(server);
  await use('zeta');
  const ttrJob = await add(0, 0, 1, 'ttr-job');
  await expectReply(w2, 'watch zeta', 'WATCHING 2');
  await expectReply(w2, 'ignore default', 'WATCHING 1');
  await expectReply(w2, 'reserve-with-timeout 0', `RESERVED ${ttrJob} 7\r\nttr-job`);
  expected.set(ttrJob, { state: 'ready', reserves: '1', timeouts: '1', releases: '0', tube: 'zeta', ttr: '1' });

  // Ready jobs of various priorities.
  await use('alpha');
  const a10 = await add(10, 0, 60, 'alpha-10');
  const a0 = await add(0, 0, 120, 'alpha-0');
  const aMax = await add(4294967295, 0, 3600, 'alpha-max');
  const a10b = await add(10, 0, 60, 'alpha-10-second');
  for (const [id, pri] of [[a10, '10'], [a0, '0'], [aMax, '4294967295'], [a10b, '10']] as const) {
    expected.set(id, { state: 'ready', pri, tube: 'alpha', reserves: '0' });
  }
  await use('beta');
  const bin = await add(500, 0, 30, binaryBody());
  const empty = await add(500, 0, 30, Buffer.alloc(0));
  const big = await add(7, 0, 30, bigBody());
  for (const id of [bin, empty, big]) expected.set(id, { state: 'ready', tube: 'beta', ttr: '30' });

  // Long delays: the deadline is absolute.
  await use('alpha');
  const d100 = await add(3, 100, 60, 'delay-100');
  const d200 = await add(4, 200, 60, 'delay-200');
  expected.set(d100, { state: 'delayed', delay: '100', pri: '3' });
  expected.set(d200, { state: 'delayed', delay: '200', pri: '4' });

  // Buried jobs in an order that is neither id nor priority order, across two tubes; g5 is
  // buried, kicked and buried again (so it is last, with buries 2 and kicks 1).
  await use('gamma');
  const g = [0, 0, 0, 0, 0];
  for (let i = 0; i < 5; i++) g[i] = await add(20, 0, 60, `gamma-${i + 1}`);
  const [g1, g2, g3, g4, g5] = g as [number, number, number, number, number];
  await use('beta');
  const bb1 = await add(9, 0, 60, 'beta-buried');
  const bury = async (id: number, pri: number): Promise<void> => {
    await reserveJob(w, id);
    await expectReply(w, `bury ${id} ${pri}`, 'BURIED');
  };
  await bury(g3, 30);
  await bury(g1, 5);
  await bury(bb1, 9);
  await bury(g4, 100);
  await bury(g2, 20);
  await bury(g5, 20);
  await expectReply(w, `kick-job ${g5}`, 'KICKED');
  await bury(g5, 21);
  for (const id of [g1, g2, g3, g4]) expected.set(id, { state: 'buried', buries: '1', kicks: '0', reserves: '1' });
  expected.set(g5, { state: 'buried', buries: '2', kicks: '1', reserves: '2', pri: '21' });
  expected.set(bb1, { state: 'buried', buries: '1', tube: 'beta' });

  // reserve-job of a buried job, then release with delay 0: ready after a restart, not buried.
  await use('delta');
  const rb = await add(40, 0, 60, 'delta-buried-released');
  await bury(rb, 40);
  await reserveJob(w, rb);
  await expectReply(w, `release ${rb} 50 0`, 'RELEASED');
  expected.set(rb, { state: 'ready', pri: '50', reserves: '2', releases: '1', buries: '1', kicks: '0' });
  // reserve-job of a delayed job, then release with delay 0.
  const rd = await add(41, 100, 60, 'delta-delayed-released');
  await reserveJob(w, rd);
  await expectReply(w, `release ${rd} 60 0`, 'RELEASED');
  expected.set(rd, { state: 'ready', pri: '60', reserves: '1', releases: '1' });
  // Released with a delay.
  const rel = await add(42, 0, 60, 'delta-released-delayed');
  await reserveJob(w, rel);
  await expectReply(w, `release ${rel} 70 100`, 'RELEASED');
  expected.set(rel, { state: 'delayed', pri: '70', delay: '100', reserves: '1', releases: '1' });
  // Held at stop: one taken from buried by reserve-job, one taken from ready.
  const heldFromBuried = await add(43, 0, 60, 'delta-held-from-buried');
  await bury(heldFromBuried, 43);
  await reserveJob(w, heldFromBuried);
  const heldFromReady = await add(44, 0, 60, 'delta-held-from-ready');
  await reserveJob(w, heldFromReady);

  // Kicked: a delayed job by `kick` (the tube has no buried jobs), a buried one by `kick`.
  await use('epsilon');
  const kd = await add(5, 100, 60, 'eps-kicked-delayed');
  await expectReply(p, 'kick 1', 'KICKED 1');
  const kb = await add(6, 0, 60, 'eps-kicked-buried');
  await bury(kb, 6);
  await expectReply(p, 'kick 5', 'KICKED 1');
  expected.set(kd, { state: 'ready', kicks: '1', buries: '0', delay: '100' });
  expected.set(kb, { state: 'ready', kicks: '1', buries: '1', reserves: '1' });

  // A reservation ended by a disconnect.
  await use('eta');
  const dc = await add(8, 0, 60, 'eta-disconnected');
  const x = await connect(server);
  await expectReply(x, 'watch eta', 'WATCHING 2');
  await expectReply(x, 'ignore default', 'WATCHING 1');
  await expectReply(x, 'reserve-with-timeout 0', `RESERVED ${dc} 16\r\neta-disconnected`);
  x.destroy();
  await waitFor('the disconnect to release the job', async () => (await statsJob(p, dc))?.get('state') === 'ready');
  expected.set(dc, { state: 'ready', reserves: '1', releases: '0', timeouts: '0' });

  // Deleted in every state; the last one is the highest id ever issued.
  await use('default');
  const deleted: number[] = [];
  const gone = async (id: number, by: RawClient): Promise<void> => {
    await expectReply(by, `delete ${id}`, 'DELETED');
    bodies.delete(id);
    expected.delete(id);
    deleted.push(id);
  };
  await gone(await add(1, 0, 60, 'deleted-ready'), p);
  await gone(await add(1, 100, 60, 'deleted-delayed'), p);
  const delBuried = await add(1, 0, 60, 'deleted-buried');
  await bury(delBuried, 1);
  await gone(delBuried, p);
  const delReserved = await add(1, 0, 60, 'deleted-reserved');
  await reserveJob(w, delReserved);
  await gone(delReserved, w);

  await waitFor('the TTR to run out', async () => (await statsJob(p, ttrJob))?.get('timeouts') === '1');

  // Last: a 1 s delay whose deadline passes while the server is down, and the deleted top id.
  await use('alpha');
  const shortDelay = await add(2, 1, 60, 'short-delay');
  expected.set(shortDelay, { pri: '2', delay: '1' });
  await use('default');
  await gone(await add(0, 0, 60, 'deleted-highest'), p);

  return {
    bodies,
    deleted,
    maxId,
    buriedGamma: [g3, g1, g4, g2, g5],
    buriedBeta: [bb1],
    heldFromReady,
    heldFromBuried,
    shortDelay,
    longDelayed: [d100, d200, rel],
    expected,
  };
}

interface Snapshot {
  takenAt: number;
  jobs: Map<number, Map<string, string>>;
  bodies: Map<number, Buffer>;
  stats: Map<string, string>;
  peekBuried: Map<string, string>;
}

async function snapshot(c: RawClient, s: Scenario): Promise<Snapshot> {
  const takenAt = Date.now();
  const jobs = new Map<number, Map<string, string>>();
  const bodies = new Map<number, Buffer>();
  for (const id of s.bodies.keys()) {
    const st = await statsJob(c, id);
    expect(st, `stats-job ${id} (body ${JSON.stringify(s.bodies.get(id)!.toString('latin1').slice(0, 40))})`).not.toBeNull();
    jobs.set(id, st!);
    const body = await peekBody(c, id);
    expect(body, `peek ${id}`).not.toBeNull();
    bodies.set(id, body!);
  }
  for (const id of s.deleted) {
    expect(await statsJob(c, id), `deleted job ${id} is back`).toBeNull();
    expect(await peekBody(c, id), `deleted job ${id} is back`).toBeNull();
  }
  const peekBuried = new Map<string, string>();
  for (const tube of ['gamma', 'beta']) {
    await expectReply(c, `use ${tube}`, `USING ${tube}`);
    const reply = await c.call('peek-buried\r\n');
    peekBuried.set(tube, splitBody(reply).line);
  }
  await expectReply(c, 'use default', 'USING default');
  return { takenAt, jobs, bodies, stats: await stats(c), peekBuried };
}

const COMPARED = ['id', 'tube', 'state', 'pri', 'delay', 'ttr', 'file', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'];

/** The snapshot agrees with what the scenario did (run 1) and with itself. */
function checkScenario(s: Scenario, snap: Snapshot): void {
  for (const [id, want] of s.expected) {
    const got = snap.jobs.get(id)!;
    for (const [key, value] of Object.entries(want)) expect(got.get(key), `job ${id} ${key}`).toBe(value);
  }
  for (const [id, body] of s.bodies) expect(snap.bodies.get(id)!.equals(body), `body of job ${id}`).toBe(true);
  for (const [id, st] of snap.jobs) expect(num(st, 'file'), `file of job ${id}`).toBeGreaterThan(0);
  const count = (state: string): number => [...snap.jobs.values()].filter((j) => j.get('state') === state).length;
  for (const state of ['ready', 'reserved', 'delayed', 'buried']) {
    expect(num(snap.stats, `current-jobs-${state}`), `current-jobs-${state}`).toBe(count(state));
  }
  expect(snap.peekBuried.get('gamma')).toBe(`FOUND ${s.buriedGamma[0]} ${s.bodies.get(s.buriedGamma[0]!)!.length}`);
  expect(snap.peekBuried.get('beta')).toBe(`FOUND ${s.buriedBeta[0]} ${s.bodies.get(s.buriedBeta[0]!)!.length}`);
}

/**
 * `after` is `before` across a restart: every field is kept, except that reserved jobs are
 * ready and that a delay which ran out while the server was down has made its job ready.
 */
function compareAcrossRestart(s: Scenario, before: Snapshot, after: Snapshot): void {
  const downSeconds = (after.takenAt - before.takenAt) / 1000;
  for (const [id, b] of before.jobs) {
    const a = after.jobs.get(id)!;
    const held = id === s.heldFromReady || id === s.heldFromBuried;
    for (const key of COMPARED) {
      if (key === 'state' && (held || id === s.shortDelay)) continue;
      // The plain reserve of a job taken from ready is not journaled (as in beanstalkd).
      if (key === 'reserves' && id === s.heldFromReady) continue;
      expect(a.get(key), `job ${id} ${key} after the restart (before: ${b.get(key)})`).toBe(b.get(key));
    }
    expect(after.bodies.get(id)!.equals(before.bodies.get(id)!), `body of job ${id}`).toBe(true);
    expect(num(a, 'age'), `age of job ${id}`).toBeGreaterThanOrEqual(num(b, 'age') + Math.floor(downSeconds) - 1);
  }
  for (const id of [s.heldFromReady, s.heldFromBuried]) {
    expect(after.jobs.get(id)!.get('state'), `job ${id} was reserved at the stop`).toBe('ready');
    expect(after.jobs.get(id)!.get('time-left')).toBe('0');
  }
  const heldReserves = num(before.jobs.get(s.heldFromReady)!, 'reserves');
  expect(num(after.jobs.get(s.heldFromReady)!, 'reserves')).toBeGreaterThanOrEqual(heldReserves - 1);
  expect(num(after.jobs.get(s.heldFromReady)!, 'reserves')).toBeLessThanOrEqual(heldReserves);
  // Absolute deadlines: time-left shrinks by the time between the two snapshots.
  for (const id of s.longDelayed) {
    const t0 = num(before.jobs.get(id)!, 'time-left');
    const t1 = num(after.jobs.get(id)!, 'time-left');
    // time-left is truncated to whole seconds, and each job is looked at a little later than the
    // snapshot's start: allow 1.5 s either way.
    expect(t1, `time-left of delayed job ${id}: ${t0} s, then ${t1} s ${downSeconds} s later`).toBeLessThanOrEqual(t0 - downSeconds + 1.5);
    expect(t1, `time-left of delayed job ${id}: ${t0} s, then ${t1} s ${downSeconds} s later`).toBeGreaterThanOrEqual(t0 - downSeconds - 1.5);
  }
  for (const tube of ['gamma', 'beta']) expect(after.peekBuried.get(tube)).toBe(before.peekBuried.get(tube));
}

function binlogStats(m: Map<string, string>): { oldest: number; current: number; written: number } {
  return { oldest: num(m, 'binlog-oldest-index'), current: num(m, 'binlog-current-index'), written: num(m, 'binlog-records-written') };
}

describe.each(['SIGTERM', 'SIGKILL'] as const)('restart after %s', (sig) => {
  it('keeps every job, its state, counters, body, buried order and deadline; twice in a row', async () => {
    const dir = tempDir();

    // Run 1: build everything.
    const run1 = await start(dir);
    const scenario = await buildScenario(run1);
    const c1 = await connect(run1);
    const snap1 = await snapshot(c1, scenario);
    checkScenario(scenario, snap1);
    expect(snap1.jobs.get(scenario.heldFromReady)!.get('state')).toBe('reserved');
    expect(snap1.jobs.get(scenario.heldFromBuried)!.get('state')).toBe('reserved');
    const bin1 = binlogStats(snap1.stats);
    expect(bin1.current).toBeGreaterThanOrEqual(bin1.oldest);
    expect(bin1.written).toBeGreaterThan(0);
    const stoppedAt = Date.now();
    await stopWith(run1, sig);
    // Down for over two seconds: the 1 s delay runs out, the long ones shrink visibly.
    await sleep(Math.max(0, 2200 - (Date.now() - stoppedAt)));

    // Run 2.
    const run2 = await start(dir);
    expect(run2.stderr()).toMatch(/binlog: recovered \d+ jobs in \d+ ms/);
    const recovered = /binlog: recovered (\d+) jobs/.exec(run2.stderr());
    expect(Number(recovered![1])).toBe(scenario.bodies.size);
    const c2 = await connect(run2);
    const snap2 = await snapshot(c2, scenario);
    checkScenario(scenario, snap2);
    compareAcrossRestart(scenario, snap1, snap2);
    expect(snap2.jobs.get(scenario.shortDelay)!.get('state')).toBe('ready');
    expect(num(snap2.stats, 'current-jobs-reserved')).toBe(0);
    const bin2 = binlogStats(snap2.stats);
    expect(bin2.current, 'every start writes to a fresh segment').toBeGreaterThan(bin1.current);
    expect(bin2.current).toBeGreaterThanOrEqual(bin2.oldest);
    expect(bin2.oldest).toBeGreaterThanOrEqual(1);
    expect(bin2.written, 'binlog-records-written counts this run only').toBe(0);
    expect(existsSync(path.join(dir, `binlog.${bin2.current}.bp`))).toBe(true);
    await stopWith(run2, sig);

    // Run 3: a second restart with nothing done in between changes nothing.
    const run3 = await start(dir);
    const c3 = await connect(run3);
    const snap3 = await snapshot(c3, scenario);
    compareAcrossRestart(scenario, snap2, snap3);
    for (const [id, b] of snap2.jobs) {
      expect(snap3.jobs.get(id)!.get('state'), `job ${id} state on the second restart`).toBe(b.get('state'));
      expect(snap3.jobs.get(id)!.get('reserves'), `job ${id} reserves on the second restart`).toBe(b.get('reserves'));
    }
    const bin3 = binlogStats(snap3.stats);
    // Run 2 wrote nothing, so its segment may have been removed and its index used again.
    expect(bin3.current).toBeGreaterThanOrEqual(bin2.current);
    expect(bin3.current).toBeGreaterThanOrEqual(bin3.oldest);
    expect(existsSync(path.join(dir, `binlog.${bin3.current}.bp`))).toBe(true);
    expect(bin3.written).toBe(0);

    // A new put gets an id above every id issued before, the deleted highest one included.
    const fresh = await put(c3, 0, 0, 60, 'after-restart');
    expect(fresh, `new id after ids up to ${scenario.maxId} were issued`).toBeGreaterThan(scenario.maxId);
    expect(binlogStats(await stats(c3)).written).toBe(1);

    // Buried order: peek-buried and kick 1 walk the jobs in bury order; the counters stay.
    await expectReply(c3, 'use gamma', 'USING gamma');
    for (const id of scenario.buriedGamma) {
      const head = await c3.call('peek-buried\r\n');
      expect(splitBody(head).line, 'buried order after two restarts').toBe(`FOUND ${id} ${scenario.bodies.get(id)!.length}`);
      await expectReply(c3, 'kick 1', 'KICKED 1');
      const st = (await statsJob(c3, id))!;
      expect(st.get('state')).toBe('ready');
      expect(st.get('buries')).toBe(snap1.jobs.get(id)!.get('buries'));
    }
    await expectReply(c3, 'peek-buried', 'NOT_FOUND');

    // Ready jobs come out by priority, then id, across every tube.
    const ready: [number, number][] = [];
    for (const id of scenario.bodies.keys()) {
      const st = (await statsJob(c3, id))!;
      if (st.get('state') === 'ready') ready.push([num(st, 'pri'), id]);
    }
    ready.push([0, fresh]);
    ready.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const w = await connect(run3);
    for (const tube of ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta']) {
      await w.call(`watch ${tube}\r\n`);
    }
    const order: number[] = [];
    for (;;) {
      const reply = await w.call('reserve-with-timeout 0\r\n');
      if (reply === 'TIMED_OUT\r\n') break;
      const m = /^RESERVED (\d+) /.exec(reply);
      expect(m, reply.slice(0, 60)).not.toBeNull();
      const id = Number(m![1]);
      order.push(id);
      if (id !== fresh) expect(splitBody(reply).body.equals(scenario.bodies.get(id)!), `reserved body of ${id}`).toBe(true);
      // Deleted at once: holding a job with ttr 1 would make the next reserve DEADLINE_SOON.
      await expectReply(w, `delete ${id}`, 'DELETED');
    }
    expect(order).toEqual(ready.map(([, id]) => id));
  });
});

describe('delays that run out while the server is down', () => {
  it.each(['SIGTERM', 'SIGKILL'] as const)('the job is ready in the very first reply after the restart (%s)', async (sig) => {
    const dir = tempDir();
    const first = await start(dir);
    const c = await connect(first);
    const id = await put(c, 0, 1, 60, 'short');
    const far = await put(c, 0, 3600, 60, 'far');
    await stopWith(first, sig);
    await sleep(1500);
    const second = await start(dir);
    // No command has reached the server yet: beanstalkd runs its timers before it serves the
    // first client, so a deadline that passed during the downtime is already acted on.
    const c2 = await connect(second);
    const st = await statsJob(c2, id);
    expect(st?.get('state'), `state of job ${id} (delay 1 s, server down 1.5 s) in the first reply after the restart`).toBe('ready');
    expect(st?.get('time-left')).toBe('0');
    expect((await statsJob(c2, far))?.get('state')).toBe('delayed');
  });

  it('a worker polling with reserve-with-timeout 0 gets the overdue job on its first try', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const c = await connect(first);
    await expectReply(c, 'use overdue', 'USING overdue');
    const id = await put(c, 0, 1, 60, 'overdue');
    await stopWith(first, 'SIGKILL');
    await sleep(1500);
    const second = await start(dir);
    const w = await connect(second);
    // One write, so the server sees both commands before it answers either.
    const reply = await w.call('watch overdue\r\nreserve-with-timeout 0\r\n');
    expect(reply).toBe('WATCHING 2\r\n');
    expect(await w.reply()).toBe(`RESERVED ${id} 7\r\noverdue\r\n`);
  });
});

describe('binlog basics (upstream testserv.c)', () => {
  it.each(['SIGTERM', 'SIGKILL'] as const)('binlog_empty_exit: an empty binlog, %s, restart, put gives INSERTED 1', async (sig) => {
    const dir = tempDir();
    const first = await start(dir);
    await stopWith(first, sig);
    const second = await start(dir);
    expect(second.stderr()).toMatch(/binlog: recovered 0 jobs/);
    const c = await connect(second);
    expect(await put(c, 0, 0, 100, 'x')).toBe(1);
  });

  it.each(['SIGTERM', 'SIGKILL'] as const)('binlog_basic: put, %s, restart, delete 1 is DELETED and stays deleted', async (sig) => {
    const dir = tempDir();
    const first = await start(dir);
    expect(await put(await connect(first), 0, 0, 100, 'a')).toBe(1);
    await stopWith(first, sig);
    const second = await start(dir);
    const c = await connect(second);
    await expectReply(c, 'delete 1', 'DELETED');
    await stopWith(second, sig);
    const third = await start(dir);
    const c3 = await connect(third);
    await expectReply(c3, 'peek 1', 'NOT_FOUND');
    expect(await put(c3, 0, 0, 100, 'b')).toBe(2);
  });

  it('binlog_bury: bury works with -b and the job is still buried after a restart', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const c = await connect(first);
    expect(await put(c, 0, 0, 100, 'a')).toBe(1);
    await expectReply(c, 'reserve', 'RESERVED 1 1\r\na');
    await expectReply(c, 'bury 1 0', 'BURIED');
    await stopWith(first, 'SIGKILL');
    const second = await start(dir);
    const c2 = await connect(second);
    await expectReply(c2, 'peek-buried', 'FOUND 1 1\r\na');
    expect((await statsJob(c2, 1))!.get('buries')).toBe('1');
  });

  it.each(['SIGTERM', 'SIGKILL'] as const)('binlog_read: released and deleted jobs replay right (%s)', async (sig) => {
    const dir = tempDir();
    const first = await start(dir);
    const c = await connect(first);
    await expectReply(c, 'use test', 'USING test');
    await expectReply(c, 'watch test', 'WATCHING 2');
    expect(await put(c, 0, 0, 100, 'test')).toBe(1);
    expect(await put(c, 0, 0, 100, 'tes1')).toBe(2);
    await expectReply(c, 'reserve', 'RESERVED 1 4\r\ntest');
    await expectReply(c, 'release 1 1 1', 'RELEASED');
    await expectReply(c, 'reserve', 'RESERVED 2 4\r\ntes1');
    await expectReply(c, 'delete 2', 'DELETED');
    await stopWith(first, sig);
    const second = await start(dir);
    const c2 = await connect(second);
    await expectReply(c2, 'watch test', 'WATCHING 2');
    await expectReply(c2, 'reserve', 'RESERVED 1 4\r\ntest');
    await expectReply(c2, 'delete 1', 'DELETED');
    await expectReply(c2, 'delete 2', 'NOT_FOUND');
  });
});

/** Runs a server that is expected to refuse to start; returns its exit status and stderr. */
async function runToExit(
  args: readonly string[],
  user: { uid?: number; gid?: number } = {},
): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [BEANPOLE_BIN, '-l', '127.0.0.1', '-p', String(port), '--no-admin', '--no-gearman', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    ...user,
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await waitExit(child, 10_000);
  clearTimeout(timer);
  return { code: child.exitCode, signal: child.signalCode, stderr };
}

describe('the binlog directory', () => {
  it('a second server on the same directory exits 10 while the first runs; after a SIGKILL a new one starts', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const c = await connect(first);
    expect(await put(c, 0, 0, 100, 'kept')).toBe(1);
    const lockFile = path.join(dir, 'beanpole.lock');
    expect(readFileSync(lockFile, 'latin1')).toMatch(new RegExp(`^${first.process.pid} `));
    const filesBefore = segmentFiles(dir).map((n) => `${n}:${statSync(path.join(dir, n)).size}`);

    const second = await runToExit(['-b', dir]);
    expect(second.code, `second server: ${second.stderr}`).toBe(BINLOG_EXIT);
    expect(second.stderr).toMatch(/in use|lock/i);
    expect(second.stderr).toContain(String(first.process.pid));
    // The refused server touched nothing: same segments, same lock, and the first still works.
    expect(segmentFiles(dir).map((n) => `${n}:${statSync(path.join(dir, n)).size}`)).toEqual(filesBefore);
    expect(readFileSync(lockFile, 'latin1')).toMatch(new RegExp(`^${first.process.pid} `));
    expect(await put(c, 0, 0, 100, 'kept-too')).toBe(2);

    await stopWith(first, 'SIGKILL');
    expect(existsSync(lockFile), 'a killed server leaves its lock behind').toBe(true);
    const third = await start(dir);
    expect(readFileSync(lockFile, 'latin1')).toMatch(new RegExp(`^${third.process.pid} `));
    const c3 = await connect(third);
    await expectReply(c3, 'peek 1', 'FOUND 1 4\r\nkept');
    await expectReply(c3, 'peek 2', 'FOUND 2 8\r\nkept-too');
    await stopWith(third, 'SIGTERM');
    expect(existsSync(lockFile), 'a clean stop removes the lock').toBe(false);
  });

  it('a lock naming a process that is gone is taken over', async () => {
    const dir = tempDir();
    // A pid that cannot be alive (above pid_max) with a made-up start time.
    writeFileSync(path.join(dir, 'beanpole.lock'), '4194305 12345\n');
    const server = await start(dir);
    expect(readFileSync(path.join(dir, 'beanpole.lock'), 'latin1')).toMatch(new RegExp(`^${server.process.pid} `));
  });

  it('-b on a missing directory exits 10', async () => {
    const dir = tempDir();
    const missing = path.join(dir, 'no-such-dir');
    const run = await runToExit(['-b', missing]);
    expect(run.code, run.stderr).toBe(BINLOG_EXIT);
    expect(run.stderr).toContain('no-such-dir');
    expect(existsSync(missing)).toBe(false);
  });

  it('-b on a plain file exits 10', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'a-file');
    writeFileSync(file, 'not a directory');
    const run = await runToExit(['-b', file]);
    expect(run.code, run.stderr).toBe(BINLOG_EXIT);
    expect(readFileSync(file, 'latin1')).toBe('not a directory');
  });
});

/** The one fatal line a refused start must write: the path, the cause, no stack trace. */
function expectOneFatalLine(run: { code: number | null; stderr: string }, file: string, cause: string): void {
  expect(run.code, run.stderr).toBe(BINLOG_EXIT);
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  expect(lines, run.stderr).toHaveLength(1);
  const entry = JSON.parse(lines[0]!) as { level: number; msg: string };
  expect(entry.level).toBe(60); // fatal
  expect(entry.msg).toBe(`binlog directory is not usable: ${file}: ${cause}`);
  expect(run.stderr).not.toMatch(/\n\s+at |Error:|node:internal/);
}

describe('a binlog file the server cannot use', () => {
  it('a directory named like a segment: exit 10 with one line; the jobs are all there once it is gone', async () => {
    const dir = tempDir();
    const first = await start(dir);
    expect(await put(await connect(first), 0, 0, 100, 'kept')).toBe(1);
    await stopWith(first, 'SIGTERM');
    const segment = path.join(dir, 'binlog.3.bp');
    mkdirSync(segment);
    expectOneFatalLine(await runToExit(['-b', dir]), segment, 'is a directory, not a file');
    expect(existsSync(path.join(dir, 'beanpole.lock')), 'the refused start released its lock').toBe(false);

    rmdirSync(segment);
    const second = await start(dir);
    await expectReply(await connect(second), 'peek 1', 'FOUND 1 4\r\nkept');
  });

  it.each([
    ['next-id', 'is a directory, not a file'],
    ['beanpole.lock', 'is a directory, not a file'],
  ])('%s as a directory: exit 10 with one line', async (name, cause) => {
    const dir = tempDir();
    mkdirSync(path.join(dir, name));
    expectOneFatalLine(await runToExit(['-b', dir]), path.join(dir, name), cause);
  });

  it('a segment that is a symlink loop: exit 10 with one line', async () => {
    const dir = tempDir();
    symlinkSync('binlog.2.bp', path.join(dir, 'binlog.2.bp'));
    expectOneFatalLine(await runToExit(['-b', dir]), path.join(dir, 'binlog.2.bp'), 'ELOOP: too many symbolic links encountered');
  });

  it('a segment the server may not read: exit 10 with one line', async () => {
    const dir = tempDir();
    const segment = path.join(dir, 'binlog.2.bp');
    writeFileSync(segment, 'x'.repeat(100));
    chmodSync(segment, 0);
    // root reads any file: then the server runs as nobody, in a directory nobody owns.
    const nobody = { uid: 65534, gid: 65534 };
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      chownSync(dir, nobody.uid, nobody.gid);
      chownSync(segment, nobody.uid, nobody.gid);
    }
    expectOneFatalLine(await runToExit(['-b', dir], asRoot ? nobody : {}), segment, 'EACCES: permission denied');
  });
});

describe('restart after compaction', () => {
  it.each(['SIGTERM', 'SIGKILL'] as const)('jobs moved forward by compaction come back unchanged (%s)', async (sig) => {
    const dir = tempDir();
    const first = await start(dir, ['-s', '8192']);
    const c = await connect(first);
    await expectReply(c, 'use comp', 'USING comp');
    const bodies = new Map<number, Buffer>();
    for (let i = 0; i < 300; i++) {
      const body = Buffer.from(`compaction-${i}-${'x'.repeat(150)}`, 'latin1');
      bodies.set(await put(c, i % 7, i % 50 === 0 ? 3600 : 0, 60, body), body);
    }
    const ids = [...bodies.keys()];
    // Keep a few from the oldest segments: buried (in an order of their own), delayed, ready.
    const buried = [ids[30]!, ids[3]!, ids[17]!, ids[9]!];
    for (const id of buried) {
      await reserveJob(c, id);
      await expectReply(c, `bury ${id} 1`, 'BURIED');
    }
    const keep = new Set([...buried, ids[0]!, ids[50]!, ids[5]!, ids[11]!, ids[299]!]);
    for (const id of ids) {
      if (keep.has(id)) continue;
      await expectReply(c, `delete ${id}`, 'DELETED');
      bodies.delete(id);
    }
    await waitFor('compaction to drop the oldest segment', async () => {
      const b = binlogStats(await stats(c));
      return b.oldest > 1 && num(await stats(c), 'binlog-records-migrated') > 0;
    });
    const before = new Map<number, Map<string, string>>();
    for (const id of keep) before.set(id, (await statsJob(c, id))!);
    await stopWith(first, sig);

    const second = await start(dir, ['-s', '8192']);
    const c2 = await connect(second);
    for (const id of ids) {
      const body = await peekBody(c2, id);
      if (keep.has(id)) expect(body?.equals(bodies.get(id)!), `job ${id} after compaction and restart`).toBe(true);
      else expect(body, `deleted job ${id} is back`).toBeNull();
    }
    for (const id of keep) {
      const a = (await statsJob(c2, id))!;
      // `file` is left out: compaction may move a job forward again at any time, also after the start.
      for (const key of COMPARED) if (key !== 'file') expect(a.get(key), `job ${id} ${key}`).toBe(before.get(id)!.get(key));
      expect(num(a, 'file')).toBeGreaterThan(0);
    }
    await expectReply(c2, 'use comp', 'USING comp');
    for (const id of buried) {
      expect(splitBody(await c2.call('peek-buried\r\n')).line).toBe(`FOUND ${id} ${bodies.get(id)!.length}`);
      await expectReply(c2, 'kick 1', 'KICKED 1');
    }
    expect(await put(c2, 0, 0, 60, 'next')).toBeGreaterThan(ids.at(-1)!);
  });
});
