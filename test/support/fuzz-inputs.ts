import type { Prng } from './prng.js';

/**
 * Generates fuzz inputs for the beanstalkd protocol: random bytes, and valid commands mutated by
 * bit flips, truncation, CR/LF damage, huge numbers, NUL bytes, odd tube names, put headers whose
 * length does not match the body, and overlong lines. Deterministic for a given Prng.
 *
 * Tube names never start with `avoidPrefix`, so a well-behaved client can own a tube the fuzzer
 * never touches (no pause-tube, kick or use on it).
 */

const NAME_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()';

const HUGE_NUMBERS = [
  '4294967295',
  '4294967296',
  '18446744073709551615',
  '18446744073709551616',
  '99999999999999999999999999999999999999',
  '9007199254740993',
  '2147483647',
  '2147483648',
  '-1',
  '-0',
  '+1',
  '0x10',
  '1e9',
  '3.5',
  'NaN',
  'Infinity',
  '',
  ' ',
  '00000000000000000000000000000000000000001',
  '١٢',
];

const COMMAND_WORDS = [
  'put', 'peek', 'peek-ready', 'peek-delayed', 'peek-buried', 'reserve', 'reserve-with-timeout', 'reserve-job',
  'delete', 'release', 'bury', 'kick', 'kick-job', 'touch', 'stats', 'stats-job', 'stats-tube', 'use', 'watch',
  'ignore', 'list-tubes', 'list-tube-used', 'list-tubes-watched', 'pause-tube',
];

/**
 * True if `input` probably ends the useful life of its connection: a quit, or a put header that
 * declares far more body bytes than follow (the server then swallows everything after it).
 * The fuzzer sends such inputs last on their connection, so the rest are still parsed.
 */
export function isTerminal(input: Buffer): boolean {
  if (input.subarray(0, 4).toString('latin1') === 'quit') return true;
  if (input.subarray(0, 4).toString('latin1') !== 'put ') return false;
  const eol = input.indexOf('\r\n');
  if (eol < 0) return false;
  const m = /^put +\d+ +\d+ +\d+ +(\d+)/.exec(input.subarray(0, eol).toString('latin1'));
  if (m === null) return false;
  return Number(m[1]) > input.length - eol - 2 + 64;
}

export class FuzzInputs {
  /** Counts of each generator used, for the report. */
  readonly counts = new Map<string, number>();

  constructor(
    private readonly rng: Prng,
    private readonly avoidPrefix: string,
  ) {}

  private count(kind: string): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  /** A number as a valid command would carry it. */
  private num(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [4, () => String(r.int(10))],
      [3, () => String(r.int(100_000))],
      [1, () => String(r.u32())],
      [1, () => '4294967295'],
      [1, () => '0'],
    ])();
  }

  private id(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [6, () => String(r.range(1, 200_000))],
      [1, () => '0'],
      [1, () => '18446744073709551615'],
      [1, () => String(r.u32() * 4096 + r.u32())],
    ])();
  }

  /** A tube name: usually valid, sometimes not (bad characters, leading '-', too long, empty). */
  tubeName(): string {
    const r = this.rng;
    for (;;) {
      const kind = r.weighted<string>([
        [6, 'short'],
        [1, 'long'],
        [1, 'max'],
        [1, 'toolong'],
        [1, 'badchars'],
        [1, 'dash'],
        [1, 'fixed'],
      ]);
      let name: string;
      switch (kind) {
        case 'short':
          name = this.nameChars(r.range(1, 8));
          break;
        case 'long':
          name = this.nameChars(r.range(9, 199));
          break;
        case 'max':
          name = this.nameChars(200);
          break;
        case 'toolong':
          name = this.nameChars(r.range(201, 400));
          break;
        case 'badchars':
          name = this.nameChars(r.range(0, 5)) + r.pick([' ', '*', '\t', '#', '"', "'", '\x7f', '\xff', 'é', '%', ':']) + this.nameChars(r.range(0, 5));
          break;
        case 'dash':
          name = `-${this.nameChars(r.range(0, 10))}`;
          break;
        default:
          name = r.pick(['default', 'fz', 'fz-', 'a(b)', '$;+/', 'x_y', 'default ']);
      }
      if (!name.startsWith(this.avoidPrefix)) return name;
    }
  }

  private nameChars(n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += NAME_CHARS[this.rng.int(NAME_CHARS.length)];
    return s;
  }

  private body(n: number): Buffer {
    const r = this.rng;
    if (r.chance(0.5)) return r.bytes(n);
    return Buffer.from('x'.repeat(n), 'latin1');
  }

  /** One well-formed command (a put includes its body). Blocking reserves and quit are rare. */
  validCommand(): Buffer {
    const r = this.rng;
    const t = (): string => this.tubeName();
    const line = (s: string): Buffer => Buffer.from(`${s}\r\n`, 'latin1');
    const op = r.weighted<string>([
      [10, 'put'],
      [2, 'peek'],
      [1, 'peek-ready'],
      [1, 'peek-delayed'],
      [1, 'peek-buried'],
      [3, 'reserve-with-timeout 0'],
      [0.2, 'reserve-with-timeout n'],
      [0.2, 'reserve'],
      [2, 'reserve-job'],
      [3, 'delete'],
      [2, 'release'],
      [2, 'bury'],
      [2, 'kick'],
      [2, 'kick-job'],
      [1, 'touch'],
      [1, 'stats'],
      [2, 'stats-job'],
      [2, 'stats-tube'],
      [3, 'use'],
      [3, 'watch'],
      [2, 'ignore'],
      [1, 'list-tubes'],
      [1, 'list-tube-used'],
      [1, 'list-tubes-watched'],
      [0.3, 'quit'],
      [1, 'pause-tube'],
    ]);
    switch (op) {
      case 'put': {
        const n = r.chance(0.9) ? r.int(64) : r.int(2048);
        const delay = r.chance(0.8) ? '0' : this.num();
        return Buffer.concat([line(`put ${this.num()} ${delay} ${this.num()} ${n}`), this.body(n), Buffer.from('\r\n')]);
      }
      case 'peek':
      case 'reserve-job':
      case 'delete':
      case 'kick-job':
      case 'touch':
      case 'stats-job':
        return line(`${op} ${this.id()}`);
      case 'reserve-with-timeout n':
        return line(`reserve-with-timeout ${r.int(2)}`);
      case 'release':
        return line(`release ${this.id()} ${this.num()} ${r.chance(0.7) ? '0' : this.num()}`);
      case 'bury':
        return line(`bury ${this.id()} ${this.num()}`);
      case 'kick':
        return line(`kick ${this.num()}`);
      case 'stats-tube':
      case 'use':
      case 'watch':
      case 'ignore':
        return line(`${op} ${t()}`);
      case 'pause-tube':
        return line(`pause-tube ${t()} ${r.chance(0.5) ? String(r.int(3)) : this.num()}`);
      default:
        return line(op);
    }
  }

  /** Applies one random mutation. */
  mutate(input: Buffer): Buffer {
    const r = this.rng;
    const b = Buffer.from(input);
    const at = (len: number): number => r.int(Math.max(1, len));
    const kind = r.weighted<string>([
      [3, 'bitflip'],
      [2, 'truncate'],
      [2, 'dupcrlf'],
      [2, 'dropcrlf'],
      [1, 'bare'],
      [2, 'hugenum'],
      [2, 'nul'],
      [2, 'tube'],
      [1, 'insertbytes'],
      [1, 'deletebytes'],
      [1, 'space'],
      [1, 'word'],
      [1, 'case'],
    ]);
    this.count(`mutate:${kind}`);
    switch (kind) {
      case 'bitflip': {
        if (b.length === 0) return b;
        const flips = r.range(1, 3);
        for (let i = 0; i < flips; i++) {
          const p = at(b.length);
          b[p] = b[p]! ^ (1 << r.int(8));
        }
        return b;
      }
      case 'truncate':
        return b.subarray(0, at(b.length));
      case 'dupcrlf': {
        const p = b.indexOf('\r\n');
        if (p < 0) return Buffer.concat([b, Buffer.from('\r\n\r\n')]);
        const extra = r.pick(['\r\n', '\r', '\n', '\r\r\n', '\n\r']);
        return Buffer.concat([b.subarray(0, p), Buffer.from(extra, 'latin1'), b.subarray(p)]);
      }
      case 'dropcrlf': {
        const p = r.chance(0.5) ? b.indexOf('\r') : b.indexOf('\n');
        if (p < 0) return b;
        return Buffer.concat([b.subarray(0, p), b.subarray(p + 1)]);
      }
      case 'bare': {
        const p = at(b.length);
        return Buffer.concat([b.subarray(0, p), Buffer.from(r.pick(['\r', '\n', '\r\r', '\n\n']), 'latin1'), b.subarray(p)]);
      }
      case 'hugenum': {
        const s = b.toString('latin1');
        const nums = [...s.matchAll(/\d+/g)];
        if (nums.length === 0) return Buffer.from(`${s}${r.pick(HUGE_NUMBERS)}`, 'latin1');
        const m = r.pick(nums);
        return Buffer.from(s.slice(0, m.index) + r.pick(HUGE_NUMBERS) + s.slice(m.index + m[0].length), 'latin1');
      }
      case 'nul': {
        const p = at(b.length);
        return Buffer.concat([b.subarray(0, p), Buffer.alloc(r.range(1, 3)), b.subarray(p)]);
      }
      case 'tube': {
        const s = b.toString('latin1');
        const sp = s.indexOf(' ');
        if (sp < 0) return Buffer.from(`${s.replace(/\r\n$/, '')} ${this.tubeName()}\r\n`, 'latin1');
        const end = s.indexOf('\r\n', sp);
        return Buffer.from(`${s.slice(0, sp + 1)}${this.tubeName()}${end < 0 ? '' : s.slice(end)}`, 'latin1');
      }
      case 'insertbytes': {
        const p = at(b.length);
        return Buffer.concat([b.subarray(0, p), r.bytes(r.range(1, 16)), b.subarray(p)]);
      }
      case 'deletebytes': {
        const p = at(b.length);
        return Buffer.concat([b.subarray(0, p), b.subarray(Math.min(b.length, p + r.range(1, 8)))]);
      }
      case 'space': {
        const p = at(b.length);
        return Buffer.concat([b.subarray(0, p), Buffer.from(r.pick([' ', '  ', '\t', ' \t '])), b.subarray(p)]);
      }
      case 'word': {
        const s = b.toString('latin1');
        const sp = s.search(/[ \r]/);
        return Buffer.from(r.pick(COMMAND_WORDS) + (sp < 0 ? '' : s.slice(sp)), 'latin1');
      }
      default: {
        const s = b.toString('latin1');
        return Buffer.from(r.chance(0.5) ? s.toUpperCase() : s.replace(/-/g, '_'), 'latin1');
      }
    }
  }

  /** A put whose declared length is not the body's length (or is absurd). */
  private putWrongLength(): Buffer {
    const r = this.rng;
    const actual = r.int(80);
    const declared = r.weighted<() => string>([
      [4, () => String(Math.max(0, actual + r.range(-3, 3)))],
      [1, () => String(actual + r.range(4, 300))],
      [1, () => '65535'],
      [1, () => '65536'],
      [1, () => r.pick(HUGE_NUMBERS)],
    ])();
    const trailer = r.pick(['\r\n', '\r\n', '', '\n', '\r', 'xx', '\r\n\r\n']);
    return Buffer.concat([Buffer.from(`put ${this.num()} 0 ${this.num()} ${declared}\r\n`), this.body(actual), Buffer.from(trailer, 'latin1')]);
  }

  /** Lines around and far beyond the 224-byte limit, with CRLF at awkward places. */
  private overlong(): Buffer {
    const r = this.rng;
    const len = r.weighted<() => number>([
      [3, () => r.range(218, 230)],
      [2, () => r.range(231, 1000)],
      [1, () => r.range(1000, 6000)],
    ])();
    const prefix = r.pick(['', 'put 0 0 10 ', 'use ', 'watch ', 'pause-tube ', 'delete ', 'stats-tube ', 'kick ']);
    const filler = r.pick(['a', '9', ' ', 'x\r', '\0', '-']);
    let s = prefix;
    while (s.length < len) s += filler;
    s = s.slice(0, len);
    const tail = r.pick(['\r\n', '\r\n', '', '\r', '\n', '\r\nlist-tube-used\r\n']);
    return Buffer.from(s + tail, 'latin1');
  }

  /** Random bytes, sometimes with a CRLF at the end so they form a "command". */
  private randomBytes(): Buffer {
    const r = this.rng;
    const n = r.weighted<() => number>([
      [5, () => r.range(1, 32)],
      [3, () => r.range(33, 300)],
      [1, () => r.range(300, 3000)],
    ])();
    const b = r.bytes(n);
    return r.chance(0.6) ? Buffer.concat([b, Buffer.from('\r\n')]) : b;
  }

  /** One fuzz input. */
  next(): Buffer {
    const r = this.rng;
    const kind = r.weighted<string>([
      [3, 'random'],
      [5, 'mutated'],
      [1, 'mutated2'],
      [2, 'valid'],
      [1, 'putlen'],
      [1, 'overlong'],
      [0.5, 'concat'],
    ]);
    this.count(kind);
    switch (kind) {
      case 'random':
        return this.randomBytes();
      case 'mutated':
        return this.mutate(this.validCommand());
      case 'mutated2':
        return this.mutate(this.mutate(this.mutate(this.validCommand())));
      case 'valid':
        return this.validCommand();
      case 'putlen':
        return this.putWrongLength();
      case 'overlong':
        return this.overlong();
      default:
        return Buffer.concat([this.validCommand(), this.randomBytes(), this.mutate(this.validCommand())]);
    }
  }
}
