import { A, B, drain, put } from '../dsl.js';
import type { Case } from '../types.js';

/**
 * A round trip before the signal: a server that set up its SIGUSR1 handler only after it began
 * listening could otherwise get the signal too early. The case named "as soon as the server
 * listens" checks that window on purpose.
 */
const up = A.cmd('list-tube-used');

/** Drain mode (SIGUSR1): every put gets DRAINING, everything else keeps working. */
export const drainCases: Case[] = [
  {
    name: 'drain: SIGUSR1 as soon as the server listens',
    steps: [drain(), A.call(put('x')), A.cmd('stats')],
    refIncludes: ['DRAINING', 'draining: true'],
  },
  {
    name: 'drain: put gets DRAINING (upstream put_in_drain)',
    steps: [up, drain(), A.call('put 0 0 1 1\r\nx\r\n'), A.cmd('list-tube-used')],
    refIncludes: ['DRAINING'],
  },
  {
    name: 'drain: EXPECTED_CRLF is checked before DRAINING',
    steps: [up, drain(), A.call('put 0 0 1 1\r\nxyz'), A.call('put 0 0 1 1\r\nx\r\n')],
    refIncludes: ['EXPECTED_CRLF', 'DRAINING'],
  },
  {
    name: 'drain: the body is read in full before DRAINING',
    steps: [up, drain(), A.call('put 0 0 1 6\r\n', 1, 300), A.call('ab\r\ncd\r\nlist-tube-used\r\n', 2)],
  },
  {
    name: 'drain: JOB_TOO_BIG and BAD_FORMAT come before DRAINING',
    args: ['-z', '2'],
    steps: [up, drain(), A.call('put 0 0 1 3\r\nabc\r\n'), A.call('put 0 0 1 1 \r\nx\r\n', 2), A.call('put x\r\n')],
  },
  {
    name: 'drain: stats show draining and the put counters',
    steps: [A.call(put('before')), drain(), A.call(put('after')), A.call(put('again')), A.cmd('stats'), A.cmd('stats-tube default')],
  },
  {
    name: 'drain: reserve, release, bury, kick and delete keep working',
    steps: [
      A.call(put('a')),
      A.call(put('b')),
      drain(),
      A.cmd('reserve'),
      A.cmd('release 1 5 0'),
      A.cmd('reserve'),
      A.cmd('bury 2 1'),
      A.cmd('kick 5'),
      A.cmd('reserve-job 2'),
      A.cmd('delete 2'),
      A.cmd('delete 1'),
      A.cmd('stats-tube default'),
    ],
  },
  {
    name: 'drain: other connections and a second SIGUSR1',
    steps: [up, B.open(), drain(), B.call(put('b')), drain(), A.call(put('a')), A.cmd('use other'), A.call(put('c'))],
  },
  {
    name: 'drain: a waiting reserve still gets a job put before draining',
    steps: [up, A.call(put('x', { delay: 1 })), drain(), B.cmd('reserve', 1, 3000), A.call(put('y'))],
  },
];
