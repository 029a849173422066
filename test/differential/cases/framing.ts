import { A, B, put, rep } from '../dsl.js';
import type { Case } from '../types.js';

/** Line framing: CRLF, the 224-byte line limit, discarding, NUL, lone CR/LF, pipelining. */
export const framingCases: Case[] = [
  {
    name: 'framing: empty line is UNKNOWN_COMMAND',
    steps: [A.call('\r\n'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: leading space is UNKNOWN_COMMAND',
    steps: [A.cmd(' stats'), A.cmd(' list-tubes')],
  },
  {
    name: 'framing: commands are case-sensitive',
    steps: [A.cmd('LIST-TUBES'), A.cmd('Stats'), A.cmd('PUT 0 0 1 1'), A.cmd('x')],
  },
  {
    name: 'framing: unknown command (upstream unknown_command)',
    steps: [A.cmd('nont10knowncommand'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: bytes above 0x7f and control bytes are UNKNOWN_COMMAND',
    steps: [A.call('\xff\xfe\r\n'), A.call('\x01stats\r\n'), A.call('\x7f\r\n')],
  },
  {
    name: 'framing: 224-byte line (222 chars + CRLF) is parsed',
    steps: [A.call(`${rep('a', 222)}\r\n`), A.cmd('list-tube-used')],
    refIncludes: ['UNKNOWN_COMMAND'],
  },
  {
    name: 'framing: 225-byte line whose CR is byte 224 gets no reply and swallows the next line',
    steps: [
      A.call(`${rep('a', 223)}\r\n`, 1, 300),
      A.cmd('list-tube-used'),
      A.cmd('list-tube-used'),
    ],
    refIncludes: ['<timeout>', 'BAD_FORMAT'],
  },
  {
    name: 'framing: 226-byte line is discarded and answered BAD_FORMAT',
    steps: [A.call(`${rep('a', 224)}\r\n`), A.cmd('list-tube-used')],
    refIncludes: ['BAD_FORMAT'],
  },
  {
    name: 'framing: overlong line then a command in the same write',
    steps: [A.call(`${rep('a', 300)}\r\nlist-tube-used\r\n`, 2)],
    refIncludes: ['BAD_FORMAT'],
  },
  {
    name: 'framing: overlong line tail is not parsed as a command (upstream too_long_commandline)',
    steps: [A.call(`${rep('a', 500)}\r\n`), A.call(put('A', { ttr: 1 }))],
    refIncludes: ['INSERTED 1'],
  },
  {
    name: 'framing: overlong line whose tail is a valid command',
    steps: [A.call(`${rep('x', 224)}list-tube-used\r\n`), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: overlong line sent in pieces',
    steps: [
      A.send(rep('b', 150)),
      A.silent(100),
      A.send(rep('b', 150)),
      A.silent(100),
      A.call(`${rep('b', 150)}\r\n`),
      A.cmd('list-tube-used'),
    ],
  },
  {
    name: 'framing: CRLF split at the second window boundary (447 chars)',
    steps: [A.call(`${rep('a', 447)}\r\n`, 1, 300), A.cmd('list-tube-used'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: CRLF exactly after two full windows (448 chars)',
    steps: [A.call(`${rep('a', 448)}\r\n`), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: overlong put command line',
    steps: [A.call(`put 0 0 1 1${rep(' ', 230)}\r\nx\r\n`, 2), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: lone CR before CRLF gets no reply',
    steps: [A.call('a\rb\r\n', 1, 300), A.call('list-tube-used\r\n', 1, 300)],
    refIncludes: ['<timeout>'],
  },
  {
    name: 'framing: lone CR poisons the buffer until the window overflows',
    steps: [
      A.call('a\rb\r\n', 1, 300),
      A.call(`${rep('x', 250)}\r\n`, 1, 500),
      A.cmd('list-tube-used', 1, 500),
      A.cmd('list-tube-used', 1, 500),
    ],
  },
  {
    name: 'framing: CR at the end of a write, LF in the next',
    steps: [A.send('list-tube-used\r'), A.silent(150), A.call('\n'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: bare LF does not end a line',
    steps: [A.call('list-tube-used\n', 1, 300), A.call('\r\n'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: LF inside a line',
    steps: [A.call('use a\nb\r\n'), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: NUL byte in a command line is BAD_FORMAT',
    steps: [A.call('stats\0\r\n'), A.call('\0\r\n'), A.call('use fo\0o\r\n'), A.call('\0nonsense\r\n'), A.cmd('list-tube-used')],
    refIncludes: ['BAD_FORMAT'],
  },
  {
    name: 'framing: NUL byte in a put line',
    steps: [A.call('put 0 0 1 1\0\r\nx\r\n', 2), A.call('put 0\0 0 1 1\r\nx\r\n', 2), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: two commands in one packet (upstream 2cmdpacket)',
    steps: [A.call('use a\r\nuse b\r\n', 2)],
  },
  {
    name: 'framing: many pipelined commands in one write',
    steps: [
      A.call(
        [
          'use p',
          'watch p',
          'ignore default',
          ...Array.from({ length: 10 }, (_, i) => `put ${i % 3} 0 10 2\r\nj${i}`),
          'peek-ready',
          'reserve',
          'reserve-with-timeout 0',
          'delete 1',
          'release 4 5 0',
          'reserve',
          'bury 7 7',
          'peek-buried',
          'kick 1',
          'stats-tube p',
          'list-tubes',
          'list-tubes-watched',
          'list-tube-used',
          'bogus',
          'stats-job 4',
        ]
          .map((l) => `${l}\r\n`)
          .join(''),
        29,
      ),
    ],
  },
  {
    name: 'framing: pipelined puts with bodies containing CRLF',
    steps: [A.call(`${put('a\r\nb')}${put('\r\n')}${put('')}${put('put 0 0 1 1')}peek 1\r\npeek 2\r\npeek 3\r\npeek 4\r\n`, 8)],
  },
  {
    name: 'framing: a put sent one byte per write',
    steps: [
      ...Array.from(put('hello', { pri: 5, ttr: 3 }) as string, (ch) => A.send(ch)),
      A.read(),
      A.cmd('peek 1'),
    ],
  },
  {
    name: 'framing: put body arrives in a later write',
    steps: [A.call('put 0 0 1 5\r\n', 1, 200), A.call('he', 1, 200), A.call('llo\r', 1, 200), A.call('\nlist-tube-used\r\n', 2)],
  },
  {
    name: 'framing: tab is not a separator',
    steps: [A.cmd('use\tfoo'), A.cmd('delete\t1'), A.cmd('peek-ready\t'), A.call('put 0\t0 1 1\r\nx\r\n', 2), A.cmd('list-tube-used')],
  },
  {
    name: 'framing: command answered while another connection sends a partial line',
    steps: [B.send('list-tube'), A.cmd('list-tube-used'), B.call('-used\r\n')],
  },
];
