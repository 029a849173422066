/**
 * The benchmark harness (bench/): a quick real run against Beanpole (and beanstalkd when it is
 * installed) yields rates, latency percentiles (the cycle's at a paced rate it sustained, and with
 * its window full) and memory per job; a server that answers wrongly
 * or not at all fails the run instead of scoring; the reply reader cuts replies the same way
 * however the stream is split; the profile reader attributes time correctly. The Gearman rows take
 * their load from gmbench (built from its C source beside the repository) and report its CPU;
 * without that source they are skipped with one line saying why.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionCosts, type CpuProfile } from '../bench/profile-top.js';
import { summarize, textTable, type BenchDocument, type RunRecord } from '../bench/report.js';
import { GEARMAN_SCENARIOS } from '../bench/gearman-scenarios.js';
import { gearmandPath } from '../bench/targets.js';
import { gmbenchBinary, runGmbench } from '../bench/load/gmbench.js';
import { PACE_TOLERANCE, PACED_RATE } from '../bench/scenarios.js';
import { InvalidReplyError, ReplyReader, isInserted } from '../bench/load/wire.js';
import { hasBeanstalkd } from './support/servers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MAIN = path.join(ROOT, 'dist', 'bench', 'main.js');

let tmp = '';
beforeAll(() => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build:server first`);
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-test-'));
});
afterAll(() => {
  if (tmp !== '') rmSync(tmp, { recursive: true, force: true });
});

interface BenchRun {
  code: number | null;
  stdout: string;
  stderr: string;
  doc: BenchDocument | null;
}

/** Runs the compiled harness with `args` and a JSON path of its own. */
function bench(args: string[], name: string, timeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<BenchRun> {
  const json = path.join(tmp, `${name}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args, '--json', json], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bench ${args.join(' ')} ran longer than ${timeoutMs} ms:\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const doc = existsSync(json) ? (JSON.parse(readFileSync(json, 'utf8')) as BenchDocument) : null;
      resolve({ code, stdout, stderr, doc });
    });
  });
}

function runOf(doc: BenchDocument, scenario: string, target: string): RunRecord {
  const run = doc.runs.find((r) => r.scenario === scenario && r.target === target);
  if (run === undefined) throw new Error(`no ${scenario} run for ${target}`);
  expect(run.error, `${scenario} ${target}`).toBeNull();
  return run;
}

/** p50 > 0 and p50 <= p99 <= p99.9, for the metrics `${prefix}p50Us` ... */
function expectPercentiles(run: RunRecord, prefix = ''): void {
  const at = (key: string): number => {
    const v = run.metrics[`${prefix}${key}`];
    expect(v, `${run.scenario} ${run.target} ${prefix}${key}`).toBeTypeOf('number');
    return v!;
  };
  expect(at('p50Us')).toBeGreaterThan(0);
  expect(at('p99Us')).toBeGreaterThanOrEqual(at('p50Us'));
  expect(at('p999Us')).toBeGreaterThanOrEqual(at('p99Us'));
}

/** The cycle's paced phase ran at its target rate (puts and deletes), and its latency is reported. */
function expectPaced(run: RunRecord, target: number): void {
  expect(run.info['paced.targetRate']).toBe(target);
  expect(run.info['paced.status'], `${run.scenario} ${run.target} did not sustain ${target} jobs/s`).toBe('sustained');
  for (const key of ['paced.rate', 'paced.putRate']) {
    expect(Math.abs(run.metrics[key]! - target), `${run.scenario} ${run.target} ${key} ${run.metrics[key]}`).toBeLessThanOrEqual(PACE_TOLERANCE * target);
  }
  expectPercentiles(run, 'paced.');
  expect(run.metrics['paced.samples']).toBeGreaterThan(0);
}

describe('npm run bench -- --quick', () => {
  it('measures rates, latency percentiles and memory per job for each server', async () => {
    const r = await bench(['--quick', '--only', 'put,cycle,one-connection,fill-100B'], 'quick', 110_000);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const doc = r.doc!;
    const targets = hasBeanstalkd() ? ['beanpole', 'beanstalkd'] : ['beanpole'];
    for (const target of targets) {
      expect(runOf(doc, 'put', target).metrics.rate).toBeGreaterThan(0);
      const cycle = runOf(doc, 'cycle', target);
      expect(cycle.metrics.rate).toBeGreaterThan(0);
      expectPercentiles(cycle);
      expectPaced(cycle, PACED_RATE);
      const one = runOf(doc, 'one-connection', target);
      expect(one.metrics.rate).toBeGreaterThan(0);
      expectPercentiles(one);
      expect(runOf(doc, 'fill-100B', target).metrics.bytesPerJob).toBeGreaterThan(0);
    }
    // Pinned runs really put the server on the CPU the plan says (read back from /proc).
    const mode = doc.modes[0]!;
    if (mode.mode === 'pinned') expect(runOf(doc, 'put', 'beanpole').info.serverCpus).toBe(mode.serverCpus);
    const put = doc.summary.find((s) => s.scenario === 'put' && s.metric === 'rate')!;
    expect(put.beanpole).toBeGreaterThan(0);
    if (hasBeanstalkd()) expect(put.ratio).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/put\s+\w+\s+puts\/s/);
    // The paced rows are in the table, labelled with their rate, and hold a number for each server.
    const pacedP99 = doc.summary.find((s) => s.scenario === 'cycle' && s.metric === 'paced.p99Us')!;
    expect(pacedP99.label).toBe('put→reserve p99 µs at 10,000 jobs/s');
    expect(pacedP99.beanpole).toBeGreaterThan(0);
    if (hasBeanstalkd()) expect(pacedP99.beanstalkd).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/cycle\s+\w+\s+put→reserve p99 µs at 10,000 jobs\/s/);
    expect(r.stdout).toMatch(/cycle\s+\w+\s+put→reserve p99 µs, window full/);
  }, 120_000);
});

/** gmbench's source where the bench looks for it (CI has the shared tools beside the repository). */
const GMBENCH_SRC = process.env.GMBENCH_SRC ?? path.join(ROOT, '..', 'shared', 'tools', 'gmbench', 'gmbench.c');

describe('npm run bench -- --quick: the Gearman rows', () => {
  it.skipIf(!existsSync(GMBENCH_SRC))('run gmbench against each server and report its CPU and the server\'s', async () => {
    const r = await bench(['--quick', '--only', 'gearman-submit,gearman-echo'], 'gearman', 60_000);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const doc = r.doc!;
    const targets = gearmandPath() !== null ? ['beanpole', 'gearmand'] : ['beanpole'];
    for (const scenario of ['gearman-submit', 'gearman-echo']) {
      for (const target of targets) {
        const run = runOf(doc, scenario, target);
        expect(run.info.generator).toBe('gmbench');
        expect(run.metrics.rate).toBeGreaterThan(0);
        expect(run.metrics.p99Us).toBeGreaterThanOrEqual(run.metrics.p50Us!);
        expect(run.info.generatorCpuPct).toBeTypeOf('number');
        // A tenth-second run can fall between two clock ticks of the server's CPU time.
        expect(run.info.serverCpuPct).toBeGreaterThanOrEqual(0);
        expect(run.info.generatorBound).toBe((run.info.generatorCpuPct as number) >= 90);
        // compare-gm.sh's --quick: a tenth of its job counts.
        expect(run.info.jobs).toBe(scenario === 'gearman-submit' ? 100_000 : 5_000);
        if (doc.modes[0]!.mode === 'pinned') expect(run.info.generatorCpus).toBe(doc.modes[0]!.generatorCpus);
      }
    }
    expect(r.stderr).toMatch(/gearman-submit round 1\/1 beanpole: .*\(cpu: server [\d.]+% on \S+, gmbench [\d.]+% on/);
  }, 70_000);

  it('are skipped with one line saying why when gmbench\'s source is missing', async () => {
    const missing = path.join(tmp, 'no-such-dir', 'gmbench.c');
    const r = await bench(['--quick', '--only', 'gearman-echo'], 'gearman-missing', 30_000, { GMBENCH_SRC: missing });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.doc!.runs).toEqual([]);
    expect(r.doc!.notes).toEqual([`Gearman rows skipped: gmbench's source is not at ${missing} (set GMBENCH_SRC to gmbench.c)`]);
    expect(r.stdout.split('\n').filter((l) => l.includes('Gearman rows skipped'))).toHaveLength(1);
  }, 40_000);

  it.skipIf(!existsSync(GMBENCH_SRC))('fail when the server answers wrongly (gmbench reports an error)', async () => {
    // A Gearman stand-in that answers each ECHO_REQ with the right size but the wrong bytes.
    const server = net.createServer((sock) => {
      let pending = Buffer.alloc(0);
      sock.on('error', () => undefined);
      sock.on('data', (d: Buffer) => {
        pending = Buffer.concat([pending, d]);
        while (pending.length >= 12 && pending.length >= 12 + pending.readUInt32BE(8)) {
          const size = pending.readUInt32BE(8);
          const reply = Buffer.alloc(12 + size, 'z');
          reply.write('\0RES', 0, 'latin1');
          reply.writeUInt32BE(17, 4); // ECHO_RES
          reply.writeUInt32BE(size, 8);
          sock.write(reply);
          pending = pending.subarray(12 + size);
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const gm = gmbenchBinary();
      if (!('path' in gm)) throw new Error(gm.missing);
      const port = (server.address() as net.AddressInfo).port;
      await expect(runGmbench(gm.path, ['-s', 'echo', '--jobs', '100', '--size', '100'], port, null, 5)).rejects.toThrow(/gmbench .*(failed|status FAIL)/);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 30_000);

  it('flag a summary row whose generator was at 90% of its core or more', () => {
    const run = (target: 'beanpole' | 'gearmand', generatorBound: boolean): RunRecord => ({
      scenario: 'gearman-echo',
      mode: 'pinned',
      target,
      round: 1,
      error: null,
      metrics: { rate: 1000, p50Us: 10, p99Us: 20 },
      info: { generator: 'gmbench', generatorCpuPct: generatorBound ? 95 : 40, generatorBound },
      wallMs: 1,
    });
    const echo = GEARMAN_SCENARIOS.filter((s) => s.name === 'gearman-echo');
    const rows = summarize(echo, [run('beanpole', false), run('gearmand', true)]);
    expect(rows.map((r) => r.generatorBound)).toEqual([['gearmand'], ['gearmand'], ['gearmand']]);
    expect(textTable(rows)).toMatch(/round trips\/s .* generator-bound \(gearmand\)/);
    expect(summarize(echo, [run('beanpole', false), run('gearmand', false)])[0]!.generatorBound).toEqual([]);
  });
});

/**
 * A deliberately broken beanstalkd stand-in: answers `use` properly and each put (body skipped)
 * with `putReply`, or not at all when it is null.
 */
function brokenServer(putReply: string | null): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer((sock) => {
    let pending = Buffer.alloc(0);
    sock.on('error', () => undefined);
    sock.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      for (;;) {
        const nl = pending.indexOf('\r\n');
        if (nl < 0) return;
        const line = pending.toString('latin1', 0, nl);
        const put = /^put \d+ \d+ \d+ (\d+)$/.exec(line);
        const need = put === null ? nl + 2 : nl + 2 + Number(put[1]) + 2;
        if (pending.length < need) return;
        pending = pending.subarray(need);
        if (line.startsWith('use ')) sock.write(`USING ${line.slice(4)}\r\n`);
        else if (put !== null && putReply !== null) sock.write(putReply);
        else if (put === null) sock.write('UNKNOWN_COMMAND\r\n');
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () => new Promise<void>((r) => server.close(() => r())),
      }),
    ),
  );
}

describe('a broken server cannot score', () => {
  it.each([
    ['INSERTED x', 'INSERTED x\r\n', /put: got "INSERTED x"/],
    ['INSERTED without CR', 'INSERTED 7\n', /not ended by CRLF/],
    ['no reply to put', null, /no put completed/],
  ])('%s fails the put scenario', async (name, reply, message) => {
    const server = await brokenServer(reply);
    try {
      const r = await bench(['--only', 'put', '--rounds', '1', '--seconds', '0.5', '--target-port', String(server.port)], `broken-${name.replace(/\W/g, '')}`, 30_000);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toMatch(/FAILED put/);
      const run = r.doc!.runs.find((x) => x.scenario === 'put')!;
      expect(run.error).toMatch(message);
      expect(run.metrics).toEqual({});
    } finally {
      await server.close();
    }
  }, 40_000);
});

describe('ReplyReader', () => {
  const stream = Buffer.from('INSERTED 1\r\nRESERVED 7 5\r\nhello\r\nDELETED\r\nRESERVED 8 0\r\n\r\nTIMED_OUT\r\n', 'latin1');
  const expected = ['INSERTED 1', 'RESERVED 7 5|hello', 'DELETED', 'RESERVED 8 0|', 'TIMED_OUT'];

  function read(chunks: Buffer[]): string[] {
    const out: string[] = [];
    const reader = new ReplyReader((buf, ls, le, bs, be) => {
      out.push(buf.toString('latin1', ls, le) + (bs < 0 ? '' : `|${buf.toString('latin1', bs, be)}`));
    }, 100);
    for (const c of chunks) {
      // The reader may keep only copies: the caller reuses its read buffer.
      const reused = Buffer.from(c);
      reader.push(reused);
      reused.fill(0);
    }
    expect(reader.buffered).toBe(0);
    return out;
  }

  it('gives the same replies whole, byte by byte, and split at every offset', () => {
    expect(read([stream])).toEqual(expected);
    expect(read([...stream].map((b) => Buffer.from([b])))).toEqual(expected);
    for (let i = 1; i < stream.length; i++) expect(read([stream.subarray(0, i), stream.subarray(i)]), `split at ${i}`).toEqual(expected);
  });

  it('rejects a body without its CRLF, a bare LF, a malformed RESERVED and an oversized body', () => {
    const bad = ['RESERVED 1 3\r\nabcd\r\n', 'DELETED\n', 'RESERVED x 3\r\nabc\r\n', 'RESERVED 1 101\r\n'];
    for (const s of bad) expect(() => new ReplyReader(() => undefined, 100).push(Buffer.from(s)), s).toThrow(InvalidReplyError);
  });

  it('accepts exactly INSERTED <digits>', () => {
    const ok = (s: string): boolean => isInserted(Buffer.from(s), 0, s.length);
    expect(ok('INSERTED 42')).toBe(true);
    for (const s of ['INSERTED ', 'INSERTED 4x', 'INSERTED  4', 'BURIED 4', 'INSERTED 4 ']) expect(ok(s), s).toBe(false);
  });
});

describe('profile-top', () => {
  it('attributes each sample interval to its function, once per stack for totals', () => {
    const frame = (functionName: string) => ({ functionName, url: 'file:///x/app.js', lineNumber: 0 });
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [2] },
        { id: 2, callFrame: frame('outer'), children: [3] },
        { id: 3, callFrame: frame('inner'), children: [4] },
        { id: 4, callFrame: frame('outer'), children: [] },
      ],
      startTime: 0,
      endTime: 4000,
      samples: [3, 4, 2, 3],
      timeDeltas: [0, 1000, 1000, 1000],
    };
    const { costs, totalMs } = functionCosts(profile, '/x');
    const of = (name: string) => costs.find((c) => c.name === name)!;
    expect(totalMs).toBe(3);
    expect(of('inner').selfMs).toBe(1);
    expect(of('outer').selfMs).toBe(2);
    expect(of('inner').totalMs).toBe(2);
    // outer appears twice in sample 2's stack but counts once.
    expect(of('outer').totalMs).toBe(3);
    expect(of('outer').location).toBe('app.js:1');
  });
});
