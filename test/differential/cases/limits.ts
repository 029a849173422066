import { A, put, rep } from '../dsl.js';
import type { Case } from '../types.js';

/** -z: the max-job-size flag, small limits and the 1 GiB ceiling. */
export const limitCases: Case[] = [
  {
    name: 'limits: -z 10 body eats the next command (upstream too_big)',
    args: ['-z', '10'],
    steps: [A.call('put 0 0 0 11\r\ndelete 9999\r\nput 0 0 0 1\r\nx\r\n', 2)],
    refIncludes: ['JOB_TOO_BIG', 'INSERTED 1'],
  },
  {
    name: 'limits: -z 10 boundary',
    args: ['-z', '10'],
    steps: [A.call(put(rep('a', 10))), A.call(put(rep('b', 11))), A.call(put('')), A.cmd('stats')],
  },
  {
    name: 'limits: -z 0 accepts only empty bodies',
    args: ['-z', '0'],
    steps: [A.call(put('')), A.call(put('a')), A.call('put 0 0 1 1\r\nabc'), A.cmd('list-tube-used')],
  },
  {
    name: 'limits: -z 1 and a body of CRLF',
    args: ['-z1'],
    steps: [A.call(put('\r')), A.call(put('\r\n')), A.cmd('peek 1')],
  },
  {
    name: 'limits: -z 5 too-big body with a wrong terminator',
    args: ['-z', '5'],
    steps: [A.call('put 0 0 1 6\r\nabcdefgh'), A.cmd('list-tube-used'), A.call('put 0 0 1 5\r\nabcdefg'), A.cmd('list-tube-used')],
  },
  {
    name: 'limits: JOB_TOO_BIG with pipelined commands after the body',
    args: ['-z', '3'],
    steps: [A.call('put 0 0 1 4\r\nabcd\r\nuse big\r\nput 0 0 1 3\r\nabc\r\nlist-tube-used\r\n', 4)],
  },
  {
    name: 'limits: bad job sizes with -z max (upstream job_size_invalid)',
    args: ['-z', '1073741824'],
    steps: [
      A.cmd('put 0 0 0 4294967296'),
      A.cmd('put 0 0 0 10b'),
      A.cmd('put 0 0 0 --!@#$%^&&**()0b'),
      A.call('put 0 0 0 1\r\nx\r\n'),
    ],
  },
  {
    name: 'limits: -z above the maximum is clamped (upstream optz_more_than_max)',
    args: ['-z', '1073741825'],
    steps: [A.cmd('stats')],
    refIncludes: ['max-job-size: 1073741824'],
  },
  {
    name: 'limits: -z -1 wraps and is clamped',
    args: ['-z', '-1'],
    steps: [A.cmd('stats')],
  },
  {
    name: 'limits: a 1 GiB + 1 job is JOB_TOO_BIG after the whole body (upstream job_size_max_plus_1)',
    args: ['-z', '1073741824'],
    steps: [A.send('put 0 0 0 1073741825\r\n'), A.fill('x', 1073741825), A.call('\r\n', 1, 30_000), A.call(put('ok'))],
    refIncludes: ['JOB_TOO_BIG', 'INSERTED 1'],
  },
];
