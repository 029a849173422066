import { A, B, put } from '../dsl.js';
import type { Case } from '../types.js';

/** peek, peek-ready, peek-delayed, peek-buried. */
export const peekCases: Case[] = [
  {
    name: 'peek: found (upstream peek_ok)',
    steps: [A.call('put 0 0 1 1\r\na\r\n'), A.cmd('peek 1')],
    refIncludes: ['FOUND 1 1'],
  },
  {
    name: 'peek: not found (upstream peek_not_found)',
    steps: [A.call(put('a')), A.cmd('peek 2'), A.cmd('peek 18446744073709551615'), A.cmd('peek 0')],
  },
  {
    name: 'peek: bad formats (upstream peek_bad_format)',
    steps: [
      A.cmd('peek 18446744073709551616'),
      A.cmd('peek 184467440737095516160000000000000000000000000000'),
      A.cmd('peek foo111'),
      A.cmd('peek 111foo'),
      A.cmd('peek 1 '),
      A.cmd('peek '),
      A.cmd('peek'),
      A.cmd('peek -1'),
      A.cmd('peek  1'),
      A.cmd('stats'),
    ],
  },
  {
    name: 'peek: a job reserved by another connection',
    steps: [A.call(put('mine')), B.cmd('reserve'), A.cmd('peek 1'), A.cmd('peek-ready'), B.cmd('peek 1')],
  },
  {
    name: 'peek: any tube, any state',
    steps: [
      A.cmd('use t'),
      A.call(`${put('ready')}${put('delayed', { delay: 60 })}${put('buried')}`, 3),
      A.cmd('reserve-job 3'),
      A.cmd('bury 3 0'),
      A.cmd('use default'),
      A.cmd('peek 1'),
      A.cmd('peek 2'),
      A.cmd('peek 3'),
      A.cmd('peek-ready'),
      A.cmd('peek-delayed'),
      A.cmd('peek-buried'),
    ],
  },
  {
    name: 'peek-ready: smallest (pri, id) of the used tube',
    steps: [
      A.call(`${put('a', { pri: 5 })}${put('b', { pri: 2 })}${put('c', { pri: 2 })}${put('d', { pri: 9 })}`, 4),
      A.cmd('peek-ready'),
      A.cmd('delete 2'),
      A.cmd('peek-ready'),
      A.cmd('delete 3'),
      A.cmd('peek-ready'),
      A.cmd('use empty'),
      A.cmd('peek-ready'),
    ],
  },
  {
    name: 'peek-delayed: earliest deadline (upstream peek_delayed)',
    steps: [
      A.cmd('peek-delayed'),
      A.call('put 0 0 1 1\r\nA\r\n'),
      A.call('put 0 99 1 1\r\nB\r\n'),
      A.call('put 0 1 1 1\r\nC\r\n'),
      A.cmd('peek-delayed'),
      A.cmd('delete 3'),
      A.cmd('peek-delayed'),
      A.cmd('delete 2'),
      A.cmd('peek-delayed'),
    ],
  },
  {
    name: 'peek-delayed: two jobs with the same delay',
    steps: [A.call(`${put('a', { delay: 50 })}${put('b', { delay: 50 })}`, 2), A.cmd('peek-delayed'), A.cmd('delete 1'), A.cmd('peek-delayed')],
  },
  {
    name: 'peek-buried: the oldest buried job of the used tube',
    steps: [
      A.cmd('use b'),
      A.call(`${put('1')}${put('2')}`, 2),
      A.cmd('reserve-job 2'),
      A.cmd('bury 2 0'),
      A.cmd('reserve-job 1'),
      A.cmd('bury 1 0'),
      A.cmd('peek-buried'),
      A.cmd('use default'),
      A.cmd('peek-buried'),
    ],
  },
  {
    name: 'peek: no-argument peeks must match exactly',
    steps: [
      A.cmd('peek-ready '),
      A.cmd('peek-readyx'),
      A.cmd('peek-delayed 1'),
      A.cmd('peek-buried x'),
      A.cmd('peek-bury'),
      A.cmd('peek-read'),
      A.cmd('stats'),
    ],
  },
];
