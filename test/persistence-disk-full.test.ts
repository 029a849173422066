/**
 * A full disk, for real: the binlog lives on a 3 MiB tmpfs mounted in a private mount namespace
 * (`unshare -r -m`), and the test fills that filesystem through /proc/<pid>/root.
 *
 * - Once the space the binlog claimed ahead is used up, puts answer OUT_OF_MEMORY and change
 *   nothing (current-jobs-ready stays put), and `stats` shows `binlog-error`.
 * - Deletes, buries and kicks still work (they may use the headroom), and every acknowledged job
 *   keeps its body.
 * - When space returns (the filler is removed), puts answer INSERTED again within a second and
 *   `binlog-error` is gone.
 * - After SIGKILL the server restarts in the same namespace (a shell loop keeps the tmpfs alive)
 *   and shows every acknowledged job with its body and state, and none of the refused puts.
 *
 * Needs `unshare -r -m` (user and mount namespaces). Where it is not permitted the test fails
 * with a message saying so, unless BEANPOLE_SKIP_TMPFS=1.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statfsSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Prng, seedFromEnv } from './support/prng.js';
import { RawClient } from './support/raw-client.js';
import { BEANPOLE_BIN, freePort } from './support/servers.js';
import { yamlField, yamlNumber } from './support/yaml-fields.js';

const TMPFS_BYTES = 3 * 1024 * 1024;
const SEGMENT_BYTES = 1024 * 1024;
const TMPFS_MAGIC = 0x01021994;
/** Puts made to use up the space the binlog claimed before the disk filled (about 1 MiB). */
const MAX_FILL_PUTS = 4000;

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Null when `unshare -r -m` can mount a tmpfs here, else why not. */
function namespaceProblem(): string | null {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-unshare-probe-'));
  try {
    const r = spawnSync('unshare', ['-r', '-m', 'sh', '-c', 'mount -t tmpfs -o size=1m tmpfs "$1" && touch "$1/probe"', 'sh', dir], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    if (r.error !== undefined) return `cannot run unshare: ${r.error.message}`;
    if (r.status !== 0) return `unshare -r -m + mount -t tmpfs failed (exit ${r.status}): ${r.stderr.trim()}`;
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function tagOf(body: Buffer): string {
  const colon = body.indexOf(0x3a);
  return colon < 0 ? '' : body.toString('latin1', 0, colon);
}

function foundBody(reply: string): { id: number; body: Buffer } | null {
  const m = /^FOUND (\d+) (\d+)\r\n/.exec(reply);
  if (m === null) return null;
  return { id: Number(m[1]), body: Buffer.from(reply.slice(m[0].length, m[0].length + Number(m[2])), 'latin1') };
}

function putFrame(body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`put 0 0 120 ${body.length}\r\n`, 'latin1'), body, Buffer.from('\r\n')]);
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1')
      .trim()
      .split(/\s+/)
      .filter((s) => s !== '')
      .map(Number);
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * `unshare -r -m sh`: mounts the tmpfs on `dir`, then runs the server twice in a row on it
 * (the second run is the restart after SIGKILL; the shell keeps the namespace and its tmpfs).
 */
class NamespacedServer {
  readonly shell: ChildProcess;
  private output = '';
  private exited = false;
  readonly exit: Promise<void>;

  constructor(
    readonly dir: string,
    readonly port: number,
  ) {
    const script = [
      'mount -t tmpfs -o size="$2" tmpfs "$1" || exit 97',
      'for run in 1 2; do "$3" "$4" -l 127.0.0.1 -p "$5" --no-admin --no-gearman -b "$1" -s "$6"; echo "[server exited with $?]" >&2; done',
    ].join('\n');
    this.shell = spawn(
      'unshare',
      ['-r', '-m', 'sh', '-c', script, 'sh', dir, String(TMPFS_BYTES), process.execPath, BEANPOLE_BIN, String(port), String(SEGMENT_BYTES)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const s of [this.shell.stdout!, this.shell.stderr!]) {
      s.setEncoding('utf8');
      s.on('data', (d: string) => (this.output += d));
    }
    this.exit = new Promise((resolve) =>
      this.shell.once('exit', () => {
        this.exited = true;
        resolve();
      }),
    );
  }

  /** The path of the server's binlog directory as this process sees it. */
  get root(): string {
    return `/proc/${this.shell.pid}/root${this.dir}`;
  }

  log(): string {
    return this.output.slice(-4000);
  }

  /** Waits for a server (other than `previous`) under the shell to answer on the port; returns its pid. */
  async waitServer(previous: number | null): Promise<number> {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (this.exited) throw new Error(`the namespaced shell exited before a server listened:\n${this.log()}`);
      const pid = childrenOf(this.shell.pid!).find((p) => p !== previous);
      if (pid !== undefined) {
        const c = await RawClient.connect(this.port).catch(() => null);
        if (c !== null) {
          try {
            const st = await c.call('stats\r\n');
            if (Number(yamlField(st, 'pid')) === pid) return pid;
          } catch {
            // not ready yet
          } finally {
            c.destroy();
          }
        }
      }
      await delay(20);
    }
    throw new Error(`no server listened on ${this.port} within 20 s:\n${this.log()}`);
  }

  /** Ends everything this test started: the servers (by pid) and the shell. */
  async kill(): Promise<void> {
    if (this.exited) return;
    for (const pid of childrenOf(this.shell.pid!)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    this.shell.kill('SIGKILL');
    await this.exit;
  }
}

describe('binlog on a full disk (3 MiB tmpfs)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-diskfull-'));
  let ns: NamespacedServer | null = null;
  const clients: RawClient[] = [];

  afterAll(async () => {
    for (const c of clients) c.destroy();
    if (ns !== null) await ns.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses puts with OUT_OF_MEMORY and changes nothing, keeps deletes working, recovers when space returns, and survives SIGKILL', async (ctx) => {
    const problem = namespaceProblem();
    if (problem !== null) {
      if (process.env.BEANPOLE_SKIP_TMPFS === '1') {
        ctx.skip(`BEANPOLE_SKIP_TMPFS=1: ${problem}`);
        return;
      }
      throw new Error(
        `this test needs user and mount namespaces to put the binlog on a tiny tmpfs, and they are not available: ${problem}. ` +
          'Set BEANPOLE_SKIP_TMPFS=1 to skip it on this machine.',
      );
    }
    const seed = seedFromEnv('DISK_FULL_SEED');
    const prng = new Prng(seed);
    const port = await freePort();
    ns = new NamespacedServer(dir, port);
    const server = ns;
    const first = await server.waitServer(null);
    const fsInfo = statfsSync(server.root);
    expect(fsInfo.type, 'the binlog directory is the private tmpfs').toBe(TMPFS_MAGIC);
    expect(fsInfo.blocks * fsInfo.bsize).toBe(TMPFS_BYTES);

    const c = await RawClient.connect(port);
    clients.push(c);
    /** Acknowledged jobs that should exist, with the state of their last acknowledged change. */
    const live = new Map<number, { body: Buffer; state: 'ready' | 'buried' }>();
    const deleted: number[] = [];
    const refused: Buffer[] = [];
    let maxId = 0;
    let serial = 0;
    const body = (kind: string, pad: number): Buffer => Buffer.concat([Buffer.from(`${kind}-${serial++}:`, 'latin1'), prng.bytes(pad)]);
    const put = async (b: Buffer): Promise<string> => {
      const reply = await c.call(putFrame(b));
      const m = /^INSERTED (\d+)\r\n$/.exec(reply);
      if (m !== null) {
        const id = Number(m[1]);
        live.set(id, { body: b, state: 'ready' });
        maxId = Math.max(maxId, id);
      } else if (reply === 'OUT_OF_MEMORY\r\n') {
        refused.push(b);
      }
      return reply;
    };

    // Some jobs before the disk fills.
    for (let i = 0; i < 40; i++) expect(await put(body('early', prng.range(100, 900)))).toMatch(/^INSERTED \d+\r\n$/);

    // Fill the filesystem from outside the server until ENOSPC.
    const filler = path.join(server.root, 'filler');
    const fd = openSync(filler, 'w');
    let fillerBytes = 0;
    try {
      for (const size of [64 * 1024, 4096, 512]) {
        const chunk = Buffer.alloc(size, 0xab);
        for (let i = 0; i < 2 * (TMPFS_BYTES / size); i++) {
          try {
            fillerBytes += writeSync(fd, chunk);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
            throw err;
          }
        }
      }
    } finally {
      closeSync(fd);
    }
    const full = statfsSync(server.root);
    console.log(`persistence-disk-full: filler ${fillerBytes} bytes; ${full.bavail * full.bsize} bytes left on the tmpfs (seed ${seed})`);
    expect(full.bavail, 'the tmpfs is full').toBe(0);

    // Use up the space the binlog had claimed ahead: puts succeed until they no longer fit.
    let fillPuts = 0;
    let firstRefusal = '';
    for (; fillPuts < MAX_FILL_PUTS; fillPuts++) {
      const reply = await put(body('fill', 1000));
      if (reply !== 'OUT_OF_MEMORY\r\n') {
        expect(reply).toMatch(/^INSERTED \d+\r\n$/);
        continue;
      }
      firstRefusal = reply;
      break;
    }
    expect(firstRefusal, `a put is refused once the claimed space is used (after ${fillPuts} puts)`).toBe('OUT_OF_MEMORY\r\n');
    // Smaller jobs may still fit in what is left; use that up too (one record is ~100 bytes).
    let tinyPuts = 0;
    for (; tinyPuts < 1000; tinyPuts++) {
      const reply = await put(body('t', 0));
      if (reply === 'OUT_OF_MEMORY\r\n') break;
      expect(reply).toMatch(/^INSERTED \d+\r\n$/);
    }
    expect(tinyPuts, 'small puts stop fitting too').toBeLessThan(1000);

    const statsFull = await c.call('stats\r\n');
    const readyBefore = yamlNumber(statsFull, 'current-jobs-ready');
    expect(readyBefore).toBe(live.size);
    const binlogError = yamlField(statsFull, 'binlog-error');
    expect(binlogError, 'stats shows binlog-error while the disk is full').not.toBeNull();
    console.log(`persistence-disk-full: ${fillPuts} puts of 1000 bytes and ${tinyPuts} tiny ones fitted in the claimed space; then binlog-error: ${binlogError}`);

    // Every put is refused now, of any size, and none of them changes anything.
    for (let i = 0; i < 20; i++) {
      expect(await put(body('refused', i % 2 === 0 ? 0 : prng.range(1, 2000)))).toBe('OUT_OF_MEMORY\r\n');
    }
    const statsRefused = await c.call('stats\r\n');
    expect(yamlNumber(statsRefused, 'current-jobs-ready'), 'refused puts created no job').toBe(readyBefore);
    expect(yamlField(statsRefused, 'binlog-error')).not.toBeNull();

    // Deletes, buries and kicks still work on the headroom.
    const ids = [...live.keys()];
    for (let i = 0; i < 15; i++) {
      const id = ids[prng.int(ids.length)]!;
      if (!live.has(id)) continue;
      expect(await c.call(`delete ${id}\r\n`), `delete ${id} on a full disk`).toBe('DELETED\r\n');
      live.delete(id);
      deleted.push(id);
    }
    const buried: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await c.call('reserve-with-timeout 0\r\n');
      const m = /^RESERVED (\d+) \d+\r\n/.exec(r);
      expect(m, `reserve on a full disk answered ${JSON.stringify(r.slice(0, 80))}`).not.toBeNull();
      const id = Number(m![1]);
      expect(await c.call(`bury ${id} 5\r\n`), `bury ${id} on a full disk`).toBe('BURIED\r\n');
      live.get(id)!.state = 'buried';
      buried.push(id);
    }
    expect(await c.call(`kick-job ${buried[0]}\r\n`), 'kick-job on a full disk').toBe('KICKED\r\n');
    live.get(buried[0]!)!.state = 'ready';
    const statsAfterDeletes = await c.call('stats\r\n');
    expect(yamlNumber(statsAfterDeletes, 'current-jobs-ready')).toBe(readyBefore - deleted.length - 2);
    expect(yamlNumber(statsAfterDeletes, 'current-jobs-buried')).toBe(2);

    // Acknowledged jobs are intact.
    const checkLive = async (client: RawClient, when: string): Promise<string[]> => {
      const errors: string[] = [];
      for (const [id, job] of live) {
        const peek = await client.call(`peek ${id}\r\n`);
        const found = foundBody(peek);
        if (found === null || found.id !== id) errors.push(`${when}: peek ${id} answered ${JSON.stringify(peek.slice(0, 60))}`);
        else if (!found.body.equals(job.body)) errors.push(`${when}: job ${id} has a different body (tag ${tagOf(found.body)}, expected ${tagOf(job.body)})`);
        const st = await client.call(`stats-job ${id}\r\n`);
        if (yamlField(st, 'state') !== job.state) errors.push(`${when}: job ${id} is ${yamlField(st, 'state')}, expected ${job.state}`);
      }
      for (const id of deleted) {
        const peek = await client.call(`peek ${id}\r\n`);
        if (peek !== 'NOT_FOUND\r\n') errors.push(`${when}: deleted job ${id}: peek answered ${JSON.stringify(peek.slice(0, 60))}`);
      }
      return errors;
    };
    expect(await checkLive(c, 'disk full')).toEqual([]);

    // Space returns: puts work again within about a second, and the error clears.
    unlinkSync(filler);
    const freedAt = performance.now();
    let recoveredMs = -1;
    for (let i = 0; i < 100 && performance.now() - freedAt < 3000; i++) {
      const reply = await put(body('after', prng.range(10, 500)));
      if (/^INSERTED \d+\r\n$/.test(reply)) {
        recoveredMs = performance.now() - freedAt;
        break;
      }
      expect(reply).toBe('OUT_OF_MEMORY\r\n');
      await delay(20);
    }
    console.log(`persistence-disk-full: puts accepted again ${recoveredMs.toFixed(0)} ms after the filler was removed`);
    expect(recoveredMs, 'puts answer INSERTED again after space returns').toBeGreaterThanOrEqual(0);
    expect(recoveredMs, 'ms until puts work again').toBeLessThan(1000);
    const statsBack = await c.call('stats\r\n');
    expect(yamlField(statsBack, 'binlog-error'), 'binlog-error is gone once space returns').toBeNull();
    for (let i = 0; i < 30; i++) expect(await put(body('late', prng.range(0, 3000)))).toMatch(/^INSERTED \d+\r\n$/);
    expect(await c.call(`delete ${[...live.keys()][0]}\r\n`)).toBe('DELETED\r\n');
    deleted.push([...live.keys()][0]!);
    live.delete(deleted.at(-1)!);

    // SIGKILL; the shell starts the server again on the same tmpfs.
    c.destroy();
    process.kill(first, 'SIGKILL');
    const second = await server.waitServer(first);
    expect(alive(first)).toBe(false);
    const c2 = await RawClient.connect(port);
    clients.push(c2);
    expect(await checkLive(c2, 'after restart'), `server output:\n${server.log()}`).toEqual([]);

    // Nothing else exists: no refused put came back, and the count matches.
    const use = await c2.call('use after-restart\r\n');
    expect(use).toBe('USING after-restart\r\n');
    const probe = await c2.call('put 0 0 10 1\r\nx\r\n');
    const pm = /^INSERTED (\d+)\r\n$/.exec(probe);
    expect(pm, `put after restart answered ${JSON.stringify(probe)}`).not.toBeNull();
    const probeId = Number(pm![1]);
    expect(probeId, 'a new id is above every acknowledged id').toBeGreaterThan(maxId);
    const refusedTags = new Set(refused.map(tagOf));
    const strays: string[] = [];
    let found = 0;
    for (let id = 1; id < probeId; id++) {
      const peek = await c2.call(`peek ${id}\r\n`);
      if (peek === 'NOT_FOUND\r\n') continue;
      const job = foundBody(peek);
      if (job === null) {
        strays.push(`peek ${id} answered ${JSON.stringify(peek.slice(0, 60))}`);
        continue;
      }
      found++;
      if (!live.has(id)) strays.push(`job ${id} (tag ${tagOf(job.body)}${refusedTags.has(tagOf(job.body)) ? ', a put that got OUT_OF_MEMORY' : ''}) exists but was never acknowledged or was deleted`);
    }
    expect(strays).toEqual([]);
    expect(found).toBe(live.size);
    const st = await c2.call('stats\r\n');
    expect(yamlField(st, 'binlog-error')).toBeNull();
    console.log(
      `persistence-disk-full: ${live.size} acknowledged jobs and ${deleted.length} deletes intact after SIGKILL; ` +
        `${refused.length} refused puts absent; restarted as pid ${second}`,
    );

    // The second run is the shell's last: SIGTERM ends it and the shell with it.
    c2.destroy();
    process.kill(second, 'SIGTERM');
    await Promise.race([server.exit, delay(5000)]);
    await server.kill();
    ns = null;
  }, 60_000);
});
