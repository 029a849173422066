/**
 * Torn tails and corruption in the binlog, with real server processes. A directory is filled
 * with a few hundred jobs (distinct bodies, every id noted), the server is killed, and copies of
 * the directory are damaged at seeded random offsets (TORN_SEED=n reproduces a run) and at
 * chosen places in a record's header and payload:
 *
 *  (a) truncated at the offset: every job whose record lies wholly before the cut is back with
 *      its exact body;
 *  (b) a few bytes overwritten with garbage (the file keeps its size): at most the damaged
 *      record is lost; the jobs after it in the same file, and in later files, survive.
 *
 * In every case the server starts, names the file and the offset on stderr, and hands out ids
 * above every id ever issued (even when the records holding the highest ids were cut off).
 * The same holds for damage in an older segment (small -s, two runs, so several files).
 *
 * The test reads the segments itself (32-byte header, then `magic u32 | length u32 | crc u32 |
 * payload`, see server/persistence/format.ts) to know which job each byte belongs to.
 */
import { once } from 'node:events';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prng, seedFromEnv } from './support/prng.js';
import { RawClient } from './support/raw-client.js';
import { startProcessServer, type ServerProcess } from './support/servers.js';

const JOBS = 200;
const SEGMENT_HEADER_BYTES = 32;
const RECORD_MAGIC = 0x31525042; // "BPR1"
const KIND_JOB = 1;
const TUBES = ['torn-a', 'torn-b', 'default', 'torn.c'];

const SEED = seedFromEnv('TORN_SEED');
console.log(`persistence-torn: seed ${SEED} (TORN_SEED=${SEED} to reproduce)`);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(label: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `beanpole-torn-${label}-`));
  dirs.push(dir);
  return dir;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Stops a server with `sig` and waits until it is gone. */
async function stopWith(server: ServerProcess, sig: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const child = server.process;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  server.signal(sig);
  const timer = setTimeout(() => server.signal('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** A server, stopped with SIGKILL however the test ends. */
async function withServer<T>(dir: string, args: readonly string[], fn: (server: ServerProcess) => Promise<T>): Promise<T> {
  const server = await startProcessServer('beanpole', { tcp: true }, ['-b', dir, ...args]);
  try {
    return await fn(server);
  } finally {
    await stopWith(server, 'SIGKILL');
  }
}

async function connect(server: ServerProcess): Promise<RawClient> {
  return RawClient.connect((server.address as { port: number }).port);
}

/** Sends all `commands` in one write and reads as many replies. */
async function pipeline(c: RawClient, commands: readonly Buffer[]): Promise<string[]> {
  c.send(Buffer.concat(commands));
  const replies: string[] = [];
  for (let i = 0; i < commands.length; i++) replies.push(await c.reply(10_000));
  return replies;
}

function putCommand(body: Buffer, pri = 100): Buffer {
  return Buffer.concat([Buffer.from(`put ${pri} 0 120 ${body.length}\r\n`, 'latin1'), body, Buffer.from('\r\n', 'latin1')]);
}

/** Puts `count` jobs with distinct bodies over the tubes; returns id -> body. */
async function fill(server: ServerProcess, rng: Prng, count: number, label: string): Promise<Map<number, Buffer>> {
  const c = await connect(server);
  try {
    const out = new Map<number, Buffer>();
    for (let t = 0; t < TUBES.length; t++) {
      const tube = TUBES[t]!;
      const n = Math.floor(count / TUBES.length) + (t < count % TUBES.length ? 1 : 0);
      const bodies = Array.from({ length: n }, (_, i) => {
        // Distinct: a label and serial number first; then random bytes, CRLF and magic-like bytes included.
        const head = Buffer.from(`${label}:${tube}:${i}:`, 'latin1');
        return Buffer.concat([head, rng.bytes(rng.range(0, 300)), rng.chance(0.2) ? Buffer.from('\r\nBPR1', 'latin1') : Buffer.alloc(0)]);
      });
      const replies = await pipeline(c, [Buffer.from(`use ${tube}\r\n`, 'latin1'), ...bodies.map((b) => putCommand(b, rng.int(2000)))]);
      expect(replies[0]).toBe(`USING ${tube}\r\n`);
      bodies.forEach((body, i) => {
        const m = /^INSERTED (\d+)\r\n$/.exec(replies[i + 1]!);
        if (m === null) throw new Error(`put: ${JSON.stringify(replies[i + 1])}`);
        out.set(Number(m[1]), body);
      });
    }
    return out;
  } finally {
    c.destroy();
  }
}

// ---- reading segments -----------------------------------------------------------------------------

interface Rec {
  /** Segment file name. */
  file: string;
  offset: number;
  size: number;
  kind: number;
  id: number;
}

function segmentNames(dir: string): string[] {
  return readdirSync(dir)
    .filter((n) => /^binlog\.\d+\.bp$/.test(n))
    .sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1]));
}

/** Every record of an undamaged segment. */
function readSegment(dir: string, file: string): Rec[] {
  const buf = readFileSync(path.join(dir, file));
  const recs: Rec[] = [];
  let at = SEGMENT_HEADER_BYTES;
  while (at + 12 <= buf.length) {
    const magic = buf.readUInt32LE(at);
    const length = buf.readUInt32LE(at + 4);
    if (magic === 0 && length === 0) break;
    if (magic !== RECORD_MAGIC || at + 12 + length > buf.length) throw new Error(`${file}:${at}: not a record`);
    const kind = buf[at + 12]!;
    // JOB and STATE keep the id at payload offset 8, DELETE at 4 (ids here fit in 32 bits).
    const id = buf.readUInt32LE(at + 12 + (kind === KIND_JOB || kind === 2 ? 8 : 4));
    recs.push({ file, offset: at, size: 12 + length, kind, id });
    at += 12 + length;
  }
  return recs;
}

interface Origin {
  dir: string;
  jobs: Map<number, Buffer>;
  maxId: number;
  /** JOB records by segment, in file order. */
  records: Map<string, Rec[]>;
  /** Segments that hold records, oldest first. */
  withData: string[];
}

function describeOrigin(dir: string, jobs: Map<number, Buffer>): Origin {
  const records = new Map<string, Rec[]>();
  const seen = new Set<number>();
  for (const name of segmentNames(dir)) {
    const recs = readSegment(dir, name);
    for (const r of recs) {
      expect(r.kind, `${name}:${r.offset}: only puts were made`).toBe(KIND_JOB);
      expect(jobs.has(r.id), `${name}:${r.offset}: record of an unknown job ${r.id}`).toBe(true);
      expect(seen.has(r.id), `job ${r.id} recorded twice`).toBe(false);
      seen.add(r.id);
    }
    records.set(name, recs);
  }
  expect(seen.size, 'every job has exactly one record').toBe(jobs.size);
  const withData = [...records].filter(([, recs]) => recs.length > 0).map(([name]) => name);
  return { dir, jobs, maxId: Math.max(...jobs.keys()), records, withData };
}

// ---- damage and checks ----------------------------------------------------------------------------

interface Damage {
  label: string;
  file: string;
  /** Byte offset of the damage in `file`. */
  offset: number;
  mode: 'truncate' | 'garbage';
  /** Bytes overwritten (garbage): each is XORed with a non-zero value, so each one changes. */
  xor?: Buffer;
}

interface Expectation {
  /** Must be back, with the exact body. */
  present: Set<number>;
  /** Must be gone. */
  absent: Set<number>;
  /** Either gone or back with the exact body. */
  either: Set<number>;
  /** Offset of the damaged record that stderr must name, or null when the cut is on a record boundary. */
  reportAt: number | null;
}

/** What a damage must and may cost, from the origin's record map. */
function expectationFor(origin: Origin, d: Damage): Expectation {
  const present = new Set<number>();
  const absent = new Set<number>();
  const either = new Set<number>();
  let reportAt: number | null = null;
  for (const [file, recs] of origin.records) {
    for (const r of recs) {
      const end = r.offset + r.size;
      if (file !== d.file || end <= d.offset) present.add(r.id);
      else if (d.mode === 'truncate') {
        absent.add(r.id);
        if (r.offset < d.offset) reportAt = r.offset;
      } else if (r.offset <= d.offset) {
        either.add(r.id);
        reportAt = r.offset;
      } else present.add(r.id);
    }
  }
  return { present, absent, either, reportAt };
}

function applyDamage(dir: string, d: Damage): void {
  const file = path.join(dir, d.file);
  if (d.mode === 'truncate') {
    truncateSync(file, d.offset);
    return;
  }
  const buf = readFileSync(file);
  for (let i = 0; i < d.xor!.length; i++) buf[d.offset + i]! ^= d.xor![i]!;
  writeFileSync(file, buf);
}

function logMessages(stderr: string): string[] {
  const out: string[] = [];
  for (const line of stderr.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const parsed = JSON.parse(line) as { msg?: unknown };
      if (typeof parsed.msg === 'string') out.push(parsed.msg);
    } catch {
      out.push(line);
    }
  }
  return out;
}

/** `1-3, 7` for [1, 2, 3, 7]. */
function ranges(ids: number[]): string {
  const sorted = [...ids].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

/** Peeks every job and checks it against the expectation; returns the problems found. */
async function checkJobs(c: RawClient, origin: Origin, want: Expectation, extra: ReadonlyMap<number, Buffer>): Promise<string[]> {
  const ids = [...origin.jobs.keys(), ...extra.keys()];
  const replies = await pipeline(
    c,
    ids.map((id) => Buffer.from(`peek ${id}\r\n`, 'latin1')),
  );
  const lost: number[] = [];
  const wrong: string[] = [];
  const resurrected: number[] = [];
  ids.forEach((id, i) => {
    const reply = replies[i]!;
    const body = origin.jobs.get(id) ?? extra.get(id)!;
    const found = `FOUND ${id} ${body.length}\r\n${body.toString('latin1')}\r\n`;
    if (reply === found) {
      if (want.absent.has(id)) resurrected.push(id);
    } else if (reply === 'NOT_FOUND\r\n') {
      if (extra.has(id) || want.present.has(id)) lost.push(id);
    } else {
      wrong.push(`job ${id}: ${JSON.stringify(reply.slice(0, 60))}`);
    }
  });
  const problems: string[] = [];
  if (lost.length > 0) {
    problems.push(`${lost.length} jobs whose records were intact are gone: ids ${ranges(lost)} (damaged: ${ranges([...want.either]) || 'none'})`);
  }
  if (resurrected.length > 0) problems.push(`jobs cut off are back: ids ${ranges(resurrected)}`);
  for (const w of wrong) problems.push(`wrong reply to peek: ${w}`);
  return problems;
}

async function putOne(c: RawClient, body: Buffer): Promise<number> {
  const reply = (await pipeline(c, [putCommand(body)]))[0]!;
  const m = /^INSERTED (\d+)\r\n$/.exec(reply);
  if (m === null) throw new Error(`put after recovery: ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

async function waitForRecovered(server: ServerProcess): Promise<void> {
  const deadline = Date.now() + 3000;
  while (!/binlog: recovered \d+ jobs/.test(server.stderr())) {
    if (Date.now() > deadline) throw new Error(`no "binlog: recovered" line on stderr:\n${server.stderr()}`);
    await sleep(10);
  }
}

/**
 * Copies the origin, damages the copy, starts a server on it and checks what came back.
 * With `again`, also puts a job, kills the server, and checks everything once more after a
 * second start. Returns the problems found (empty when all is well).
 */
async function runTrial(origin: Origin, d: Damage, again: boolean): Promise<string[]> {
  const dir = tempDir('trial');
  cpSync(origin.dir, dir, { recursive: true });
  applyDamage(dir, d);
  const want = expectationFor(origin, d);
  const where = `${d.label}: ${d.mode} ${d.file} at ${d.offset}${d.xor !== undefined ? ` (${d.xor.length} bytes)` : ''}`;
  const problems: string[] = [];
  const extra = new Map<number, Buffer>();
  let issued = origin.maxId;
  try {
    await withServer(dir, [], async (server) => {
      await waitForRecovered(server);
      const messages = logMessages(server.stderr());
      const binlogLines = messages.filter((m) => m.startsWith('binlog: ') && !m.startsWith('binlog: recovered'));
      if (want.reportAt !== null) {
        const mark = `${path.join(dir, d.file)}:${want.reportAt}:`;
        if (!binlogLines.some((m) => m.includes(mark))) {
          problems.push(`stderr does not name ${mark} (the damaged record); binlog lines: ${JSON.stringify(binlogLines)}`);
        }
      }
      for (const m of binlogLines) {
        if (!/binlog\.\d+\.bp:\d+: /.test(m)) problems.push(`a binlog problem line names no file and offset: ${m}`);
      }
      const c = await connect(server);
      try {
        const jobProblems = await checkJobs(c, origin, want, extra);
        if (jobProblems.length > 0) jobProblems.push(`the server said: ${JSON.stringify(binlogLines)}`);
        problems.push(...jobProblems);
        const body = Buffer.from(`after-damage-${d.label}`, 'latin1');
        const id = await putOne(c, body);
        if (id <= issued) problems.push(`new put got id ${id}, but ids up to ${issued} were issued before`);
        issued = Math.max(issued, id);
        extra.set(id, body);
      } finally {
        c.destroy();
      }
    });
    if (again) {
      await withServer(dir, [], async (server) => {
        await waitForRecovered(server);
        const c = await connect(server);
        try {
          problems.push(...(await checkJobs(c, origin, want, extra)).map((p) => `after a second restart: ${p}`));
          const id = await putOne(c, Buffer.from('second', 'latin1'));
          if (id <= issued) problems.push(`after a second restart: new put got id ${id}, but ids up to ${issued} were issued`);
        } finally {
          c.destroy();
        }
      });
    }
  } catch (err) {
    problems.push(`trial failed: ${(err as Error).message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return problems.map((p) => `[${where}] ${p}`);
}

/** A random damage inside the data of `file`. */
function randomDamage(rng: Prng, origin: Origin, file: string, mode: Damage['mode'], label: string): Damage {
  const recs = origin.records.get(file)!;
  const rec = rng.pick(recs);
  if (mode === 'truncate') return { label, file, offset: rec.offset + rng.int(rec.size), mode };
  const offset = rec.offset + rng.int(rec.size);
  // Inside the one record, so it is the only one damaged.
  const len = rng.range(1, Math.min(16, rec.offset + rec.size - offset));
  const xor = Buffer.from(Array.from({ length: len }, () => rng.range(1, 255)));
  return { label, file, offset, mode, xor };
}

/** Garbage at a chosen place of record `rec`. */
function aimedGarbage(rec: Rec, label: string, at: number, xor: number[]): Damage {
  return { label, file: rec.file, offset: rec.offset + at, mode: 'garbage', xor: Buffer.from(xor) };
}

function report(problems: string[]): void {
  expect(problems, `seed ${SEED}:\n${problems.join('\n')}`).toEqual([]);
}

// ---- the suites ----------------------------------------------------------------------------------

describe('damage in the newest segment', () => {
  let origin: Origin;
  const rng = new Prng(SEED);

  beforeAll(async () => {
    const dir = tempDir('origin');
    const jobs = await withServer(dir, [], (server) => fill(server, rng, JOBS, 'n'));
    origin = describeOrigin(dir, jobs);
    expect(origin.withData.length).toBeGreaterThan(0);
  });

  const newest = (): string => origin.withData.at(-1)!;

  it('(a) truncated at random offsets: the jobs before the cut are back, ids are not reused', async () => {
    const problems: string[] = [];
    for (let i = 0; i < 6; i++) {
      problems.push(...(await runTrial(origin, randomDamage(rng, origin, newest(), 'truncate', `cut ${i}`), i === 0)));
    }
    report(problems);
  });

  it('(a) truncated inside a record header, inside a payload and one byte short', async () => {
    const recs = origin.records.get(newest())!;
    const mid = recs[Math.floor(recs.length / 2)]!;
    const last = recs.at(-1)!;
    const cuts: Damage[] = [
      { label: 'cut in a header', file: mid.file, offset: mid.offset + 5, mode: 'truncate' },
      { label: 'cut in a payload', file: mid.file, offset: mid.offset + 40, mode: 'truncate' },
      { label: 'last record one byte short', file: last.file, offset: last.offset + last.size - 1, mode: 'truncate' },
      { label: 'cut after the first record header', file: recs[0]!.file, offset: recs[0]!.offset + 12, mode: 'truncate' },
    ];
    const problems: string[] = [];
    for (const d of cuts) problems.push(...(await runTrial(origin, d, false)));
    report(problems);
  });

  it('(b) garbage at random offsets: only the damaged record is lost', async () => {
    const problems: string[] = [];
    for (let i = 0; i < 6; i++) {
      problems.push(...(await runTrial(origin, randomDamage(rng, origin, newest(), 'garbage', `garbage ${i}`), i === 0)));
    }
    report(problems);
  });

  // One trial per field of a record in the middle of the file, so each way of failing a check
  // (magic, length, checksum, contents) is covered whatever the seed.
  it.each([
    ['magic', 0, [0xff]],
    ['length, low byte (still inside the file)', 4, [0x01]],
    ['length, third byte (+16 MiB: past the end of the file)', 7, [0x01]],
    ['length, to zero', 4, [0xff, 0xff, 0xff, 0xff]],
    ['checksum', 8, [0x80]],
    ['kind byte', 12, [0x07]],
    ['id', 20, [0x01]],
    ['body, last byte', -1, [0x20]],
  ] as const)('(b) garbage in a middle record: %s', async (name, at, xor) => {
    const recs = origin.records.get(newest())!;
    const mid = recs[Math.floor(recs.length / 2)]!;
    const d = aimedGarbage(mid, name, at >= 0 ? at : mid.size + at, [...xor]);
    if (xor.length === 4) {
      // XORed with themselves: the length bytes become exactly 0.
      d.xor = Buffer.from(readFileSync(path.join(origin.dir, mid.file)).subarray(mid.offset + 4, mid.offset + 8));
    }
    report(await runTrial(origin, d, false));
  });

  it.each([
    ['magic and length zeroed (looks like the end of the data)', 8],
    ['the whole record zeroed', -1],
  ] as const)('(b) a middle record: %s', async (name, bytes) => {
    const recs = origin.records.get(newest())!;
    const mid = recs[Math.floor(recs.length / 2)]!;
    const n = bytes > 0 ? bytes : mid.size;
    // XORed with themselves: those bytes become zeros.
    const xor = Buffer.from(readFileSync(path.join(origin.dir, mid.file)).subarray(mid.offset, mid.offset + n));
    report(await runTrial(origin, { label: name, file: mid.file, offset: mid.offset, mode: 'garbage', xor }, false));
  });
});

describe('damage in an older segment', () => {
  let origin: Origin;
  const rng = new Prng((SEED ^ 0x5eed) >>> 0);
  const SEGMENT = ['-s', '8192'];

  beforeAll(async () => {
    const dir = tempDir('origin-old');
    const first = await withServer(dir, SEGMENT, async (server) => {
      const jobs = await fill(server, rng, 120, 'o1');
      await stopWith(server, 'SIGTERM');
      return jobs;
    });
    const second = await withServer(dir, SEGMENT, (server) => fill(server, rng, 80, 'o2'));
    const jobs = new Map([...first, ...second]);
    expect(jobs.size).toBe(200);
    origin = describeOrigin(dir, jobs);
    expect(origin.withData.length, `segments with data: ${origin.withData.join(', ')}`).toBeGreaterThanOrEqual(4);
  });

  /** Any segment with data except the newest. */
  const older = (): string[] => origin.withData.slice(0, -1);

  it('garbage in an older segment: later records there and in later segments survive', async () => {
    const problems: string[] = [];
    for (let i = 0; i < 4; i++) {
      const file = rng.pick(older());
      problems.push(...(await runTrial(origin, randomDamage(rng, origin, file, 'garbage', `old garbage ${i}`), i < 2)));
    }
    report(problems);
  });

  it('a truncated older segment: the records before the cut and every later segment survive', async () => {
    const problems: string[] = [];
    for (let i = 0; i < 3; i++) {
      const file = rng.pick(older());
      problems.push(...(await runTrial(origin, randomDamage(rng, origin, file, 'truncate', `old cut ${i}`), i < 2)));
    }
    report(problems);
  });

  it('a length field pointing past the end of an older segment', async () => {
    const recs = origin.records.get(older()[0]!)!;
    const mid = recs[Math.floor(recs.length / 2)]!;
    report(await runTrial(origin, aimedGarbage(mid, 'old length +16 MiB', 7, [0x01]), true));
  });
});
