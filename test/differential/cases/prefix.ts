import { A } from '../dsl.js';
import type { Case } from '../types.js';

/**
 * Command recognition by prefix (notes §1.2): the order of the prefixes decides between
 * BAD_FORMAT and UNKNOWN_COMMAND.
 */
export const prefixCases: Case[] = [
  {
    name: 'prefix: commands that take arguments need their space',
    steps: ['put', 'delete', 'use', 'kick', 'touch', 'peek', 'kick-job', 'release', 'bury', 'watch', 'ignore'].map((c) => A.cmd(c)),
  },
  {
    name: 'prefix: argument commands glued to their argument',
    steps: [
      A.cmd('deletex 1'),
      A.cmd('delete-job 1'),
      A.cmd('use-tube x'),
      A.cmd('watchx'),
      A.cmd('kick-jobs 1'),
      A.cmd('touch-all'),
      A.cmd('buryx 1 0'),
      A.cmd('releasex 1 0 0'),
      A.call('puts 0 0 1 1\r\nx\r\n', 2),
    ],
  },
  {
    name: 'prefix: everything starting with reserve is BAD_FORMAT unless exact',
    steps: [
      A.cmd('reservex'),
      A.cmd('reserve-with-timeout'),
      A.cmd('reserve-with-timeoutx 0'),
      A.cmd('reserve-job'),
      A.cmd('reserve-jobx 1'),
      A.cmd('reserve\t'),
      A.cmd('reserve-'),
      A.cmd('reserv'),
    ],
  },
  {
    name: 'prefix: everything starting with stats is BAD_FORMAT unless exact',
    steps: [A.cmd('statsx'), A.cmd('stats-job'), A.cmd('stats-job '), A.cmd('stats-jobs 1'), A.cmd('stats-tubes default'), A.cmd('stats-'), A.cmd('stat')],
  },
  {
    name: 'prefix: peek-ready, peek-delayed, peek-buried must be exact',
    steps: [
      A.cmd('peek-ready '),
      A.cmd('peek-readyy'),
      A.cmd('peek-delayedd'),
      A.cmd('peek-buried '),
      A.cmd('peek-re'),
      A.cmd('peek-'),
      A.cmd('peek-buried-x'),
    ],
  },
  {
    name: 'prefix: list commands share prefixes',
    steps: [
      A.cmd('list-tubes-watchedx'),
      A.cmd('list-tube-usedx'),
      A.cmd('list-tubesx'),
      A.cmd('list-tubes-watch'),
      A.cmd('list-tubes-'),
      A.cmd('list-tube-use'),
    ],
  },
  {
    name: 'prefix: pause-tube has no trailing space in its prefix',
    steps: [
      A.cmd('pause-tubex 0'),
      A.cmd('pause-tubes default 0'),
      A.cmd('pause-tubedefault 0'),
      A.cmd('pause-tube-default 0'),
      A.cmd('pause-tub default 0'),
      A.cmd('pause-tube\tdefault 0'),
    ],
  },
  {
    name: 'prefix: tube names must fill the rest of the line exactly',
    steps: [A.call('use \r\n'), A.cmd('use  foo'), A.cmd('use foo bar'), A.cmd('use -foo'), A.cmd('watch foo '), A.cmd('ignore  default')],
  },
];
