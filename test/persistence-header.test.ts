/**
 * A damaged segment header, with real server processes: 50 jobs (ready, delayed and buried, in
 * two tubes) are written, the server stops, one byte of the segment header is flipped (in the
 * magic, the version, the index, the salt or the header checksum), and the server starts again.
 * Every job must be back in its state, with its priority, tube and body, found by the records'
 * own checksums; stderr must say the header was damaged and how many bytes were skipped; and a
 * second restart must find them all again.
 */
import { once } from 'node:events';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { startProcessServer, type ServerProcess } from './support/servers.js';

const JOBS = 50;

const dirs: string[] = [];
const servers: ServerProcess[] = [];
const clients: RawClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(label: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `beanpole-header-${label}-`));
  dirs.push(dir);
  return dir;
}

async function start(dir: string): Promise<ServerProcess> {
  const server = await startProcessServer('beanpole', { tcp: true }, ['-b', dir]);
  servers.push(server);
  return server;
}

/** SIGTERM, and a clean exit: everything written is synced and the lock released. */
async function stop(server: ServerProcess): Promise<void> {
  const exited = once(server.process, 'exit');
  server.signal('SIGTERM');
  await exited;
  expect(server.process.exitCode, server.stderr()).toBe(0);
  servers.splice(servers.indexOf(server), 1);
}

async function connect(server: ServerProcess): Promise<RawClient> {
  const c = await RawClient.connect((server.address as { port: number }).port);
  clients.push(c);
  return c;
}

/** The server's log messages (pino JSON lines on stderr). */
function messages(server: ServerProcess): string[] {
  return server
    .stderr()
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => (JSON.parse(l) as { msg: string }).msg);
}

/** Waits for the line that ends recovery (it is written before the server listens, but the pipe may lag). */
async function recoveredLine(server: ServerProcess): Promise<string> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const line = messages(server).find((m) => m.startsWith('binlog: recovered '));
    if (line !== undefined) return line;
    if (Date.now() > deadline) throw new Error(`no "binlog: recovered" line on stderr:\n${server.stderr()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Want {
  tube: string;
  state: 'ready' | 'delayed' | 'buried';
  pri: number;
  body: string;
}

async function expectReply(c: RawClient, command: string, want: string | RegExp): Promise<string> {
  const reply = await c.call(`${command}\r\n`);
  if (typeof want === 'string') expect(reply, command).toBe(`${want}\r\n`);
  else expect(reply, command).toMatch(want);
  return reply;
}

/** 50 jobs over two tubes: every fifth delayed for an hour, every fifth (offset) buried. */
async function fill(server: ServerProcess): Promise<Map<number, Want>> {
  const c = await connect(server);
  const jobs = new Map<number, Want>();
  for (let i = 0; i < JOBS; i++) {
    const tube = i % 2 === 0 ? 'header-a' : 'header-b';
    await expectReply(c, `use ${tube}`, `USING ${tube}`);
    const body = `job ${i}: ${'x'.repeat(i)}`;
    const delay = i % 5 === 0 ? 3600 : 0;
    const reply = await expectReply(c, `put ${100 + i} ${delay} 60 ${body.length}\r\n${body}`, /^INSERTED \d+\r\n$/);
    const id = Number(/\d+/.exec(reply)![0]);
    jobs.set(id, { tube, state: delay > 0 ? 'delayed' : 'ready', pri: 100 + i, body });
    if (i % 5 === 2) {
      await expectReply(c, `reserve-job ${id}`, new RegExp(`^RESERVED ${id} `));
      await expectReply(c, `bury ${id} ${100 + i}`, 'BURIED');
      jobs.get(id)!.state = 'buried';
    }
  }
  return jobs;
}

/** Every job is back with its state, priority, tube and body. */
async function expectJobs(server: ServerProcess, jobs: Map<number, Want>): Promise<void> {
  const c = await connect(server);
  for (const [id, want] of jobs) {
    const stats = await c.call(`stats-job ${id}\r\n`);
    expect(stats, `stats-job ${id}`).toMatch(/^OK \d+\r\n/);
    expect(stats, `job ${id}`).toContain(`\nstate: ${want.state}\n`);
    expect(stats, `job ${id}`).toContain(`\npri: ${want.pri}\n`);
    expect(stats, `job ${id}`).toContain(`\ntube: ${want.tube}\n`);
    await expectReply(c, `peek ${id}`, `FOUND ${id} ${want.body.length}\r\n${want.body}`);
  }
  const stats = await c.call('stats\r\n');
  const count = (state: string): number => [...jobs.values()].filter((j) => j.state === state).length;
  for (const state of ['ready', 'delayed', 'buried'] as const) expect(stats).toContain(`\ncurrent-jobs-${state}: ${count(state)}\n`);
}

describe('a damaged segment header', () => {
  let origin: string;
  let jobs: Map<number, Want>;
  let records: number;

  beforeAll(async () => {
    origin = tempDir('origin');
    const server = await start(origin);
    jobs = await fill(server);
    await stop(server);
    const segments = readdirSync(origin).filter((n) => /^binlog\.\d+\.bp$/.test(n));
    expect(segments, 'all 50 jobs in one segment').toEqual(['binlog.1.bp']);
    // 50 puts and the buries: the summary line counts them all.
    records = JOBS + [...jobs.values()].filter((j) => j.state === 'buried').length;
  });

  it.each([
    ['the magic', 5],
    ['the version', 8],
    ['the index', 12],
    ['createdAt', 20],
    ['the salt', 24],
    ['the salt, top byte', 27],
    ['the header checksum', 28],
  ] as const)('one byte flipped in %s (offset %i): every job is back, and stderr says what was skipped', async (_name, offset) => {
    const dir = tempDir(`flip-${offset}`);
    cpSync(origin, dir, { recursive: true });
    const file = path.join(dir, 'binlog.1.bp');
    const data = readFileSync(file);
    data[offset]! ^= 0x01;
    writeFileSync(file, data);

    const first = await start(dir);
    expect(await recoveredLine(first)).toMatch(new RegExp(`^binlog: recovered ${JOBS} jobs in \\d+ ms$`));
    const warnings = messages(first).filter((m) => m.startsWith('binlog: /'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`${file}:0: header damaged (header checksum mismatch`);
    expect(warnings[0]).toContain('its records were read by their own checksums');
    expect(warnings[0]).toContain(`${records} records (${JOBS} jobs) recovered, 32 bytes skipped`);
    await expectJobs(first, jobs);
    await stop(first);

    const second = await start(dir);
    expect(await recoveredLine(second)).toMatch(new RegExp(`^binlog: recovered ${JOBS} jobs in `));
    await expectJobs(second, jobs);
    // New ids continue above the recovered ones.
    const c = await connect(second);
    const reply = await expectReply(c, 'put 0 0 60 3\r\nnew', /^INSERTED \d+\r\n$/);
    expect(Number(/\d+/.exec(reply)![0])).toBeGreaterThan(Math.max(...jobs.keys()));
  });
});
