/**
 * Compaction keeps the binlog directory bounded under endless churn.
 *
 * One job is put and buried first (its record sits in the first segment), then 1,000,000
 * put/delete cycles run pipelined over four connections: each connection puts a window of jobs,
 * then deletes exactly the ids it got INSERTED for, together with the next window's puts. Every
 * reply is checked. With the default segment size (-s 10 MiB) the churn writes about 124 MB of
 * records, so segments must be dropped as they go: the directory (sum of file sizes, sampled
 * while the load runs and at the end) must stay under four segments plus one 1 MiB claim chunk.
 * At the end binlog-records-migrated > 0 (the buried job was rewritten forward) and
 * binlog-oldest-index > 1; after a restart the buried job is still buried, with buries: 1 and
 * its body.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PipelineClient } from './support/pipeline-client.js';
import { RawClient } from './support/raw-client.js';
import { startProcessServer, type ServerProcess } from './support/servers.js';
import { yamlField, yamlNumber } from './support/yaml-fields.js';

const CYCLES = 1_000_000;
const CONNECTIONS = 4;
/** Puts per window on one connection; their deletes go out with the next window's puts. */
const WINDOW = 1000;
const SEGMENT_BYTES = 10 * 1024 * 1024;
const CHUNK_BYTES = 1024 * 1024;
/** Four segments plus one claim chunk, and a page each for next-id and the lock file. */
const MAX_DIR_BYTES = 4 * SEGMENT_BYTES + CHUNK_BYTES + 2 * 4096;
const SAMPLE_MS = 20;

const PUT = 'put 100 0 60 1\r\nx\r\n';

/** Sum of the sizes of the files in `dir` (files removed meanwhile count as 0). */
function dirBytes(dir: string): { bytes: number; files: string[] } {
  let bytes = 0;
  const files: string[] = [];
  for (const name of readdirSync(dir)) {
    try {
      const size = statSync(path.join(dir, name)).size;
      bytes += size;
      files.push(`${name}=${size}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return { bytes, files };
}

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/**
 * Runs `cycles` put/delete cycles on one connection and checks every reply: puts must answer
 * INSERTED <id>, and those ids (and only those) are deleted, each answering DELETED.
 */
async function churn(client: PipelineClient, cycles: number): Promise<{ puts: number; deletes: number }> {
  /** What the replies still to come are, in order: runs of puts or deletes. */
  const expecting: { kind: 'put' | 'delete'; left: number }[] = [];
  let inserted: number[] = [];
  let bad: string | null = null;
  let puts = 0;
  let deletes = 0;
  client.onReply = (r) => {
    while (expecting.length > 0 && expecting[0]!.left === 0) expecting.shift();
    const run = expecting[0];
    const text = r.toString('latin1', 0, Math.min(r.length, 80));
    if (run === undefined) {
      bad ??= `unexpected reply ${JSON.stringify(text)}`;
      return;
    }
    run.left--;
    if (run.kind === 'put') {
      const m = /^INSERTED (\d+)\r\n$/.exec(text);
      if (m === null) bad ??= `put answered ${JSON.stringify(text)}`;
      else {
        inserted.push(Number(m[1]));
        puts++;
      }
    } else if (text !== 'DELETED\r\n') {
      bad ??= `delete answered ${JSON.stringify(text)}`;
    } else {
      deletes++;
    }
  };
  let total = client.received;
  let sent = 0;
  let toDelete: number[] = [];
  for (let windows = 0; (sent < cycles || toDelete.length > 0) && windows <= cycles / WINDOW + 2 && bad === null; windows++) {
    const n = Math.min(WINDOW, cycles - sent);
    let chunk = '';
    for (const id of toDelete) chunk += `delete ${id}\r\n`;
    chunk += PUT.repeat(n);
    expecting.push({ kind: 'delete', left: toDelete.length }, { kind: 'put', left: n });
    total += toDelete.length + n;
    await client.write(chunk);
    await client.waitReplies(total, 60_000);
    sent += n;
    toDelete = inserted;
    inserted = [];
  }
  client.onReply = () => {};
  if (bad !== null) throw new Error(bad);
  return { puts, deletes };
}

describe('binlog compaction under 1,000,000 put/delete cycles', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-compaction-'));
  let server: ServerProcess | null = null;
  const closers: (() => void)[] = [];

  afterAll(async () => {
    for (const close of closers) close();
    if (server !== null) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the directory under 4 segments + 1 MiB, migrates live jobs, and keeps the buried job across a restart', async () => {
    server = await startProcessServer('beanpole', { tcp: true }, ['-b', dir]);
    const port = (server.address as { port: number }).port;
    const c = await RawClient.connect(port);
    closers.push(() => c.destroy());

    const body = 'the buried one: compaction must carry me forward';
    expect(await c.call('use keep\r\n')).toBe('USING keep\r\n');
    expect(await c.call('watch keep\r\n')).toBe('WATCHING 2\r\n');
    expect(await c.call('ignore default\r\n')).toBe('WATCHING 1\r\n');
    const ins = /^INSERTED (\d+)\r\n$/.exec(await c.call(`put 7 0 60 ${body.length}\r\n${body}\r\n`));
    expect(ins).not.toBeNull();
    const buriedId = Number(ins![1]);
    expect(await c.call('reserve-with-timeout 0\r\n')).toBe(`RESERVED ${buriedId} ${body.length}\r\n${body}\r\n`);
    expect(await c.call(`bury ${buriedId} 7\r\n`)).toBe('BURIED\r\n');

    // Sample the directory size while the load runs.
    let maxBytes = 0;
    let maxFiles: string[] = [];
    let samples = 0;
    const sample = (): void => {
      const d = dirBytes(dir);
      samples++;
      if (d.bytes > maxBytes) {
        maxBytes = d.bytes;
        maxFiles = d.files;
      }
    };
    const sampler = setInterval(sample, SAMPLE_MS);
    closers.push(() => clearInterval(sampler));

    const started = performance.now();
    const conns = await Promise.all(Array.from({ length: CONNECTIONS }, () => PipelineClient.connect(port)));
    for (const p of conns) closers.push(() => p.destroy());
    const per = CYCLES / CONNECTIONS;
    const results = await Promise.all(conns.map((p) => churn(p, per)));
    const churnSeconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    sample();
    const puts = results.reduce((a, r) => a + r.puts, 0);
    const deletes = results.reduce((a, r) => a + r.deletes, 0);
    expect(puts).toBe(CYCLES);
    expect(deletes).toBe(CYCLES);

    const st = await c.call('stats\r\n');
    const end = dirBytes(dir);
    const migrated = yamlNumber(st, 'binlog-records-migrated');
    const oldest = yamlNumber(st, 'binlog-oldest-index');
    const current = yamlNumber(st, 'binlog-current-index');
    console.log(
      `persistence-compaction: ${CYCLES} put/delete cycles over ${CONNECTIONS} connections in ${churnSeconds.toFixed(1)} s ` +
        `(${Math.round(CYCLES / churnSeconds)} cycles/s); directory at the end ${end.bytes} bytes (${mb(end.bytes)}: ${end.files.join(', ')}); ` +
        `max sampled ${maxBytes} bytes (${mb(maxBytes)}: ${maxFiles.join(', ')}) over ${samples} samples; limit ${MAX_DIR_BYTES}; ` +
        `binlog-oldest-index ${oldest}, binlog-current-index ${current}, binlog-records-migrated ${migrated}, ` +
        `binlog-records-written ${yamlNumber(st, 'binlog-records-written')}`,
    );
    expect(yamlNumber(st, 'current-jobs-ready')).toBe(0);
    expect(yamlNumber(st, 'current-jobs-buried')).toBe(1);
    expect(yamlField(st, 'binlog-error')).toBeNull();
    expect(maxBytes, `largest sampled directory size (${maxFiles.join(', ')})`).toBeLessThan(MAX_DIR_BYTES);
    expect(end.bytes, `directory size at the end (${end.files.join(', ')})`).toBeLessThan(MAX_DIR_BYTES);
    expect(migrated, 'binlog-records-migrated').toBeGreaterThan(0);
    expect(oldest, 'binlog-oldest-index').toBeGreaterThan(1);

    // Restart: the buried job is still there, buried once, with its body.
    c.destroy();
    for (const p of conns) p.destroy();
    await server.stop();
    const restartAt = performance.now();
    server = await startProcessServer('beanpole', { tcp: true }, ['-b', dir]);
    const restartMs = performance.now() - restartAt;
    const c2 = await RawClient.connect((server.address as { port: number }).port);
    closers.push(() => c2.destroy());
    const sj = await c2.call(`stats-job ${buriedId}\r\n`);
    expect(yamlField(sj, 'state'), sj).toBe('buried');
    expect(yamlNumber(sj, 'buries')).toBe(1);
    expect(yamlNumber(sj, 'pri')).toBe(7);
    expect(yamlField(sj, 'tube')).toBe('keep');
    expect(await c2.call(`peek ${buriedId}\r\n`)).toBe(`FOUND ${buriedId} ${body.length}\r\n${body}\r\n`);
    const st2 = await c2.call('stats\r\n');
    expect(yamlNumber(st2, 'current-jobs-ready')).toBe(0);
    expect(yamlNumber(st2, 'current-jobs-buried')).toBe(1);
    const next = /^INSERTED (\d+)\r\n$/.exec(await c2.call('put 0 0 60 1\r\ny\r\n'));
    expect(next).not.toBeNull();
    expect(Number(next![1]), 'ids keep counting after the restart').toBeGreaterThan(buriedId + CYCLES);
    const totalSeconds = (performance.now() - started) / 1000;
    console.log(
      `persistence-compaction: restart took ${restartMs.toFixed(0)} ms; elapsed ${totalSeconds.toFixed(1)} s; ` +
        `final directory size ${end.bytes} bytes (${mb(end.bytes)})`,
    );
  }, 240_000);
});
