/**
 * Crash safety of the binlog under SIGKILL.
 *
 * Every round starts a real server on the same binlog directory (fsync mode alternating between
 * the default `-f 50` and `-f 0`), runs four concurrent clients that put jobs whose bodies name
 * themselves ('job-<client>-<n>-r<round>:' plus random binary padding), delete some of their own
 * acknowledged jobs, reserve and then bury, release or delete, and kick buried ones; the server is
 * killed with SIGKILL at a random moment while that load runs. The next start, on the same
 * directory, must show exactly what was acknowledged:
 *
 * - every acknowledged put that no acknowledged delete removed is there, with its exact body and
 *   the state of its last acknowledged change (buried after BURIED, ready after KICKED/RELEASED);
 * - every acknowledged delete is NOT_FOUND;
 * - an operation whose reply never arrived may show either outcome, and nothing else: a job
 *   that appears without an acknowledged put must be one of the puts in flight at the kill;
 * - a new put gets an id above every id seen before.
 *
 * Replies are counted only once received whole. Seed: CRASH_SEED (printed); rounds: CRASH_ROUNDS.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Prng, seedFromEnv } from './support/prng.js';
import { RawClient } from './support/raw-client.js';
import { startProcessServer, type ServerProcess } from './support/servers.js';
import { yamlField } from './support/yaml-fields.js';

const ROUNDS = roundsFromEnv();
const CLIENTS = 4;
/** Bounds on one client's load in one round (the kill normally comes long before). */
const MAX_OPS_PER_ROUND = 20_000;
const MAX_LOAD_MS = 8_000;
const KILL_AFTER_MS: readonly [number, number] = [40, 600];
const MAX_ERRORS_SHOWN = 25;

function roundsFromEnv(): number {
  const raw = process.env.CRASH_ROUNDS;
  if (raw === undefined || raw === '') return 20;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`CRASH_ROUNDS must be a positive integer, got ${raw}`);
  return n;
}

type Durable = 'ready' | 'buried' | 'gone';

interface TrackedJob {
  id: number;
  client: number;
  body: Buffer;
  /**
   * States a restart may show: exactly one once every change was acknowledged; two while a
   * change's reply is outstanding (it may or may not have been recorded before the kill).
   */
  possible: Durable[];
}

/** Ids with O(1) add, remove and random pick. */
class IdPool {
  private readonly ids: number[] = [];
  private readonly at = new Map<number, number>();

  get size(): number {
    return this.ids.length;
  }

  add(id: number): void {
    if (this.at.has(id)) return;
    this.at.set(id, this.ids.length);
    this.ids.push(id);
  }

  remove(id: number): void {
    const i = this.at.get(id);
    if (i === undefined) return;
    const last = this.ids.pop()!;
    this.at.delete(id);
    if (last !== id) {
      this.ids[i] = last;
      this.at.set(last, i);
    }
  }

  pick(prng: Prng): number {
    return this.ids[prng.int(this.ids.length)]!;
  }
}

/** What the clients were told, shared by all of them (each touches only its own jobs). */
class Model {
  /** Jobs that exist or may exist. */
  readonly jobs = new Map<number, TrackedJob>();
  /** Every id ever acknowledged, adopted or used by a probe put. */
  readonly known = new Set<number>();
  /** Ids known to be gone: acknowledged deletes, and in-flight deletes seen to have happened. */
  readonly gone: number[] = [];
  goneCheckedUpTo = 0;
  /** Puts sent whose INSERTED never arrived, by their body tag. */
  readonly unacked = new Map<string, { client: number; body: Buffer }>();
  /** Per client: jobs of certain state that the load may act on. */
  pools: IdPool[] = [];
  maxSeenId = 0;
  /** Ids above this one have not been swept for jobs created by unacknowledged puts. */
  sweptUpTo = 0;
  acked = { put: 0, delete: 0, bury: 0, release: 0, kick: 0 };
  uncertainAtKill = 0;
  /** Unacknowledged puts found after a restart, and those that were not. */
  adopted = 0;
  lostPuts = 0;

  rebuildPools(): void {
    this.pools = Array.from({ length: CLIENTS }, () => new IdPool());
    for (const job of this.jobs.values()) {
      if (job.possible.length !== 1 || job.possible[0] === 'gone') throw new Error(`job ${job.id} not settled`);
      this.pools[job.client]!.add(job.id);
    }
  }

  see(id: number): void {
    this.known.add(id);
    if (id > this.maxSeenId) this.maxSeenId = id;
  }
}

function tagOf(body: Buffer): string {
  const colon = body.indexOf(0x3a);
  return colon < 0 ? '' : body.toString('latin1', 0, colon);
}

function tubeOf(client: number): string {
  return `crash-c${client}`;
}

function show(s: string): string {
  return JSON.stringify(s.length > 120 ? `${s.slice(0, 120)}...` : s);
}

/** The body of a FOUND or RESERVED reply, or null for any other reply. */
function bodyOf(reply: string, word: 'FOUND' | 'RESERVED'): { id: number; body: Buffer } | null {
  const m = new RegExp(`^${word} (\\d+) (\\d+)\\r\\n`).exec(reply);
  if (m === null) return null;
  const start = m[0].length;
  const body = Buffer.from(reply.slice(start, start + Number(m[2])), 'latin1');
  return { id: Number(m[1]), body };
}

/** Sends commands in pipelined batches and returns every reply, in order. */
async function pipelined(c: RawClient, cmds: readonly string[], batch = 400): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < cmds.length; i += batch) {
    const part = cmds.slice(i, i + batch);
    c.send(part.join(''));
    for (let j = 0; j < part.length; j++) out.push(await c.reply(15_000));
  }
  return out;
}

class KilledError extends Error {}

/** One client's load for one round: a sequential loop of random operations on its own tube. */
class LoadClient {
  private sent = 0;

  constructor(
    private readonly index: number,
    private readonly round: number,
    private readonly conn: RawClient,
    private readonly model: Model,
    private readonly prng: Prng,
    private readonly errors: string[],
    private readonly isKilled: () => boolean,
  ) {}

  private get pool(): IdPool {
    return this.model.pools[this.index]!;
  }

  /** One reply; after the kill a missing reply ends the loop, before it is an error. */
  private async reply(what: string): Promise<string> {
    try {
      return await this.conn.reply(10_000);
    } catch (err) {
      if (this.isKilled()) throw new KilledError();
      throw new Error(`client ${this.index}: no reply to ${what} before the kill: ${(err as Error).message}`);
    }
  }

  private fail(message: string): never {
    throw new Error(`client ${this.index} (round ${this.round}): ${message}`);
  }

  async setup(): Promise<void> {
    const t = tubeOf(this.index);
    this.conn.send(`use ${t}\r\nwatch ${t}\r\nignore default\r\n`);
    const replies = [await this.reply('use'), await this.reply('watch'), await this.reply('ignore')];
    if (replies[0] !== `USING ${t}\r\n` || replies[1] !== 'WATCHING 2\r\n' || replies[2] !== 'WATCHING 1\r\n') {
      this.fail(`tube setup answered ${show(replies.join(''))}`);
    }
  }

  async run(): Promise<void> {
    const deadline = Date.now() + MAX_LOAD_MS;
    try {
      await this.setup();
      for (let ops = 0; ops < MAX_OPS_PER_ROUND && Date.now() < deadline && !this.isKilled(); ops++) {
        await this.step();
      }
    } catch (err) {
      if (err instanceof KilledError) return;
      this.errors.push((err as Error).message);
    }
  }

  private async step(): Promise<void> {
    const r = this.prng.float();
    if (r < 0.4 || this.pool.size === 0) return this.puts(this.prng.chance(0.25) ? this.prng.range(2, 8) : 1);
    if (r < 0.65) return this.deleteOne();
    if (r < 0.92) return this.reserveAndAct();
    return this.kickOne();
  }

  private newBody(): Buffer {
    const tag = `job-${this.index}-${this.sent++}-r${this.round}`;
    const pad = this.prng.chance(0.03) ? this.prng.range(1000, 20_000) : this.prng.range(0, 300);
    return Buffer.concat([Buffer.from(`${tag}:`, 'latin1'), this.prng.bytes(pad)]);
  }

  /** `count` puts in one write; each INSERTED is recorded as it arrives. */
  private async puts(count: number): Promise<void> {
    const bodies: Buffer[] = [];
    const frames: Buffer[] = [];
    for (let i = 0; i < count; i++) {
      const body = this.newBody();
      bodies.push(body);
      this.model.unacked.set(tagOf(body), { client: this.index, body });
      frames.push(Buffer.from(`put ${this.prng.range(0, 2000)} 0 120 ${body.length}\r\n`, 'latin1'), body, Buffer.from('\r\n'));
    }
    this.conn.send(Buffer.concat(frames));
    for (const body of bodies) {
      const reply = await this.reply('put');
      const m = /^INSERTED (\d+)\r\n$/.exec(reply);
      if (m === null) this.fail(`put answered ${show(reply)}`);
      const id = Number(m[1]);
      if (this.model.known.has(id)) this.fail(`put got id ${id}, which was already used`);
      this.model.unacked.delete(tagOf(body));
      this.model.jobs.set(id, { id, client: this.index, body, possible: ['ready'] });
      this.model.see(id);
      this.model.acked.put++;
      this.pool.add(id);
    }
  }

  private async deleteOne(): Promise<void> {
    const id = this.pool.pick(this.prng);
    const job = this.model.jobs.get(id)!;
    this.pool.remove(id);
    job.possible = [job.possible[0]!, 'gone'];
    this.conn.send(`delete ${id}\r\n`);
    const reply = await this.reply(`delete ${id}`);
    if (reply !== 'DELETED\r\n') this.fail(`delete ${id} (${job.possible[0]}) answered ${show(reply)}`);
    this.settleGone(job);
    this.model.acked.delete++;
  }

  private settleGone(job: TrackedJob): void {
    job.possible = ['gone'];
    this.model.jobs.delete(job.id);
    this.model.gone.push(job.id);
  }

  private async reserveAndAct(): Promise<void> {
    this.conn.send('reserve-with-timeout 0\r\n');
    const reply = await this.reply('reserve-with-timeout 0');
    if (reply === 'TIMED_OUT\r\n') return;
    const got = bodyOf(reply, 'RESERVED');
    if (got === null) this.fail(`reserve-with-timeout 0 answered ${show(reply)}`);
    const job = this.model.jobs.get(got.id);
    if (job === undefined || job.client !== this.index) this.fail(`reserved job ${got.id}, which this client never saw acknowledged`);
    if (job.possible.length !== 1 || job.possible[0] !== 'ready') this.fail(`reserved job ${got.id} whose state is ${job.possible.join('|')}`);
    if (!got.body.equals(job.body)) this.fail(`reserved job ${got.id} with a different body`);
    const r = this.prng.float();
    if (r < 0.5) {
      this.pool.remove(job.id);
      job.possible = ['ready', 'buried'];
      this.conn.send(`bury ${job.id} ${this.prng.range(0, 100)}\r\n`);
      const b = await this.reply(`bury ${job.id}`);
      if (b !== 'BURIED\r\n') this.fail(`bury ${job.id} answered ${show(b)}`);
      job.possible = ['buried'];
      this.pool.add(job.id);
      this.model.acked.bury++;
    } else if (r < 0.75) {
      // A release records its counters; the durable state stays ready either way.
      this.conn.send(`release ${job.id} ${this.prng.range(0, 100)} 0\r\n`);
      const b = await this.reply(`release ${job.id}`);
      if (b !== 'RELEASED\r\n') this.fail(`release ${job.id} answered ${show(b)}`);
      this.model.acked.release++;
    } else {
      this.pool.remove(job.id);
      job.possible = ['ready', 'gone'];
      this.conn.send(`delete ${job.id}\r\n`);
      const b = await this.reply(`delete ${job.id}`);
      if (b !== 'DELETED\r\n') this.fail(`delete of reserved ${job.id} answered ${show(b)}`);
      this.settleGone(job);
      this.model.acked.delete++;
    }
  }

  private async kickOne(): Promise<void> {
    let job: TrackedJob | undefined;
    for (let tries = 0; tries < 6 && job === undefined; tries++) {
      const candidate = this.model.jobs.get(this.pool.pick(this.prng))!;
      if (candidate.possible[0] === 'buried') job = candidate;
    }
    if (job === undefined) return this.puts(1);
    this.pool.remove(job.id);
    job.possible = ['buried', 'ready'];
    this.conn.send(`kick-job ${job.id}\r\n`);
    const reply = await this.reply(`kick-job ${job.id}`);
    if (reply !== 'KICKED\r\n') this.fail(`kick-job ${job.id} answered ${show(reply)}`);
    job.possible = ['ready'];
    this.pool.add(job.id);
    this.model.acked.kick++;
  }
}

/**
 * Checks a freshly started server against the model, settles every uncertain job to what the
 * server shows, and returns the problems found.
 */
async function verify(port: number, model: Model, checkAllGone: boolean, label: string): Promise<string[]> {
  const errors: string[] = [];
  const c = await RawClient.connect(port);
  try {
    // A new put must get an id above every id seen so far (also above the ids of lost puts).
    const use = await c.call('use crash-probe\r\n');
    if (use !== 'USING crash-probe\r\n') errors.push(`${label}: use crash-probe answered ${show(use)}`);
    const ins = await c.call('put 0 0 10 5\r\nprobe\r\n');
    const m = /^INSERTED (\d+)\r\n$/.exec(ins);
    if (m === null) {
      errors.push(`${label}: probe put answered ${show(ins)}`);
      return errors;
    }
    const probeId = Number(m[1]);
    if (probeId <= model.maxSeenId) errors.push(`${label}: new put got id ${probeId}, not above the largest id seen (${model.maxSeenId})`);
    const del = await c.call(`delete ${probeId}\r\n`);
    if (del !== 'DELETED\r\n') errors.push(`${label}: delete of probe ${probeId} answered ${show(del)}`);

    // Ids handed out since the last sweep that no acknowledgement told us about: each must be
    // absent, or a put that was in flight at the kill (then it is adopted, as ready).
    const unknownIds: number[] = [];
    for (let id = model.sweptUpTo + 1; id < probeId; id++) if (!model.known.has(id)) unknownIds.push(id);
    const sweep = await pipelined(c, unknownIds.flatMap((id) => [`peek ${id}\r\n`, `stats-job ${id}\r\n`]));
    for (let i = 0; i < unknownIds.length; i++) {
      const id = unknownIds[i]!;
      const peek = sweep[2 * i]!;
      const st = sweep[2 * i + 1]!;
      if (peek === 'NOT_FOUND\r\n') continue;
      const found = bodyOf(peek, 'FOUND');
      if (found === null || found.id !== id) {
        errors.push(`${label}: peek ${id} answered ${show(peek)}`);
        continue;
      }
      const tag = tagOf(found.body);
      const sent = model.unacked.get(tag);
      if (sent === undefined || !sent.body.equals(found.body)) {
        errors.push(`${label}: job ${id} exists but no put in flight had its body (tag ${show(tag)})`);
        continue;
      }
      const state = yamlField(st, 'state');
      const tube = yamlField(st, 'tube');
      if (state !== 'ready' || tube !== tubeOf(sent.client)) {
        errors.push(`${label}: unacknowledged put ${id} came back as ${state} in ${tube}, expected ready in ${tubeOf(sent.client)}`);
      }
      model.unacked.delete(tag);
      model.adopted++;
      model.jobs.set(id, { id, client: sent.client, body: sent.body, possible: ['ready'] });
    }
    for (const id of unknownIds) model.see(id);
    // Puts in flight that did not come back never will: every id they could have had is swept.
    model.lostPuts += model.unacked.size;
    model.unacked.clear();
    model.see(probeId);
    model.sweptUpTo = probeId;

    // Every tracked job: its body, and a state it may have.
    const tracked = [...model.jobs.values()];
    const replies = await pipelined(c, tracked.flatMap((j) => [`peek ${j.id}\r\n`, `stats-job ${j.id}\r\n`]));
    for (let i = 0; i < tracked.length; i++) {
      const job = tracked[i]!;
      const peek = replies[2 * i]!;
      const st = replies[2 * i + 1]!;
      let observed: Durable;
      if (peek === 'NOT_FOUND\r\n') {
        observed = 'gone';
        if (st !== 'NOT_FOUND\r\n') errors.push(`${label}: job ${job.id}: peek says NOT_FOUND, stats-job says ${show(st)}`);
      } else {
        const found = bodyOf(peek, 'FOUND');
        if (found === null || found.id !== job.id) {
          errors.push(`${label}: peek ${job.id} answered ${show(peek)}`);
          continue;
        }
        if (!found.body.equals(job.body)) {
          errors.push(`${label}: job ${job.id} has a different body (${found.body.length} bytes, tag ${show(tagOf(found.body))}; expected ${job.body.length} bytes, tag ${show(tagOf(job.body))})`);
        }
        const state = yamlField(st, 'state');
        if (state !== 'ready' && state !== 'buried') {
          errors.push(`${label}: job ${job.id} is in state ${state}`);
          continue;
        }
        observed = state;
        const tube = yamlField(st, 'tube');
        if (tube !== tubeOf(job.client)) errors.push(`${label}: job ${job.id} is in tube ${tube}, expected ${tubeOf(job.client)}`);
      }
      if (!job.possible.includes(observed)) {
        const what = job.possible.length === 1 ? `acknowledged as ${job.possible[0]}` : `expected one of ${job.possible.join('|')}`;
        errors.push(`${label}: job ${job.id} (tag ${show(tagOf(job.body))}) is ${observed}, ${what}`);
      }
      if (observed === 'gone') {
        model.jobs.delete(job.id);
        model.gone.push(job.id);
      } else {
        job.possible = [observed];
      }
    }

    // Deleted jobs stay deleted: the ones since the last check (all of them at the end).
    const goneIds = model.gone.slice(checkAllGone ? 0 : model.goneCheckedUpTo);
    const goneReplies = await pipelined(c, goneIds.map((id) => `peek ${id}\r\n`));
    for (let i = 0; i < goneIds.length; i++) {
      if (goneReplies[i] !== 'NOT_FOUND\r\n') errors.push(`${label}: deleted job ${goneIds[i]} is back: peek answered ${show(goneReplies[i]!)}`);
    }
    model.goneCheckedUpTo = model.gone.length;

    // Each client's tube holds exactly the tracked jobs, nothing more.
    for (let client = 0; client < CLIENTS; client++) {
      let expected = 0;
      for (const job of model.jobs.values()) if (job.client === client) expected++;
      const st = await c.call(`stats-tube ${tubeOf(client)}\r\n`);
      let actual = 0;
      if (st !== 'NOT_FOUND\r\n') {
        for (const key of ['current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed', 'current-jobs-buried']) {
          actual += Number(yamlField(st, key) ?? NaN);
        }
      }
      if (actual !== expected) errors.push(`${label}: tube ${tubeOf(client)} holds ${actual} jobs, expected ${expected}`);
    }
  } finally {
    c.destroy();
  }
  return errors;
}

function serverArgs(dir: string, round: number): string[] {
  return round % 2 === 0 ? ['-b', dir] : ['-b', dir, '-f', '0'];
}

describe('binlog crash safety (SIGKILL under load)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-crash-'));
  let server: ServerProcess | null = null;

  afterAll(async () => {
    if (server !== null) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`keeps exactly the acknowledged changes across ${ROUNDS} SIGKILLs`, async () => {
    const seed = seedFromEnv('CRASH_SEED');
    console.log(`persistence-crash: CRASH_SEED=${seed} rounds=${ROUNDS} dir=${dir}`);
    const prng = new Prng(seed);
    const model = new Model();
    const started = performance.now();
    const log: string[] = [];

    for (let round = 0; round <= ROUNDS; round++) {
      const mode = round % 2 === 0 ? 'default fsync' : '-f 0';
      server = await startProcessServer('beanpole', { tcp: true }, serverArgs(dir, round));
      const port = (server.address as { port: number }).port;
      const label = round === 0 ? 'first start' : `restart after kill ${round}`;
      const errors = await verify(port, model, round === ROUNDS, label);
      expect(errors.slice(0, MAX_ERRORS_SHOWN), `${label} (seed ${seed}); server stderr:\n${server.stderr().slice(-2000)}`).toEqual([]);
      if (round === ROUNDS) {
        await server.stop();
        break;
      }

      model.rebuildPools();
      const before = { ...model.acked };
      let killed = false;
      const loadErrors: string[] = [];
      const conns = await Promise.all(Array.from({ length: CLIENTS }, () => RawClient.connect(port)));
      const clients = conns.map(
        (conn, i) => new LoadClient(i, round, conn, model, new Prng((seed ^ Math.imul(round + 1, 0x9e3779b1) ^ (i * 0x85ebca6b)) >>> 0), loadErrors, () => killed),
      );
      const running = Promise.all(clients.map((cl) => cl.run()));
      const killAfter = prng.range(KILL_AFTER_MS[0], KILL_AFTER_MS[1]);
      await new Promise((r) => setTimeout(r, killAfter));
      killed = true;
      server.signal('SIGKILL');
      await server.stop();
      await running;
      for (const conn of conns) conn.destroy();
      server = null;
      expect(loadErrors.slice(0, MAX_ERRORS_SHOWN), `load in round ${round} (seed ${seed})`).toEqual([]);

      let uncertain = 0;
      for (const job of model.jobs.values()) if (job.possible.length > 1) uncertain++;
      uncertain += model.unacked.size;
      model.uncertainAtKill += uncertain;
      const a = model.acked;
      log.push(
        `round ${round} (${mode}): killed after ${killAfter} ms; acked put ${a.put - before.put}, delete ${a.delete - before.delete}, ` +
          `bury ${a.bury - before.bury}, release ${a.release - before.release}, kick ${a.kick - before.kick}; ${uncertain} in flight at the kill`,
      );
    }
    server = null;
    const secs = ((performance.now() - started) / 1000).toFixed(1);
    console.log(log.join('\n'));
    console.log(
      `persistence-crash: ${ROUNDS} kills in ${secs} s; acknowledged ${JSON.stringify(model.acked)}; ` +
        `${model.uncertainAtKill} operations in flight at kills (unacknowledged puts: ${model.adopted} kept, ${model.lostPuts} lost); ${model.jobs.size} jobs live at the end; seed ${seed}`,
    );
    expect(model.acked.put).toBeGreaterThan(ROUNDS);
  }, Math.max(120_000, ROUNDS * 6_000));
});
