/**
 * A small reference model of beanstalkd 1.12 semantics for model-based tests. No timing: it
 * assumes delays and TTRs are far longer than a test run, and no client is ever blocked in
 * reserve (only `reserve-with-timeout 0` is modelled).
 *
 * Rules modelled (see /work/shared/reference/beanstalkd-notes.md and beanstalkd's prot.c):
 * - ready order (pri, id) across the watched, unpaused tubes; delayed order (deadline, id);
 *   buried is a FIFO per tube; kick takes buried jobs first, else delayed, in the used tube only;
 * - delete: reserved by this connection, or ready/delayed/buried; release/bury/touch: reserved by
 *   this connection; reserve-job: any unreserved job in any tube, ignoring watch and pause;
 * - tubes are created by use/watch, reference-counted by uses, watches and jobs, freed as soon as
 *   unreferenced (never `default`), and removed from the tube list by swap-remove; watch lists use
 *   swap-remove on ignore;
 * - 1.12 YAML: `tube: name` / `name: name` unquoted.
 */

export type JobState = 'ready' | 'delayed' | 'reserved' | 'buried';

export interface ModelJob {
  id: number;
  tube: string;
  pri: number;
  delaySec: number;
  ttrSec: number;
  body: Buffer;
  state: JobState;
  /** Index of the reserving connection while reserved. */
  reserver: number | null;
  /** Order of the event that set the current delay deadline (deadline = that time + delaySec). */
  delayedAt: number;
  /** Order in which the job entered the buried list. */
  buriedAt: number;
  reserves: number;
  releases: number;
  buries: number;
  kicks: number;
}

interface ModelTube {
  name: string;
  totalJobs: number;
  cmdDelete: number;
  cmdPause: number;
  /** Current pause length in seconds, 0 when not paused. */
  pauseSec: number;
}

export interface ModelConn {
  use: string;
  watch: string[];
}

/** An inclusive range of acceptable integers (for time-dependent fields). */
export interface Range {
  min: number;
  max: number;
}

/** What the model expects as the reply to one command. */
export type Expected =
  | { kind: 'exact'; text: string }
  /** `INSERTED <id>` with a new id; the caller commits the put with that id. */
  | { kind: 'inserted' }
  /** `OK <n>\r\n` and a YAML document with exactly these keys, in this order. */
  | { kind: 'yaml'; fields: [string, string | Range][] };

export const URGENT_BELOW = 1024;

export interface ModelOptions {
  connections: number;
  /** Connections outside the model that use and watch `default` (for example an admin connection). */
  outsideDefaultConns: number;
  /** `default`'s total-jobs and cmd-delete when the run starts (it outlives runs). */
  defaultTotalJobs: number;
  defaultCmdDelete: number;
}

function exact(text: string): Expected {
  return { kind: 'exact', text };
}

const NOT_FOUND = exact('NOT_FOUND\r\n');

export function jobReply(word: 'RESERVED' | 'FOUND', j: ModelJob): Expected {
  return exact(`${word} ${j.id} ${j.body.length}\r\n${j.body.toString('latin1')}\r\n`);
}

/** The exact bytes of a list-tubes / list-tubes-watched reply. */
export function tubeListReply(names: readonly string[]): string {
  const body = `---\n${names.map((n) => `- ${n}\n`).join('')}`;
  return `OK ${Buffer.byteLength(body, 'latin1')}\r\n${body}\r\n`;
}

export class BeanstalkModel {
  /** All tubes in the server's internal order (list-tubes order). */
  readonly tubes: string[] = ['default'];
  private readonly tubeInfo = new Map<string, ModelTube>();
  readonly jobs = new Map<number, ModelJob>();
  readonly conns: ModelConn[] = [];
  private clock = 0;
  private readonly outside: number;

  constructor(opts: ModelOptions) {
    this.outside = opts.outsideDefaultConns;
    this.tubeInfo.set('default', {
      name: 'default',
      totalJobs: opts.defaultTotalJobs,
      cmdDelete: opts.defaultCmdDelete,
      cmdPause: 0,
      pauseSec: 0,
    });
    for (let i = 0; i < opts.connections; i++) this.conns.push({ use: 'default', watch: ['default'] });
  }

  private tick(): number {
    return ++this.clock;
  }

  private ensureTube(name: string): void {
    if (this.tubeInfo.has(name)) return;
    this.tubeInfo.set(name, { name, totalJobs: 0, cmdDelete: 0, cmdPause: 0, pauseSec: 0 });
    this.tubes.push(name);
  }

  private referenced(name: string): boolean {
    if (name === 'default') return true;
    for (const c of this.conns) if (c.use === name || c.watch.includes(name)) return true;
    for (const j of this.jobs.values()) if (j.tube === name) return true;
    return false;
  }

  /** Frees unreferenced tubes (swap-remove from the tube list), as beanstalkd's refcounts do. */
  private collect(): void {
    for (let i = 0; i < this.tubes.length; ) {
      const name = this.tubes[i]!;
      if (this.referenced(name)) {
        i++;
        continue;
      }
      this.tubeInfo.delete(name);
      this.tubes[i] = this.tubes[this.tubes.length - 1]!;
      this.tubes.pop();
    }
  }

  private jobsIn(tube: string, state: JobState): ModelJob[] {
    const out: ModelJob[] = [];
    for (const j of this.jobs.values()) if (j.tube === tube && j.state === state) out.push(j);
    return out;
  }

  private readyIn(tube: string): ModelJob[] {
    return this.jobsIn(tube, 'ready').sort((a, b) => a.pri - b.pri || a.id - b.id);
  }

  private delayedIn(tube: string): ModelJob[] {
    // Deadline = event time + delay; runs are much shorter than the smallest delay gap used.
    return this.jobsIn(tube, 'delayed').sort((a, b) => a.delaySec - b.delaySec || a.delayedAt - b.delayedAt || a.id - b.id);
  }

  private buriedIn(tube: string): ModelJob[] {
    return this.jobsIn(tube, 'buried').sort((a, b) => a.buriedAt - b.buriedAt);
  }

  private reservedBy(c: number, id: number): ModelJob | null {
    const j = this.jobs.get(id);
    return j !== undefined && j.state === 'reserved' && j.reserver === c ? j : null;
  }

  private makeReady(j: ModelJob): void {
    j.state = 'ready';
    j.reserver = null;
  }

  private makeDelayed(j: ModelJob, delaySec: number): void {
    j.state = 'delayed';
    j.reserver = null;
    j.delaySec = delaySec;
    j.delayedAt = this.tick();
  }

  // ---- commands ---------------------------------------------------------------------------

  put(): Expected {
    return { kind: 'inserted' };
  }

  /** Records a put the server answered with `INSERTED id`. */
  commitPut(c: number, id: number, pri: number, delaySec: number, ttrSec: number, body: Buffer): void {
    const tube = this.conns[c]!.use;
    const j: ModelJob = {
      id,
      tube,
      pri,
      delaySec,
      ttrSec: Math.max(ttrSec, 1), // protocol: ttr < 1 is treated as 1
      body,
      state: 'ready',
      reserver: null,
      delayedAt: 0,
      buriedAt: 0,
      reserves: 0,
      releases: 0,
      buries: 0,
      kicks: 0,
    };
    if (delaySec > 0) this.makeDelayed(j, delaySec);
    this.jobs.set(id, j);
    this.tubeInfo.get(tube)!.totalJobs++;
  }

  reserveWithTimeout0(c: number): Expected {
    let best: ModelJob | null = null;
    for (const t of this.conns[c]!.watch) {
      if (this.tubeInfo.get(t)!.pauseSec > 0) continue;
      const head = this.readyIn(t)[0];
      if (head !== undefined && (best === null || head.pri < best.pri || (head.pri === best.pri && head.id < best.id))) {
        best = head;
      }
    }
    if (best === null) return exact('TIMED_OUT\r\n');
    best.state = 'reserved';
    best.reserver = c;
    best.reserves++;
    return jobReply('RESERVED', best);
  }

  reserveJob(c: number, id: number): Expected {
    const j = this.jobs.get(id);
    if (j === undefined || j.state === 'reserved') return NOT_FOUND;
    j.state = 'reserved';
    j.reserver = c;
    j.reserves++;
    return jobReply('RESERVED', j);
  }

  delete(c: number, id: number): Expected {
    const j = this.jobs.get(id);
    if (j === undefined || (j.state === 'reserved' && j.reserver !== c)) return NOT_FOUND;
    this.jobs.delete(id);
    this.tubeInfo.get(j.tube)!.cmdDelete++;
    this.collect();
    return exact('DELETED\r\n');
  }

  release(c: number, id: number, pri: number, delaySec: number): Expected {
    const j = this.reservedBy(c, id);
    if (j === null) return NOT_FOUND;
    j.pri = pri;
    j.releases++;
    if (delaySec > 0) this.makeDelayed(j, delaySec);
    else {
      j.delaySec = 0;
      this.makeReady(j);
    }
    return exact('RELEASED\r\n');
  }

  bury(c: number, id: number, pri: number): Expected {
    const j = this.reservedBy(c, id);
    if (j === null) return NOT_FOUND;
    j.pri = pri;
    j.buries++;
    j.state = 'buried';
    j.reserver = null;
    j.buriedAt = this.tick();
    return exact('BURIED\r\n');
  }

  touch(c: number, id: number): Expected {
    return this.reservedBy(c, id) === null ? NOT_FOUND : exact('TOUCHED\r\n');
  }

  kick(c: number, bound: number): Expected {
    const tube = this.conns[c]!.use;
    const buried = this.buriedIn(tube);
    const from = buried.length > 0 ? buried : this.delayedIn(tube);
    const n = Math.min(bound, from.length);
    for (let i = 0; i < n; i++) {
      const j = from[i]!;
      j.kicks++;
      this.makeReady(j);
    }
    return exact(`KICKED ${n}\r\n`);
  }

  kickJob(id: number): Expected {
    const j = this.jobs.get(id);
    if (j === undefined || (j.state !== 'buried' && j.state !== 'delayed')) return NOT_FOUND;
    j.kicks++;
    this.makeReady(j);
    return exact('KICKED\r\n');
  }

  peek(id: number): Expected {
    const j = this.jobs.get(id);
    return j === undefined ? NOT_FOUND : jobReply('FOUND', j);
  }

  peekReady(c: number): Expected {
    const j = this.readyIn(this.conns[c]!.use)[0];
    return j === undefined ? NOT_FOUND : jobReply('FOUND', j);
  }

  peekDelayed(c: number): Expected {
    const j = this.delayedIn(this.conns[c]!.use)[0];
    return j === undefined ? NOT_FOUND : jobReply('FOUND', j);
  }

  peekBuried(c: number): Expected {
    const j = this.buriedIn(this.conns[c]!.use)[0];
    return j === undefined ? NOT_FOUND : jobReply('FOUND', j);
  }

  /** `slackSec`: seconds that may have passed since the run started (for age and time-left). */
  statsJob(id: number, slackSec: number): Expected {
    const j = this.jobs.get(id);
    if (j === undefined) return NOT_FOUND;
    const within = (v: number): Range => ({ min: Math.max(0, v - 1 - slackSec), max: v });
    const timeLeft: string | Range =
      j.state === 'reserved' ? within(j.ttrSec) : j.state === 'delayed' ? within(j.delaySec) : '0';
    return {
      kind: 'yaml',
      fields: [
        ['id', String(j.id)],
        ['tube', j.tube],
        ['state', j.state],
        ['pri', String(j.pri)],
        ['age', { min: 0, max: slackSec }],
        ['delay', String(j.delaySec)],
        ['ttr', String(j.ttrSec)],
        ['time-left', timeLeft],
        ['file', '0'],
        ['reserves', String(j.reserves)],
        ['timeouts', '0'],
        ['releases', String(j.releases)],
        ['buries', String(j.buries)],
        ['kicks', String(j.kicks)],
      ],
    };
  }

  statsTube(name: string, slackSec: number): Expected {
    const t = this.tubeInfo.get(name);
    if (t === undefined) return NOT_FOUND;
    const ready = this.jobsIn(name, 'ready');
    const outside = name === 'default' ? this.outside : 0;
    const using = this.conns.filter((c) => c.use === name).length + outside;
    const watching = this.conns.filter((c) => c.watch.includes(name)).length + outside;
    return {
      kind: 'yaml',
      fields: [
        ['name', name],
        ['current-jobs-urgent', String(ready.filter((j) => j.pri < URGENT_BELOW).length)],
        ['current-jobs-ready', String(ready.length)],
        ['current-jobs-reserved', String(this.jobsIn(name, 'reserved').length)],
        ['current-jobs-delayed', String(this.jobsIn(name, 'delayed').length)],
        ['current-jobs-buried', String(this.jobsIn(name, 'buried').length)],
        ['total-jobs', String(t.totalJobs)],
        ['current-using', String(using)],
        ['current-watching', String(watching)],
        ['current-waiting', '0'],
        ['cmd-delete', String(t.cmdDelete)],
        ['cmd-pause-tube', String(t.cmdPause)],
        ['pause', String(t.pauseSec)],
        ['pause-time-left', t.pauseSec > 0 ? { min: Math.max(0, t.pauseSec - 1 - slackSec), max: t.pauseSec } : '0'],
      ],
    };
  }

  use(c: number, name: string): Expected {
    this.ensureTube(name);
    this.conns[c]!.use = name;
    this.collect();
    return exact(`USING ${name}\r\n`);
  }

  watch(c: number, name: string): Expected {
    this.ensureTube(name);
    const w = this.conns[c]!.watch;
    if (!w.includes(name)) w.push(name);
    return exact(`WATCHING ${w.length}\r\n`);
  }

  ignore(c: number, name: string): Expected {
    const w = this.conns[c]!.watch;
    const i = w.indexOf(name);
    if (i >= 0) {
      if (w.length < 2) return exact('NOT_IGNORED\r\n');
      w[i] = w[w.length - 1]!;
      w.pop();
      this.collect();
    }
    return exact(`WATCHING ${w.length}\r\n`);
  }

  listTubes(): Expected {
    return exact(tubeListReply(this.tubes));
  }

  listTubeUsed(c: number): Expected {
    return exact(`USING ${this.conns[c]!.use}\r\n`);
  }

  listTubesWatched(c: number): Expected {
    return exact(tubeListReply(this.conns[c]!.watch));
  }

  pauseTube(name: string, delaySec: number): Expected {
    const t = this.tubeInfo.get(name);
    if (t === undefined) return NOT_FOUND;
    t.pauseSec = delaySec;
    t.cmdPause++;
    return exact('PAUSED\r\n');
  }

  /** Every model connection closed: reserved jobs go back to ready, uses and watches drop. */
  closeAll(): void {
    for (const j of this.jobs.values()) if (j.state === 'reserved') this.makeReady(j);
    for (const c of this.conns) {
      c.use = '';
      c.watch = [];
    }
    this.collect();
  }
}

/** Checks one reply against the model; returns a description of the mismatch, or null. */
export function mismatch(expected: Expected, actual: string): string | null {
  switch (expected.kind) {
    case 'exact':
      return actual === expected.text ? null : `expected ${JSON.stringify(expected.text)}`;
    case 'inserted':
      return /^INSERTED [1-9]\d*\r\n$/.test(actual) ? null : 'expected "INSERTED <id>\\r\\n"';
    case 'yaml': {
      const m = /^OK (\d+)\r\n/.exec(actual);
      if (m === null) return 'expected an OK <n> YAML reply';
      const body = actual.slice(m[0].length);
      const n = Number(m[1]);
      if (body.length !== n + 2 || !body.endsWith('\r\n')) return `OK ${n} does not match the body length ${body.length - 2}`;
      const lines = body.slice(0, n).split('\n');
      if (lines[0] !== '---' || lines[lines.length - 1] !== '') return 'YAML must start with "---\\n" and end with "\\n"';
      const kv = lines.slice(1, -1);
      const want = expected.fields;
      const shown = want.map(([k, v]) => `${k}: ${typeof v === 'string' ? v : `${v.min}..${v.max}`}`).join('\n');
      if (kv.length !== want.length) return `expected ${want.length} keys:\n${shown}`;
      for (let i = 0; i < want.length; i++) {
        const [key, value] = want[i]!;
        const line = kv[i]!;
        const prefix = `${key}: `;
        if (!line.startsWith(prefix)) return `line ${i + 1}: expected key ${key}; expected:\n${shown}`;
        const got = line.slice(prefix.length);
        if (typeof value === 'string') {
          if (got !== value) return `${key}: expected ${JSON.stringify(value)}, got ${JSON.stringify(got)}; expected:\n${shown}`;
        } else {
          const v = /^\d+$/.test(got) ? Number(got) : NaN;
          if (!(v >= value.min && v <= value.max)) return `${key}: expected ${value.min}..${value.max}, got ${JSON.stringify(got)}`;
        }
      }
      return null;
    }
  }
}
