import { A, B, put, rep, sleep } from '../dsl.js';
import type { Case } from '../types.js';

/** put: argument parsing, bodies, EXPECTED_CRLF, JOB_TOO_BIG, ids. */
export const putCases: Case[] = [
  {
    name: 'put: insert and peek',
    steps: [A.call('put 0 0 10 5\r\nhello\r\n'), A.cmd('peek 1'), A.call(put('world')), A.cmd('peek 2')],
  },
  {
    name: 'put: empty body (upstream delete_ready)',
    steps: [A.call('put 0 0 0 0\r\n\r\n'), A.cmd('peek 1'), A.cmd('delete 1'), A.cmd('peek 1')],
  },
  {
    name: 'put: binary body with CRLF, NUL and high bytes',
    steps: [
      A.call(put(Buffer.from([0x00, 0x0d, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0x80, 0x0d, 0x0d, 0x0a, 0x0a]))),
      A.cmd('peek 1'),
      A.cmd('reserve'),
      A.cmd('stats-job 1'),
    ],
  },
  {
    name: 'put: body that looks like commands',
    steps: [A.call(put('delete 1\r\nquit\r\n')), A.cmd('peek-ready'), A.cmd('list-tube-used')],
  },
  {
    name: 'put: body of CRLFs only',
    steps: [A.call('put 0 0 1 4\r\n\r\n\r\n\r\n'), A.cmd('peek 1')],
  },
  {
    name: 'put: leading zeros and double spaces are accepted',
    steps: [
      A.call('put 00 0 0 1\r\na\r\n'),
      A.call('put  0  0  0  1\r\nb\r\n'),
      A.call('put 0 0 0 0001\r\nc\r\n'),
      A.cmd('stats-job 2'),
    ],
  },
  {
    name: 'put: too few or too many fields',
    steps: [
      A.call('put 0 0 1\r\nx\r\n', 2),
      A.call('put 0 0\r\n'),
      A.call('put 0 0 1 1 1\r\nx\r\n', 2),
      A.call('put \r\n'),
      A.call('put\r\n'),
      A.cmd('list-tube-used'),
    ],
  },
  {
    name: 'put: trailing garbage gives BAD_FORMAT and the body is parsed as a command',
    steps: [A.call('put 0 0 0 1 \r\nx\r\n', 2), A.call(put('y')), A.cmd('stats-job 1')],
    refIncludes: ['BAD_FORMAT', 'UNKNOWN_COMMAND', 'INSERTED 1'],
  },
  {
    name: 'put: trailing garbage, body is a command that gets answered',
    steps: [A.call('put 0 0 1 14x\r\nlist-tube-used\r\n', 2), A.call('put 0 0 1 5 junk\r\nstats-tube default\r\n', 2)],
  },
  {
    name: 'put: trailing garbage counts cmd-put but uses no id',
    steps: [A.call('put 0 0 1 1 z\r\nx\r\n', 2), A.call('put 1 0 1 1\r\nq\r\n'), A.cmd('stats')],
  },
  {
    name: 'put: bad numbers are BAD_FORMAT (upstream negative_delay, garbage_priority, negative_priority)',
    steps: [
      A.call('put 512 -1 100 0\r\n\r\n', 2),
      A.call('put -1kkdj9djjkd9 0 100 1\r\na\r\n', 2),
      A.call('put -1 0 100 1\r\na\r\n', 2),
      A.call('put +1 0 100 1\r\na\r\n', 2),
      A.call('put 0 0 +1 1\r\na\r\n', 2),
      A.call('put 0 0 1 -1\r\n'),
      A.call('put 1.5 0 1 1\r\na\r\n', 2),
      A.call(put('ok')),
    ],
  },
  {
    name: 'put: priority bounds (upstream max_priority, too_big_priority)',
    steps: [
      A.call('put 4294967295 0 100 1\r\na\r\n'),
      A.call('put 4294967296 0 100 1\r\nb\r\n', 2),
      A.call('put 99999999999999999999 0 100 1\r\nc\r\n', 2),
      A.cmd('stats-job 1'),
    ],
  },
  {
    name: 'put: delay and ttr bounds',
    steps: [
      A.call('put 0 4294967295 4294967295 1\r\na\r\n'),
      A.call('put 0 4294967296 0 1\r\nb\r\n', 2),
      A.call('put 0 0 4294967296 1\r\nc\r\n', 2),
      A.cmd('stats-job 1'),
    ],
  },
  {
    name: 'put: ttr 0 is stored as 1 (upstream ttr_small)',
    steps: [A.call('put 0 0 0 1\r\na\r\n'), A.cmd('stats-job 1')],
    refIncludes: ['ttr: 1\\n'],
  },
  {
    name: 'put: large ttrs are stored exactly (upstream ttrlarge)',
    steps: [120, 4294, 4295, 4296, 4297, 5000, 21600].flatMap((ttr, i) => [
      A.call(put('a', { ttr })),
      A.cmd(`stats-job ${i + 1}`),
    ]),
  },
  {
    name: 'put: delayed job (upstream small_delay, zero_delay)',
    steps: [A.call('put 0 1 1 0\r\n\r\n'), A.call('put 0 0 1 0\r\n\r\n'), A.call(put('d', { delay: 5 })), A.cmd('stats-job 3'), A.cmd('stats-job 2')],
  },
  {
    name: 'put: EXPECTED_CRLF leaves the stream out of step',
    steps: [A.call('put 0 0 0 1\r\nxy\r\n'), A.cmd('list-tube-used'), A.cmd('list-tube-used'), A.call(put('z')), A.cmd('peek 2')],
    refIncludes: ['EXPECTED_CRLF', 'UNKNOWN_COMMAND', 'INSERTED 2'],
  },
  {
    name: 'put: EXPECTED_CRLF with exactly bytes+2 wrong bytes',
    steps: [A.call('put 0 0 0 1\r\nxyz'), A.cmd('list-tube-used'), A.call(put('ok'))],
    refIncludes: ['EXPECTED_CRLF'],
  },
  {
    name: 'put: EXPECTED_CRLF when the body ends in LF CR',
    steps: [A.call('put 0 0 0 2\r\nab\n\r'), A.call('put 0 0 0 2\r\nab\r\r'), A.call('put 0 0 0 2\r\nab\n\n'), A.cmd('list-tube-used')],
  },
  {
    name: 'put: failed puts use up ids',
    steps: [
      A.call('put 0 0 0 1\r\nxyz'),
      A.call('put 0 0 0 1\r\nxyz'),
      A.call(put('a')),
      A.cmd('stats'),
    ],
    refIncludes: ['INSERTED 3'],
  },
  {
    name: 'put: disconnect mid-body uses up an id',
    steps: [A.send('put 0 0 1 10\r\nabc'), sleep(50), A.close(), sleep(50), B.call(put('b')), B.cmd('stats')],
  },
  {
    name: 'put: body of exactly 65535 bytes is accepted',
    steps: [A.call(put(rep('q', 65535))), A.cmd('reserve'), A.cmd('stats-job 1')],
    refIncludes: ['INSERTED 1'],
  },
  {
    name: 'put: 65536 bytes is JOB_TOO_BIG and uses no id',
    steps: [A.call(put(rep('q', 65536))), A.call(put('small')), A.cmd('stats')],
    refIncludes: ['JOB_TOO_BIG', 'INSERTED 1'],
  },
  {
    name: 'put: JOB_TOO_BIG is sent only after the body is read',
    steps: [A.call('put 0 0 1 65536\r\n', 1, 300), A.call(`${rep('z', 65536)}\r\n`), A.cmd('list-tube-used')],
    refIncludes: ['<timeout>', 'JOB_TOO_BIG'],
  },
  {
    name: 'put: JOB_TOO_BIG does not check the body terminator',
    steps: [A.call(`put 0 0 1 65536\r\n${rep('z', 65536)}zz`), A.cmd('list-tube-used')],
  },
  {
    name: 'put: body with a CRLF in the last two bytes only',
    steps: [A.call('put 0 0 1 3\r\na\r\n\r\n'), A.cmd('peek 1')],
  },
  {
    name: 'put: job ids go up across tubes',
    steps: [A.call(put('a')), A.cmd('use t1'), A.call(put('b')), A.cmd('use t2'), A.call(put('c')), A.cmd('stats-job 3')],
  },
  {
    name: 'put: urgent threshold 1024',
    steps: [
      A.call(put('a', { pri: 1023 })),
      A.call(put('b', { pri: 1024 })),
      A.call(put('c', { pri: 0 })),
      A.cmd('stats-tube default'),
      A.cmd('stats'),
    ],
  },
];
