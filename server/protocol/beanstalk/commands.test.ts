import { describe, expect, it } from 'vitest';
import { TUBE_NAME_CHARS } from '../../../shared/limits.js';
import { parseCommand, type Command } from './commands.js';

const BAD: Command = { op: 'bad-format' };
const BAD_PAUSE: Command = { op: 'bad-format', countPauseTube: true };
const UNKNOWN: Command = { op: 'unknown' };

const put = (pri: number, delay: number, ttr: number, bytes: number, trailingGarbage = false): Command => ({
  op: 'put',
  pri,
  delay,
  ttr,
  bytes,
  trailingGarbage,
});
const rwt = (timeout: number): Command => ({ op: 'reserve-with-timeout', timeout });
const kick = (bound: number): Command => ({ op: 'kick', bound });
const pause = (tube: string, delay: number): Command => ({ op: 'pause-tube', tube, delay });

const U32_MAX = '4294967295';
const U64_MAX = '18446744073709551615';
const NAME_200 = 'n'.repeat(200);
const NAME_201 = 'n'.repeat(201);

/** [line without CRLF (latin1), expected command] */
type Row = [string, Command];

const tables: Record<string, Row[]> = {
  'put': [
    ['put 1 2 3 4', put(1, 2, 3, 4)],
    ['put 00 0 0 1', put(0, 0, 0, 1)],
    ['put 0001 0002 0003 0004', put(1, 2, 3, 4)],
    ['put  0  0  0  1', put(0, 0, 0, 1)],
    [`put ${U32_MAX} ${U32_MAX} ${U32_MAX} ${U32_MAX}`, put(4294967295, 4294967295, 4294967295, 4294967295)],
    // protocol: the size limit is checked by the dispatcher (JOB_TOO_BIG), not here.
    ['put 0 0 0 65536', put(0, 0, 0, 65536)],
    // protocol: trailing garbage is BAD_FORMAT, but only after the JOB_TOO_BIG check.
    ['put 0 0 0 1 ', put(0, 0, 0, 1, true)],
    ['put 0 0 0 1x', put(0, 0, 0, 1, true)],
    ['put 0 0 0 1 2', put(0, 0, 0, 1, true)],
    ['put 0 0 0 1\t', put(0, 0, 0, 1, true)],
    ['put 4294967296 0 0 1', BAD],
    ['put 0 4294967296 0 1', BAD],
    ['put 0 0 4294967296 1', BAD],
    ['put 0 0 0 4294967296', BAD],
    [`put 0 0 0 ${'9'.repeat(100)}`, BAD],
    ['put 0 0 0', BAD],
    ['put 0 0 0 ', BAD],
    ['put +1 0 0 1', BAD],
    ['put -1 0 0 1', BAD],
    ['put 0 0 0 -1', BAD],
    ['put 0\t0 0 1', BAD],
    ['put a b c d', BAD],
    ['put ', BAD],
    ['put', UNKNOWN],
    ['put\t0 0 0 1', UNKNOWN],
    ['puts 0 0 0 1', UNKNOWN],
    ['PUT 0 0 0 1', UNKNOWN],
  ],
  'job ids (u64)': [
    ['peek 1', { op: 'peek', id: 1 }],
    ['peek 0', { op: 'peek', id: 0 }],
    ['peek 007', { op: 'peek', id: 7 }],
    [`peek ${'0'.repeat(30)}42`, { op: 'peek', id: 42 }],
    ['peek  1', { op: 'peek', id: 1 }],
    ['peek 9007199254740991', { op: 'peek', id: 9007199254740991 }],
    // Ids beyond 2^53 cannot exist, so they are carried as -1 (NOT_FOUND).
    ['peek 9007199254740992', { op: 'peek', id: -1 }],
    [`peek ${U64_MAX}`, { op: 'peek', id: -1 }],
    ['peek 18446744073709551616', BAD],
    ['peek 99999999999999999999999', BAD],
    ['peek 1 ', BAD],
    ['peek 1x', BAD],
    ['peek +1', BAD],
    ['peek -1', BAD],
    ['peek x', BAD],
    ['peek \t1', BAD],
    ['peek ', BAD],
    ['peek', UNKNOWN],
    ['reserve-job 5', { op: 'reserve-job', id: 5 }],
    ['reserve-job  5', { op: 'reserve-job', id: 5 }],
    ['reserve-job ', BAD],
    ['reserve-job 5 ', BAD],
    ['delete 1', { op: 'delete', id: 1 }],
    ['delete  1', { op: 'delete', id: 1 }],
    [`delete ${U64_MAX}`, { op: 'delete', id: -1 }],
    ['delete 1 ', BAD],
    ['delete +1', BAD],
    ['delete ', BAD],
    ['delete', UNKNOWN],
    ['deletex 1', UNKNOWN],
    ['kick-job 3', { op: 'kick-job', id: 3 }],
    ['kick-job ', BAD],
    ['kick-job 3x', BAD],
    ['kick-job', UNKNOWN],
    ['touch 9', { op: 'touch', id: 9 }],
    ['touch ', BAD],
    ['touch 9 9', BAD],
    ['touch', UNKNOWN],
    ['stats-job 2', { op: 'stats-job', id: 2 }],
    ['stats-job ', BAD],
    ['stats-job 2 ', BAD],
    // protocol: a bare stats-job falls into the `stats` prefix, whose line must be exactly `stats`.
    ['stats-job', BAD],
  ],
  'release and bury': [
    ['release 1 2 3', { op: 'release', id: 1, pri: 2, delay: 3 }],
    ['release  1  2  3', { op: 'release', id: 1, pri: 2, delay: 3 }],
    [`release ${U64_MAX} ${U32_MAX} ${U32_MAX}`, { op: 'release', id: -1, pri: 4294967295, delay: 4294967295 }],
    ['release 1 2', BAD],
    ['release 1 2 3 ', BAD],
    ['release 1 2 3x', BAD],
    ['release 1 4294967296 0', BAD],
    ['release 1 0 4294967296', BAD],
    ['release 18446744073709551616 0 0', BAD],
    ['release ', BAD],
    ['release', UNKNOWN],
    ['bury 1 2', { op: 'bury', id: 1, pri: 2 }],
    ['bury 01 02', { op: 'bury', id: 1, pri: 2 }],
    ['bury 1', BAD],
    ['bury 1 2 3', BAD],
    ['bury 1 2 ', BAD],
    ['bury 1 -2', BAD],
    ['bury', UNKNOWN],
  ],
  'kick (strtoul)': [
    ['kick 5', kick(5)],
    ['kick 0', kick(0)],
    ['kick 007', kick(7)],
    ['kick  7', kick(7)],
    ['kick \t7', kick(7)],
    ['kick 5abc', kick(5)],
    ['kick 5 ', kick(5)],
    ['kick -1', kick(4294967295)],
    ['kick +2', kick(2)],
    [`kick ${U32_MAX}`, kick(4294967295)],
    ['kick 4294967296', kick(0)],
    ['kick 4294967297', kick(1)],
    [`kick ${U64_MAX}`, kick(4294967295)],
    ['kick -18446744073709551615', kick(1)],
    // 9 digits are read without BigInt, 10 with it: the same rules on both sides.
    ['kick 999999999', kick(999999999)],
    ['kick 0000000001', kick(1)],
    ['kick -0', kick(0)],
    ['kick -999999999', kick(4294967296 - 999999999)],
    ['kick \v\f\r\n5', kick(5)],
    // ERANGE
    ['kick 18446744073709551616', BAD],
    ['kick -18446744073709551616', BAD],
    // no digits
    ['kick abc', BAD],
    ['kick -', BAD],
    ['kick +', BAD],
    ['kick - 1', BAD],
    ['kick ', BAD],
    ['kick', UNKNOWN],
    ['kickx 1', UNKNOWN],
  ],
  'reserve and reserve-with-timeout (1.12 strtol)': [
    ['reserve', { op: 'reserve' }],
    ['reserve ', BAD],
    ['reservex', BAD],
    // protocol: these fall into the `reserve` prefix, whose line must be exactly `reserve`.
    ['reserve-with-timeout', BAD],
    ['reserve-job', BAD],
    ['reserve-with-timeoutx 5', BAD],
    ['reserve-with-timeout 0', rwt(0)],
    ['reserve-with-timeout 5', rwt(5)],
    ['reserve-with-timeout 007', rwt(7)],
    ['reserve-with-timeout  5', rwt(5)],
    ['reserve-with-timeout \t5', rwt(5)],
    ['reserve-with-timeout +3', rwt(3)],
    ['reserve-with-timeout abc', rwt(0)],
    ['reserve-with-timeout ', rwt(0)],
    ['reserve-with-timeout -', rwt(0)],
    ['reserve-with-timeout 5abc', rwt(5)],
    ['reserve-with-timeout 5 6', rwt(5)],
    ['reserve-with-timeout -1', rwt(-1)],
    ['reserve-with-timeout -0', rwt(0)],
    ['reserve-with-timeout 999999999', rwt(999999999)],
    ['reserve-with-timeout -999999999', rwt(-999999999)],
    ['reserve-with-timeout 0000000005', rwt(5)],
    ['reserve-with-timeout 1000000000', rwt(1000000000)],
    ['reserve-with-timeout 2147483647', rwt(2147483647)],
    // The long is truncated to an int.
    ['reserve-with-timeout 2147483648', rwt(-2147483648)],
    ['reserve-with-timeout 4294967295', rwt(-1)],
    ['reserve-with-timeout 4294967296', rwt(0)],
    ['reserve-with-timeout 99999999999', rwt(99999999999 % 2 ** 32)],
    ['reserve-with-timeout 9223372036854775807', rwt(-1)],
    ['reserve-with-timeout -9223372036854775808', rwt(0)],
    // Beyond a long: ERANGE.
    ['reserve-with-timeout 9223372036854775808', BAD],
    ['reserve-with-timeout -9223372036854775809', BAD],
    [`reserve-with-timeout ${'9'.repeat(100)}`, BAD],
  ],
  'commands without arguments': [
    ['peek-ready', { op: 'peek-ready' }],
    ['peek-delayed', { op: 'peek-delayed' }],
    ['peek-buried', { op: 'peek-buried' }],
    ['peek-ready ', BAD],
    ['peek-delayed ', BAD],
    ['peek-buried ', BAD],
    ['peek-readyx', BAD],
    ['peek-buried 1', BAD],
    ['peek-', UNKNOWN],
    ['peek-foo', UNKNOWN],
    ['stats', { op: 'stats' }],
    ['stats ', BAD],
    ['statsx', BAD],
    ['stats-tube', BAD],
    ['list-tubes', { op: 'list-tubes' }],
    ['list-tube-used', { op: 'list-tube-used' }],
    ['list-tubes-watched', { op: 'list-tubes-watched' }],
    ['list-tubes ', BAD],
    ['list-tubesx', BAD],
    ['list-tube-used ', BAD],
    ['list-tube-usedx', BAD],
    ['list-tubes-watched ', BAD],
    ['list-tubes-watchedx', BAD],
    ['list-tube', UNKNOWN],
    ['list', UNKNOWN],
    ['quit', { op: 'quit' }],
    // protocol: quit is matched by prefix only.
    ['quit-foo', { op: 'quit' }],
    ['quit ', { op: 'quit' }],
    ['quitx', { op: 'quit' }],
    ['qui', UNKNOWN],
  ],
  'unknown commands and NUL': [
    ['', UNKNOWN],
    [' ', UNKNOWN],
    [' stats', UNKNOWN],
    ['STATS', UNKNOWN],
    ['LIST-TUBES', UNKNOWN],
    ['foo', UNKNOWN],
    ['\xff', UNKNOWN],
    ['help', UNKNOWN],
    // protocol: a NUL is BAD_FORMAT before the command is identified.
    ['\0', BAD],
    ['foo\0', BAD],
    ['stats\0', BAD],
    ['put 0 0 0 1\0', BAD],
    ['use foo\0bar', BAD],
    ['pause-tube de\0fault 1', BAD],
    ['quit\0', BAD],
  ],
  'tube names': [
    ['use foo', { op: 'use', tube: 'foo' }],
    ['use default', { op: 'use', tube: 'default' }],
    [`use ${NAME_200}`, { op: 'use', tube: NAME_200 }],
    [`use ${NAME_201}`, BAD],
    ['use foo-', { op: 'use', tube: 'foo-' }],
    ['use -foo', BAD],
    ['use -', BAD],
    ['use ', BAD],
    ['use  foo', BAD],
    ['use foo ', BAD],
    ['use foo bar', BAD],
    ['use', UNKNOWN],
    ['usefoo', UNKNOWN],
    ['use foo*', BAD],
    ['use foo#', BAD],
    ['use foo!', BAD],
    ['use foo:', BAD],
    ['use foo,', BAD],
    ['use foo@', BAD],
    ['use foo~', BAD],
    ['use foo\\', BAD],
    ['use foo\t', BAD],
    ['use foo\n', BAD],
    ['use caf\xe9', BAD],
    ['watch foo', { op: 'watch', tube: 'foo' }],
    [`watch ${NAME_200}`, { op: 'watch', tube: NAME_200 }],
    [`watch ${NAME_201}`, BAD],
    ['watch -foo', BAD],
    ['watch ', BAD],
    ['watch', UNKNOWN],
    ['ignore foo', { op: 'ignore', tube: 'foo' }],
    ['ignore -foo', BAD],
    ['ignore foo bar', BAD],
    ['ignore', UNKNOWN],
    ['stats-tube foo', { op: 'stats-tube', tube: 'foo' }],
    [`stats-tube ${NAME_200}`, { op: 'stats-tube', tube: NAME_200 }],
    [`stats-tube ${NAME_201}`, BAD],
    ['stats-tube ', BAD],
    ['stats-tube  foo', BAD],
    ['stats-tube -foo', BAD],
  ],
  'pause-tube': [
    ['pause-tube default 0', pause('default', 0)],
    ['pause-tube foo 10', pause('foo', 10)],
    [`pause-tube default ${U32_MAX}`, pause('default', 4294967295)],
    ['pause-tube default 007', pause('default', 7)],
    ['pause-tube  default  5', pause('default', 5)],
    // protocol: the `pause-tube` prefix has no trailing space and the name reader skips spaces.
    ['pause-tubedefault 0', pause('default', 0)],
    ['pause-tubes 5', pause('s', 5)],
    ['pause-tube foo-+/;.$_() 1', pause('foo-+/;.$_()', 1)],
    // protocol: after reading the name and delay, the name is validated (verified against 1.12):
    // a leading '-' or more than 200 bytes is BAD_FORMAT, still counted.
    ['pause-tube -foo 1', BAD_PAUSE],
    ['pause-tube- 7', BAD_PAUSE],
    [`pause-tube ${NAME_201} 1`, BAD_PAUSE],
    // protocol: when the name or the delay does not parse, cmd-pause-tube is not counted.
    ['pause-tube default', BAD],
    ['pause-tube default ', BAD],
    ['pause-tube', BAD],
    ['pause-tube ', BAD],
    // The name reader takes digits as a name, and then no delay follows.
    ['pause-tube  5', BAD],
    ['pause-tube default 1 ', BAD],
    ['pause-tube default 1x', BAD],
    ['pause-tube default x', BAD],
    ['pause-tube default -1', BAD],
    ['pause-tube default +1', BAD],
    ['pause-tube default 4294967296', BAD],
    ['pause-tube default\t1', BAD],
    ['pause-tube a*b 1', BAD],
    ['pause-tube *a 1', BAD],
    ['pause-tub default 1', UNKNOWN],
  ],
};

describe('parseCommand', () => {
  for (const [group, rows] of Object.entries(tables)) {
    describe(group, () => {
      it.each(rows)('%j', (text, expected) => {
        expect(parseCommand(Buffer.from(text, 'latin1'))).toStrictEqual(expected);
      });
    });
  }

  // A line is a range of the read buffer: the bytes around it (digits, name characters, a NUL)
  // must not change what it means.
  it('parses every line alike when it sits inside a larger buffer', () => {
    for (const [text, expected] of Object.values(tables).flat()) {
      const around = Buffer.from(`99 ${text}1234567\0abc`, 'latin1');
      expect(parseCommand(around, 3, 3 + Buffer.byteLength(text, 'latin1')), text).toStrictEqual(expected);
    }
  });

  describe('each allowed tube name character', () => {
    it.each([...TUBE_NAME_CHARS])('%j', (ch) => {
      const first: Command = ch === '-' ? BAD : { op: 'use', tube: `${ch}x` };
      expect(parseCommand(Buffer.from(`use ${ch}x`, 'latin1'))).toStrictEqual(first);
      expect(parseCommand(Buffer.from(`use x${ch}`, 'latin1'))).toStrictEqual({ op: 'use', tube: `x${ch}` });
      expect(parseCommand(Buffer.from(`watch x${ch}x`, 'latin1'))).toStrictEqual({ op: 'watch', tube: `x${ch}x` });
      expect(parseCommand(Buffer.from(`pause-tube x${ch} 1`, 'latin1'))).toStrictEqual(pause(`x${ch}`, 1));
    });
  });

  it('accepts the allowed characters and nothing else (every byte value)', () => {
    const allowed = new Set(TUBE_NAME_CHARS);
    for (let b = 0; b < 256; b++) {
      const ch = String.fromCharCode(b);
      const got = parseCommand(Buffer.from(`use x${ch}`, 'latin1'));
      expect(got, `byte ${b}`).toStrictEqual(allowed.has(ch) ? { op: 'use', tube: `x${ch}` } : BAD);
    }
  });

  it('recognises every command of the protocol as its own operation', () => {
    const lines = [
      'put 0 0 0 1', 'peek 1', 'peek-ready', 'peek-delayed', 'peek-buried', 'reserve', 'reserve-with-timeout 1',
      'reserve-job 1', 'delete 1', 'release 1 0 0', 'bury 1 0', 'kick 1', 'kick-job 1', 'touch 1', 'stats-job 1',
      'stats-tube default', 'stats', 'use default', 'watch default', 'ignore default', 'list-tubes',
      'list-tube-used', 'list-tubes-watched', 'quit', 'pause-tube default 0',
    ];
    const ops = new Set(lines.map((l) => parseCommand(Buffer.from(l)).op));
    expect(ops.size).toBe(lines.length);
    expect(ops.has('bad-format')).toBe(false);
    expect(ops.has('unknown')).toBe(false);
  });
});
