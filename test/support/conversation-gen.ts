import { copyServerFrames, FramingModel, newServerFrames, SAFE_SECONDS, type Forecast, type Quirk } from './beanstalkd-framing.js';
import { FuzzInputs } from './fuzz-inputs.js';
import type { Prng } from './prng.js';

/**
 * Random beanstalkd conversations for differential fuzzing: valid commands of every kind (put with
 * odd bodies, tubes with edge-case names, ids that exist and ids that do not) mixed with mutated
 * and malformed input, over 1-3 connections of one server.
 *
 * Nothing generated depends on time: every step is checked with the framing model, and a step that
 * would block (`reserve`, a positive reserve timeout) or set a delay, pause or TTR short enough to
 * run out during a run is thrown away and drawn again (so is a peek at a job whose body is still
 * arriving: beanstalkd answers with uninitialised memory). Steps that touch a quirk named in
 * `avoid` are thrown away too.
 */

/** Bytes sent on one connection of a conversation. */
export interface Step {
  /** Index of the connection within its conversation. */
  conn: number;
  bytes: Buffer;
}

/** Connections opened together, and what is sent on them in order. */
export interface Conversation {
  conns: number;
  steps: Step[];
}

/** Conversations run one after the other on the same server pair (connections stay open). */
export type Script = Conversation[];

/** What beanstalkd is expected to do with each step of a script, or why the script is unusable. */
export interface ScriptForecast {
  /** forecasts[conversation][step] */
  forecasts: Forecast[][];
  hazard: string | null;
  /** Every quirk some step touches. */
  quirks: Set<Quirk>;
}

/** Runs the framing model over a whole script. */
export function forecastScript(script: Script): ScriptForecast {
  const server = newServerFrames();
  const forecasts: Forecast[][] = [];
  const quirks = new Set<Quirk>();
  let hazard: string | null = null;
  for (const conv of script) {
    const models = Array.from({ length: conv.conns }, () => new FramingModel(server));
    const out: Forecast[] = [];
    for (const step of conv.steps) {
      const f = models[step.conn]!.feed(step.bytes);
      hazard ??= f.hazard;
      for (const q of f.quirks) quirks.add(q);
      out.push(f);
    }
    forecasts.push(out);
  }
  return { forecasts, hazard, quirks };
}

const VALID_TUBES = [
  'default',
  'a',
  'b',
  'tube-1',
  'x_y',
  'a(b)',
  '$;+/.',
  'foo-',
  'Default',
  '0',
  'q'.repeat(200),
];
const INVALID_TUBES = ['-lead', 'q'.repeat(201), 'sp ace', 'st*r', '', 'tab\tx', 'é', 'default '];

const KINDS = [
  'put',
  'use',
  'reserve-with-timeout',
  'reserve-job',
  'delete',
  'release',
  'bury',
  'touch',
  'watch',
  'ignore',
  'peek',
  'peek-ready',
  'peek-delayed',
  'peek-buried',
  'kick',
  'kick-job',
  'stats-job',
  'stats-tube',
  'stats',
  'list-tubes',
  'list-tube-used',
  'list-tubes-watched',
  'pause-tube',
  'quit',
] as const;
type Kind = (typeof KINDS)[number];

const KIND_WEIGHTS: readonly (readonly [number, Kind])[] = [
  [14, 'put'],
  [4, 'use'],
  [5, 'reserve-with-timeout'],
  [4, 'reserve-job'],
  [4, 'delete'],
  [3, 'release'],
  [3, 'bury'],
  [2, 'touch'],
  [4, 'watch'],
  [3, 'ignore'],
  [3, 'peek'],
  [2, 'peek-ready'],
  [2, 'peek-delayed'],
  [2, 'peek-buried'],
  [3, 'kick'],
  [3, 'kick-job'],
  [4, 'stats-job'],
  [3, 'stats-tube'],
  [2, 'stats'],
  [2, 'list-tubes'],
  [1, 'list-tube-used'],
  [2, 'list-tubes-watched'],
  [2, 'pause-tube'],
  [0.6, 'quit'],
];

const HUGE = [
  '4294967295',
  '4294967296',
  '18446744073709551615',
  '18446744073709551616',
  '99999999999999999999999',
  '2147483648',
  '00000000000000000000001',
];

/** Generates conversations. One generator per script: it tracks how many job ids exist. */
export class ConversationGenerator {
  private readonly mutator: FuzzInputs;
  private readonly server = newServerFrames();

  constructor(
    private readonly rng: Prng,
    private readonly avoid: ReadonlySet<Quirk> = new Set(),
  ) {
    // '~' is not a tube name character, so no generated name is avoided.
    this.mutator = new FuzzInputs(rng, '~');
  }

  /** A script of `n` conversations. */
  script(n: number): Script {
    const out: Script = [];
    for (let i = 0; i < n; i++) out.push(this.conversation());
    return out;
  }

  conversation(): Conversation {
    const r = this.rng;
    const conns = r.weighted<number>([
      [4, 1],
      [4, 2],
      [2, 3],
    ]);
    const models = Array.from({ length: conns }, () => new FramingModel(this.server));
    /** Connections left with half a line that no safe step can complete (say `reserve-with-timeout 5`). */
    const stuck = new Set<number>();
    const steps: Step[] = [];
    const length = r.range(2, 16);
    let conn = 0;
    for (let i = 0; i < length; i++) {
      const usable = models.map((m, k) => (m.closed || stuck.has(k) ? -1 : k)).filter((k) => k >= 0);
      if (usable.length === 0) break;
      if (!usable.includes(conn) || r.chance(0.5)) conn = r.pick(usable);
      const model = models[conn]!;
      const bytes = this.safeStep(model);
      if (bytes === null) {
        stuck.add(conn);
        continue;
      }
      model.feed(bytes);
      steps.push({ conn, bytes });
    }
    return { conns, steps };
  }

  /** A step whose outcome cannot depend on time (nor touch an avoided quirk), or null. */
  private safeStep(model: FramingModel): Buffer | null {
    for (let attempt = 0; attempt < 50; attempt++) {
      const bytes = attempt < 49 ? this.step(model) : Buffer.from('list-tube-used\r\n', 'latin1');
      const f = model.clone(copyServerFrames(this.server)).feed(bytes);
      if (f.hazard === null && !f.quirks.some((q) => this.avoid.has(q))) return bytes;
    }
    return null;
  }

  private step(model: FramingModel): Buffer {
    const r = this.rng;
    const kind = r.weighted<string>([
      [46, 'valid'],
      [6, 'pipelined'],
      [10, 'scenario'],
      [18, 'mutated'],
      [4, 'mutated2'],
      [4, 'overlong'],
      [4, 'put-length'],
      [3, 'put-garbage'],
      [3, 'crlf'],
      [2, 'nul'],
      [2, 'quirk'],
      [2, 'random'],
    ]);
    // A half-sent line or body swallows what follows; finish it now and then.
    if ((model.inBody || model.partialLine > 0) && r.chance(0.3)) return Buffer.from('\r\n', 'latin1');
    switch (kind) {
      case 'valid':
        return this.valid();
      case 'pipelined':
        return Buffer.concat(Array.from({ length: r.range(2, 4) }, () => this.valid()));
      case 'scenario':
        return Buffer.from(this.scenario().map((l) => `${l}\r\n`).join(''), 'latin1');
      case 'mutated':
        return this.mutate(this.valid());
      case 'mutated2':
        return this.mutate(this.mutate(this.valid()));
      case 'overlong':
        return this.overlong();
      case 'put-length':
        return this.putWrongLength();
      case 'put-garbage':
        return this.putTrailingGarbage();
      case 'crlf':
        return this.bareCrLf();
      case 'nul':
        return this.withNul(this.valid());
      case 'quirk':
        return this.quirk();
      default:
        return this.randomBytes();
    }
  }

  // ---- arguments ---------------------------------------------------------------------------

  private id(): string {
    const r = this.rng;
    const n = this.server.allocated;
    return r.weighted<() => string>([
      [n > 0 ? 14 : 0, () => String(r.range(1, n))],
      [n > 0 ? 4 : 0, () => String(r.range(Math.max(1, n - 2), n))],
      [1, () => '0'],
      [2, () => String(n + r.range(1, 3))],
      [1, () => '18446744073709551615'],
      [1, () => String(r.u32())],
    ])();
  }

  private tube(): string {
    const r = this.rng;
    return r.chance(0.9) ? r.weighted<string>(VALID_TUBES.map((t, i) => [i < 3 ? 4 : 1, t] as const)) : r.pick(INVALID_TUBES);
  }

  private pri(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [4, () => String(r.int(10))],
      [2, () => r.pick(['1023', '1024', '0', '4294967295', '512'])],
      [2, () => String(r.int(5000))],
      [1, () => String(r.u32())],
    ])();
  }

  /** A delay or pause that cannot run out during a run: 0 or at least SAFE_SECONDS. */
  private longSeconds(zeroChance: number): string {
    const r = this.rng;
    if (r.chance(zeroChance)) return '0';
    return r.weighted<() => string>([
      [3, () => String(r.range(SAFE_SECONDS, 100_000))],
      [1, () => '4294967295'],
      [1, () => String(Math.max(SAFE_SECONDS, r.u32()))],
    ])();
  }

  private ttr(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [3, () => String(r.range(SAFE_SECONDS, 100_000))],
      [1, () => '4294967295'],
      [1, () => String(SAFE_SECONDS)],
    ])();
  }

  private body(): Buffer {
    const r = this.rng;
    const n = r.weighted<() => number>([
      [3, () => 0],
      [40, () => r.range(1, 16)],
      [20, () => r.range(17, 300)],
      [4, () => r.range(301, 5000)],
      [0.3, () => 65535],
    ])();
    const content = r.weighted<string>([
      [4, 'text'],
      [3, 'binary'],
      [2, 'crlf'],
      [1, 'commands'],
    ]);
    let b: Buffer;
    switch (content) {
      case 'text':
        b = Buffer.from(Array.from({ length: n }, () => 'abcdefghij XYZ-0123'[r.int(19)]).join(''), 'latin1');
        break;
      case 'binary':
        b = r.bytes(n);
        break;
      case 'crlf': {
        b = Buffer.from(Array.from({ length: n }, () => r.pick(['\r', '\n', 'a', '\r\n'.charAt(r.int(2))])).join(''), 'latin1');
        if (n >= 2 && r.chance(0.5)) b.write('\r\n', r.int(n - 1), 'latin1');
        break;
      }
      default:
        b = Buffer.from('\r\nput 0 0 1000 1\r\nx\r\nquit\r\nstats\r\n'.repeat(Math.ceil(n / 30) + 1).slice(0, n), 'latin1');
    }
    return b;
  }

  // ---- valid commands ----------------------------------------------------------------------

  private valid(): Buffer {
    const r = this.rng;
    const kind = r.weighted(KIND_WEIGHTS);
    if (kind === 'put') {
      const body = this.body();
      const head = `put ${this.pri()} ${this.longSeconds(0.8)} ${this.ttr()} ${body.length}\r\n`;
      return Buffer.concat([Buffer.from(head, 'latin1'), body, Buffer.from('\r\n', 'latin1')]);
    }
    return Buffer.from(`${this.validLine(kind)}\r\n`, 'latin1');
  }

  private validLine(kind: Exclude<Kind, 'put'>): string {
    const r = this.rng;
    switch (kind) {
      case 'reserve-with-timeout':
        return 'reserve-with-timeout 0';
      case 'reserve-job':
      case 'delete':
      case 'touch':
      case 'peek':
      case 'kick-job':
      case 'stats-job':
        return `${kind} ${this.id()}`;
      case 'release':
        return `release ${this.id()} ${this.pri()} ${this.longSeconds(0.7)}`;
      case 'bury':
        return `bury ${this.id()} ${this.pri()}`;
      case 'kick':
        return `kick ${r.pick(['0', '1', '1', '2', '3', '10', '100', '4294967295'])}`;
      case 'use':
      case 'watch':
      case 'ignore':
      case 'stats-tube':
        return `${kind} ${this.tube()}`;
      case 'pause-tube':
        return `pause-tube ${this.tube()} ${this.longSeconds(0.4)}`;
      default:
        return kind;
    }
  }

  /**
   * A few commands that act on one job or tube together, so that reservations, burials, kicks,
   * pauses and tube reference counts are exercised more often than random ids would manage.
   */
  private scenario(): string[] {
    const r = this.rng;
    const id = this.id();
    const t = this.tube();
    const act = (): string =>
      r.pick([
        `bury ${id} ${this.pri()}`,
        `release ${id} ${this.pri()} ${this.longSeconds(0.6)}`,
        `touch ${id}`,
        `delete ${id}`,
        `stats-job ${id}`,
        `peek ${id}`,
        `kick-job ${id}`,
      ]);
    switch (r.int(8)) {
      case 0:
        return [`reserve-job ${id}`, act(), ...(r.chance(0.5) ? [act()] : [])];
      case 1:
        return [`reserve-job ${id}`, `bury ${id} ${this.pri()}`, r.pick([`kick-job ${id}`, `kick ${r.range(1, 3)}`, 'peek-buried', `stats-job ${id}`])];
      case 2:
        return ['reserve-with-timeout 0', act(), ...(r.chance(0.5) ? ['stats'] : [])];
      case 3:
        return [`pause-tube ${t} ${this.longSeconds(0)}`, `watch ${t}`, 'reserve-with-timeout 0', `pause-tube ${t} 0`, 'reserve-with-timeout 0', `stats-tube ${t}`];
      case 4:
        return [`use ${t}`, `watch ${t}`, r.pick(['ignore default', `ignore ${this.tube()}`]), 'list-tubes', 'list-tubes-watched', 'reserve-with-timeout 0'];
      case 5:
        return [`reserve-job ${id}`, 'quit'];
      case 6:
        return [`use ${t}`, `kick ${r.pick(['1', '2', '100'])}`, 'peek-delayed', 'peek-buried', 'peek-ready', `stats-tube ${t}`];
      default:
        return [`release ${id} ${this.pri()} 0`, `reserve-job ${id}`, `release ${id} ${this.pri()} ${this.longSeconds(0)}`, 'peek-delayed', `kick-job ${id}`];
    }
  }

  // ---- malformed input ---------------------------------------------------------------------

  private mutate(input: Buffer): Buffer {
    const r = this.rng;
    const s = input.toString('latin1');
    switch (r.int(4)) {
      case 0: {
        // a sign or an extra space in front of a number
        const nums = [...s.matchAll(/\d+/g)];
        if (nums.length === 0) break;
        const m = r.pick(nums);
        const ins = r.pick(['-', '+', ' ', '  ', '0', '-0']);
        return Buffer.from(s.slice(0, m.index) + ins + s.slice(m.index), 'latin1');
      }
      case 1: {
        // extra or missing spaces around the words of the command line
        const eol = s.indexOf('\r\n');
        const head = eol < 0 ? s : s.slice(0, eol);
        const rest = eol < 0 ? '' : s.slice(eol);
        const variants = [head.replace(' ', '  '), `${head} `, ` ${head}`, head.replace(' ', ''), head.replace(/ /g, '\t')];
        return Buffer.from(r.pick(variants) + rest, 'latin1');
      }
      case 2: {
        const nums = [...s.matchAll(/\d+/g)];
        if (nums.length === 0) break;
        const m = r.pick(nums);
        return Buffer.from(s.slice(0, m.index) + r.pick(HUGE) + s.slice(m.index + m[0].length), 'latin1');
      }
      default:
        break;
    }
    return this.mutator.mutate(input);
  }

  private overlong(): Buffer {
    const r = this.rng;
    const total = r.weighted<() => number>([
      [3, () => r.range(221, 227)],
      [3, () => r.range(200, 500)],
      [1, () => r.range(447, 450)],
    ])();
    const prefix = r.pick(['', 'put 0 0 1000 ', 'use ', 'watch ', 'pause-tube ', 'delete ', 'stats-tube ', 'kick ', 'reserve-job ']);
    const filler = r.pick(['a', '9', ' ', 'q', '0']);
    const line = (prefix + filler.repeat(total)).slice(0, total - 2);
    let s = `${line}\r\n`;
    if (r.chance(0.15)) {
      const at = r.range(1, line.length - 1);
      s = `${line.slice(0, at)}${r.pick(['\r', '\n', '\r\r'])}${line.slice(at)}\r\n`;
    }
    const tail = r.weighted<string>([
      [3, ''],
      [2, 'list-tube-used\r\n'],
      [1, 'put 0 0 1000 2\r\nhi\r\n'],
    ]);
    return Buffer.from(s + tail, 'latin1');
  }

  private putWrongLength(): Buffer {
    const r = this.rng;
    const body = this.body().subarray(0, r.int(60));
    const declared = r.weighted<() => number>([
      [4, () => Math.max(0, body.length + r.pick([-3, -2, -1, 1, 2, 3]))],
      [1, () => body.length + r.range(4, 100)],
      [1, () => r.pick([65535, 65536, 65537])],
    ])();
    const trailer = r.pick(['\r\n', '\r\n', '', '\n', '\r', 'xx', '\r\n\r\n', '\r\nlist-tube-used\r\n']);
    const head = `put ${this.pri()} 0 ${this.ttr()} ${declared}\r\n`;
    return Buffer.concat([Buffer.from(head, 'latin1'), body, Buffer.from(trailer, 'latin1')]);
  }

  private putTrailingGarbage(): Buffer {
    const r = this.rng;
    const body = this.body().subarray(0, r.int(40));
    const garbage = r.pick([' ', 'x', ' x', '\t', ' 0', '  ', 'abc', '.5']);
    const head = `put ${this.pri()} 0 ${this.ttr()} ${body.length}${garbage}\r\n`;
    return Buffer.concat([Buffer.from(head, 'latin1'), body, Buffer.from('\r\n', 'latin1')]);
  }

  private bareCrLf(): Buffer {
    const r = this.rng;
    const cmd = this.valid().toString('latin1');
    const variants = [
      '\r',
      '\n',
      '\r\n',
      '\r\r\n',
      '\n\r\n',
      'a\rb\r\n',
      cmd.replace('\r\n', '\n'),
      cmd.replace('\r\n', '\r'),
      cmd.replace('\r\n', '\n\r'),
      cmd.replace(' ', '\r'),
      cmd.replace(' ', '\n'),
      `\r${cmd}`,
      `\n${cmd}`,
    ];
    return Buffer.from(r.pick(variants), 'latin1');
  }

  private withNul(input: Buffer): Buffer {
    const r = this.rng;
    const eol = input.indexOf('\r\n');
    const at = r.int(Math.max(1, eol < 0 ? input.length : eol + 1));
    return Buffer.concat([input.subarray(0, at), Buffer.alloc(r.range(1, 2)), input.subarray(at)]);
  }

  /** Inputs the reference notes call out as quirks. */
  private quirk(): Buffer {
    const r = this.rng;
    const q = r.pick([
      'reserve-with-timeout 0abc',
      'reserve-with-timeout abc',
      'reserve-with-timeout  0',
      'reserve-with-timeout -0',
      'reserve-with-timeout +0',
      'reserve-with-timeout 0x10',
      'reserve-with-timeout \t0',
      'reserve-with-timeout ',
      'reserve-with-timeout',
      'reserve-job',
      'reservex',
      'kick 5abc',
      'kick -1',
      'kick +2',
      'kick 4294967296',
      'kick 18446744073709551616',
      'kick \t3',
      'kick  ',
      'pause-tubedefault 0',
      'pause-tube default',
      'pause-tube  default  0',
      'pause-tube -x 0',
      `pause-tube ${'p'.repeat(200)} 4294967295`,
      'quit-foo',
      'statsx',
      'stats-job',
      'stats-job ',
      'peek-ready ',
      'list-tubes ',
      'use ',
      'use  foo',
      'use foo bar',
      'delete  1',
      'delete 1 ',
      'delete +1',
      'peek 18446744073709551616',
      'peek 18446744073709551615',
      'put 00 0 1000 1\r\nx',
      'put  0  0  1000  1\r\nx',
      `put 0 ${SAFE_SECONDS} 1000 0\r\n`,
      'put 0 0 1000 1 \r\nx',
      'put\r\nx',
      'LIST-TUBES',
      ' stats',
      '',
      'a'.repeat(222),
      'a'.repeat(223),
      'a'.repeat(224),
    ]);
    return Buffer.from(`${q}\r\n`, 'latin1');
  }

  private randomBytes(): Buffer {
    const r = this.rng;
    const b = r.bytes(r.range(1, 40));
    return r.chance(0.6) ? Buffer.concat([b, Buffer.from('\r\n', 'latin1')]) : b;
  }
}
