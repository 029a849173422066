import { A, B, C, put, sleep } from '../dsl.js';
import type { Case } from '../types.js';

/** quit, closing, and what several connections see of each other. */
export const connectionCases: Case[] = [
  {
    name: 'quit: closes the connection without a reply',
    steps: [A.send('quit\r\n'), A.closed(), B.cmd('stats')],
  },
  {
    name: 'quit: as a prefix (quit-foo) also closes',
    steps: [A.send('quit-foo\r\n'), A.closed()],
  },
  {
    name: 'quit: with trailing space and arguments',
    steps: [A.send('quit now please\r\n'), A.closed(), B.send('quit \r\n'), B.closed()],
  },
  {
    name: 'quit: not a prefix match when misspelt',
    steps: [A.cmd('qui'), A.cmd('Quit'), A.cmd(' quit'), A.cmd('list-tube-used')],
  },
  {
    name: 'quit: pipelined commands before and after quit',
    steps: [A.send('use q\r\nlist-tube-used\r\nquit\r\nlist-tube-used\r\n'), A.read(2), A.closed()],
  },
  {
    name: 'quit: releases reserved jobs (upstream quit_releases_job)',
    steps: [
      B.call(put('a', { ttr: 100 })),
      A.cmd('reserve'),
      A.send('quit\r\n'),
      A.closed(),
      B.cmd('reserve-with-timeout 1'),
      B.cmd('stats-job 1'),
    ],
  },
  {
    name: 'close: releases reserved jobs (upstream close_releases_job)',
    steps: [B.call(put('a', { ttr: 100 })), A.cmd('reserve'), A.close(), B.cmd('reserve-with-timeout 1'), B.cmd('stats-job 1')],
  },
  {
    name: 'close: releases every reserved job, keeps buried ones',
    steps: [
      A.call(`${put('1')}${put('2')}${put('3')}`, 3),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('bury 2 0'),
      A.close(),
      sleep(50),
      B.cmd('stats-tube default'),
      B.cmd('stats-job 1'),
      B.cmd('stats-job 2'),
      B.cmd('stats'),
    ],
  },
  {
    name: 'close: in the middle of a command line',
    steps: [A.send('stats-tu'), A.close(), sleep(50), B.cmd('stats')],
  },
  {
    name: 'close: half-close in the middle of a command line',
    steps: [A.send('stats-tu'), A.halfClose(), A.closed(1000), B.cmd('stats')],
  },
  {
    name: 'close: half-close while holding reserved jobs releases them',
    steps: [B.call(put('a')), A.cmd('reserve'), A.halfClose(), A.closed(1000), B.cmd('stats-job 1'), B.cmd('reserve-with-timeout 0')],
  },
  {
    name: 'connections: use and watch are per connection',
    steps: [A.cmd('use a'), A.cmd('watch a'), B.cmd('list-tube-used'), B.cmd('list-tubes-watched'), A.cmd('list-tubes-watched'), B.cmd('list-tubes')],
  },
  {
    name: 'connections: release, bury and touch by another connection are NOT_FOUND',
    steps: [
      A.call(put('a')),
      B.cmd('reserve'),
      A.cmd('release 1 0 0'),
      A.cmd('bury 1 0'),
      A.cmd('touch 1'),
      A.cmd('delete 1'),
      A.cmd('kick-job 1'),
      A.cmd('reserve-job 1'),
      B.cmd('touch 1'),
      B.cmd('release 1 0 0'),
    ],
  },
  {
    name: 'connections: a job released by one is reserved by another',
    steps: [A.call(put('a')), B.cmd('reserve'), C.cmd('reserve', 1, 200), B.cmd('release 1 0 0'), C.read(), B.cmd('stats-job 1')],
  },
];
