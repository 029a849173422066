import { A, B, C, D, E, conn, put, sleep, ttrNudge } from '../dsl.js';
import type { Case, Step } from '../types.js';

/**
 * How long a reserve is given to land before the next client's: a cluster node looks for a job
 * with a database statement first, which on a loaded machine can take longer than a single
 * server's tick, and a waiter that lands late is served late.
 */
const LAND_MS = (process.env.BEANPOLE_EXTRA_ARGS ?? '').includes('--cluster') ? 250 : 60;

/** Registers connections as waiters in a known order (the small pause lets each one land). */
function waiters(names: string[], line = 'reserve'): Step[] {
  return names.flatMap((n) => [conn(n).send(`${line}\r\n`), conn(n).silent(LAND_MS)]);
}

/** reserve, reserve-with-timeout, reserve-job; TTR, DEADLINE_SOON, waiters. */
export const reserveCases: Case[] = [
  {
    name: 'reserve: returns the job and marks it reserved',
    steps: [A.call(put('hello', { ttr: 10 })), A.cmd('reserve'), A.cmd('stats-job 1'), A.cmd('stats-tube default')],
  },
  {
    name: 'reserve: priority then id, across watched tubes (upstream multi_tube)',
    steps: [
      A.cmd('use abc'),
      A.call(put('a', { pri: 999999 })),
      A.cmd('use def'),
      A.call(put('', { pri: 99 })),
      A.cmd('watch abc'),
      A.cmd('watch def'),
      A.cmd('reserve'),
    ],
    refIncludes: ['RESERVED 2 0'],
  },
  {
    name: 'reserve: same priority is FIFO by id across tubes',
    steps: [
      A.cmd('use t2'),
      A.call(put('1', { pri: 7 })),
      A.cmd('use t1'),
      A.call(put('2', { pri: 7 })),
      A.cmd('use t2'),
      A.call(put('3', { pri: 7 })),
      A.call(put('4', { pri: 6 })),
      A.cmd('watch t1'),
      A.cmd('watch t2'),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve'),
    ],
  },
  {
    name: 'reserve: jobs in unwatched tubes are not reserved',
    steps: [A.cmd('use other'), A.call(put('x')), A.cmd('reserve-with-timeout 0'), A.cmd('watch other'), A.cmd('reserve-with-timeout 0')],
  },
  {
    name: 'reserve: one connection may hold several jobs',
    steps: [
      A.call(`${put('a')}${put('b')}${put('c')}`, 3),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve-with-timeout 0'),
      A.cmd('stats'),
    ],
  },
  {
    name: 'reserve: bad forms of reserve are BAD_FORMAT',
    steps: [
      A.cmd('reserve '),
      A.cmd('reservex'),
      A.cmd('reserve-with-timeout'),
      A.cmd('reserve-job'),
      A.cmd('reserve-jobs 1'),
      A.cmd('reserve-with-timeout-x 1'),
      A.cmd('reserve 0'),
      A.cmd('reserve-job '),
      A.cmd('stats'),
    ],
  },
  {
    name: 'reserve: commands pipelined after a blocking reserve wait for it',
    steps: [A.call('reserve\r\nlist-tube-used\r\nuse x\r\n', 1, 300), B.call(put('j')), A.read(3)],
  },
  {
    name: 'reserve-with-timeout: 0 on an empty server is TIMED_OUT',
    steps: [A.cmd('reserve-with-timeout 0', 1, 500), A.cmd('stats')],
    refIncludes: ['TIMED_OUT'],
  },
  {
    name: 'reserve-with-timeout: 0 with a ready job',
    steps: [A.call(put('r')), A.cmd('reserve-with-timeout 0', 1, 500)],
  },
  {
    name: 'reserve-with-timeout: 1 waits a second',
    steps: [A.cmd('reserve-with-timeout 1', 1, 600), A.read(1, 2000)],
    refIncludes: ['<timeout>', 'TIMED_OUT'],
  },
  {
    name: 'reserve-with-timeout: a job put while waiting is delivered',
    steps: [A.cmd('reserve-with-timeout 2', 1, 300), B.call(put('late')), A.read(), A.cmd('stats-job 1')],
  },
  {
    name: 'reserve-with-timeout: abc counts as 0 (1.12 strtol)',
    steps: [A.cmd('reserve-with-timeout abc', 1, 500), A.cmd('reserve-with-timeout x1', 1, 500)],
    refIncludes: ['TIMED_OUT'],
  },
  {
    name: 'reserve-with-timeout: 1abc counts as 1 (1.12 strtol)',
    steps: [A.cmd('reserve-with-timeout 1abc', 1, 600), A.read(1, 2000)],
    refIncludes: ['<timeout>', 'TIMED_OUT'],
  },
  {
    name: 'reserve-with-timeout: 5abc waits and takes a job put meanwhile',
    steps: [A.cmd('reserve-with-timeout 5abc', 1, 400), B.call(put('j')), A.read()],
    refIncludes: ['RESERVED 1 1'],
  },
  {
    name: 'reserve-with-timeout: -1 waits forever, a put from another connection ends it',
    steps: [A.cmd('reserve-with-timeout -1', 1, 1200), B.call(put('j')), A.read()],
    refIncludes: ['<timeout>', 'RESERVED 1 1'],
  },
  {
    name: 'reserve-with-timeout: -1 then the client closes',
    steps: [
      A.cmd('reserve-with-timeout -1', 1, 300),
      B.cmd('stats-tube default'),
      A.close(),
      sleep(50),
      B.cmd('stats-tube default'),
      B.call(put('j')),
      B.cmd('stats-job 1'),
    ],
  },
  {
    name: 'reserve-with-timeout: spaces, signs and an empty argument (1.12 strtol)',
    steps: [
      A.cmd('reserve-with-timeout  0', 1, 500),
      A.cmd('reserve-with-timeout +0', 1, 500),
      A.cmd('reserve-with-timeout ', 1, 500),
      A.cmd('reserve-with-timeout 0 1', 1, 500),
      A.cmd('reserve-with-timeout -0', 1, 500),
      A.cmd('reserve-with-timeout 0x10', 1, 500),
      A.cmd('stats'),
    ],
  },
  {
    name: 'reserve-with-timeout: out of range for strtol is BAD_FORMAT',
    steps: [A.cmd('reserve-with-timeout 99999999999999999999'), A.cmd('reserve-with-timeout -99999999999999999999'), A.cmd('stats')],
  },
  {
    name: 'reserve-with-timeout: 4294967296 truncates to 0',
    steps: [A.cmd('reserve-with-timeout 4294967296', 1, 500), B.call(put('j')), A.read(1, 500)],
  },
  {
    name: 'reserve-with-timeout: 4294967295 truncates to -1 and waits',
    steps: [A.cmd('reserve-with-timeout 4294967295', 1, 500), B.call(put('j')), A.read(1, 1000)],
  },
  {
    name: 'reserve-with-timeout: 4294967297 and -4294967295 truncate to 1 (1.12 strtol)',
    steps: [
      A.cmd('reserve-with-timeout 4294967297', 1, 500),
      A.read(1, 2000),
      A.cmd('reserve-with-timeout -4294967295', 1, 500),
      A.read(1, 2000),
    ],
    refIncludes: ['TIMED_OUT'],
  },
  {
    name: 'reserve-with-timeout: other negative values wait like reserve',
    steps: [
      A.cmd('reserve-with-timeout -5', 1, 1200),
      B.call(put('j')),
      A.read(),
      A.cmd('reserve-with-timeout 2147483648', 1, 300),
      B.call(put('k')),
      A.read(),
      B.cmd('stats'),
    ],
  },
  {
    name: 'reserve: a waiting connection that half-closes gets TIMED_OUT',
    steps: [A.cmd('reserve', 1, 300), A.halfClose(), A.read(), A.closed(), B.cmd('stats')],
    refIncludes: ['TIMED_OUT'],
  },
  {
    name: 'reserve: half-close with pipelined reserves',
    steps: [
      A.call(put('only')),
      B.send('reserve\r\nreserve\r\nlist-tube-used\r\n'),
      B.halfClose(),
      B.read(3, 1000),
      B.closed(1000),
      A.cmd('stats-job 1'),
    ],
  },
  {
    name: 'reserve-with-timeout: half-close while waiting',
    steps: [A.cmd('reserve-with-timeout 5', 1, 300), A.halfClose(), A.read(1, 1000), A.closed(1000)],
  },
  {
    name: 'connection: half-close when idle closes the connection',
    steps: [A.cmd('use keep'), A.halfClose(), A.closed(1000), B.cmd('list-tubes')],
  },
  {
    name: 'connection: half-close after pipelined commands answers them first',
    steps: [A.send(`use foo\r\n${put('x')}list-tube-used\r\n`), A.halfClose(), A.read(3), A.closed(1000), B.cmd('stats-tube foo')],
  },
  {
    name: 'connection: half-close in the middle of a put body',
    steps: [A.send('put 0 0 1 5\r\nab'), A.halfClose(), A.closed(1000), B.call(put('b')), B.cmd('stats')],
  },
  {
    name: 'reserve: DEADLINE_SOON at once (upstream reserve_ttr_deadline_soon)',
    steps: [
      A.call('put 0 0 1 1\r\na\r\n'),
      A.cmd('reserve-with-timeout 1'),
      sleep(200),
      A.cmd('stats-job 1'),
      A.cmd('reserve-with-timeout 1'),
      A.cmd('stats-job 1'),
      A.cmd('release 1 0 0'),
      A.cmd('stats-job 1'),
    ],
    refIncludes: ['DEADLINE_SOON'],
  },
  {
    name: 'reserve: DEADLINE_SOON arrives while waiting',
    steps: [A.call(put('a', { ttr: 2 })), A.cmd('reserve'), A.cmd('reserve', 1, 500), A.read(1, 2000), A.cmd('delete 1')],
    refIncludes: ['DEADLINE_SOON', 'DELETED'],
  },
  {
    name: 'reserve: no DEADLINE_SOON while another ready job exists',
    steps: [
      A.call(put('a', { ttr: 1 })),
      A.call(put('b', { ttr: 1 })),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve-with-timeout 0'),
      A.cmd('touch 1'),
      A.cmd('touch 2'),
    ],
  },
  {
    name: 'reserve: DEADLINE_SOON check counts ready jobs in a paused tube',
    steps: [
      A.call(put('a', { ttr: 1 })),
      A.call(put('b', { ttr: 5 })),
      A.cmd('reserve'),
      A.cmd('pause-tube default 3'),
      A.cmd('reserve-with-timeout 2', 1, 2500),
    ],
  },
  {
    name: 'reserve: DEADLINE_SOON for a job from another watched tube only',
    steps: [A.cmd('use x'), A.call(put('a', { ttr: 1 })), A.cmd('watch x'), A.cmd('reserve'), A.cmd('ignore x'), A.cmd('reserve-with-timeout 0')],
  },
  {
    name: 'reserve: a delayed job wakes a waiter when it comes due',
    steps: [A.call(put('later', { delay: 1 })), B.cmd('reserve', 1, 500), B.read(1, 2000), A.cmd('stats-job 1')],
  },
  {
    name: 'reserve: TTR expiry puts the job back to ready',
    steps: [A.call(put('a', { ttr: 1 })), A.cmd('reserve'), sleep(1400), ttrNudge(A), A.cmd('stats-job 1'), A.cmd('stats'), A.cmd('reserve-with-timeout 0')],
    refIncludes: ['timeouts: 1'],
  },
  {
    name: 'reserve: TTR expiry hands the job to a waiting connection',
    steps: [
      A.call(put('a', { ttr: 1 })),
      A.cmd('reserve'),
      B.cmd('reserve', 1, 300),
      sleep(1000),
      ttrNudge(A),
      B.read(1, 2000),
      A.cmd('delete 1'),
      B.cmd('delete 1'),
    ],
  },
  {
    name: 'reserve-job: ready job out of order (upstream reserve_job_ready)',
    steps: [
      A.call(put('a')),
      A.call(put('b')),
      A.cmd('reserve-job 2'),
      A.cmd('reserve-job 3'),
      A.cmd('release 1 1 0'),
      A.cmd('release 2 1 0'),
      A.cmd('stats-job 2'),
    ],
  },
  {
    name: 'reserve-job: twice is NOT_FOUND (upstream reserve_job_already_reserved)',
    steps: [A.call(put('a')), A.cmd('reserve-job 1'), A.cmd('reserve-job 1'), B.cmd('reserve-job 1')],
  },
  {
    name: 'reserve-job: delayed job (upstream reserve_job_delayed)',
    steps: [
      A.call(put('A', { delay: 100 })),
      A.call(put('B', { delay: 100 })),
      A.call(put('C', { delay: 100 })),
      A.cmd('reserve-job 2'),
      A.cmd('release 2 1 0'),
      A.cmd('stats-job 2'),
      A.cmd('stats-tube default'),
    ],
  },
  {
    name: 'reserve-job: buried jobs (upstream reserve_job_buried)',
    steps: [
      A.call(put('A')),
      A.call(put('B')),
      A.cmd('reserve-job 1'),
      A.cmd('bury 1 1'),
      A.cmd('reserve-job 2'),
      A.cmd('bury 2 1'),
      A.cmd('reserve-job 2'),
      A.cmd('reserve-job 1'),
      A.cmd('release 1 1 0'),
      A.cmd('release 2 1 0'),
      A.cmd('stats-job 1'),
      A.cmd('stats-job 2'),
    ],
  },
  {
    name: 'reserve-job: ignores watch list and pause',
    steps: [
      A.cmd('use other'),
      A.call(put('o')),
      A.cmd('pause-tube other 100'),
      A.cmd('reserve-job 1'),
      A.cmd('stats-job 1'),
      A.cmd('stats'),
    ],
  },
  {
    name: 'reserve-job: never DEADLINE_SOON',
    steps: [A.call(put('a', { ttr: 1 })), A.call(put('b')), A.cmd('reserve-job 1'), A.cmd('reserve-job 2'), A.cmd('reserve-with-timeout 0')],
  },
  {
    name: 'reserve-job: bad formats and missing ids',
    steps: [
      A.cmd('reserve-job abc'),
      A.cmd('reserve-job 1 '),
      A.cmd('reserve-job  1'),
      A.cmd('reserve-job 0'),
      A.cmd('reserve-job 18446744073709551615'),
      A.cmd('reserve-job 18446744073709551616'),
      A.cmd('reserve-job -1'),
    ],
  },
  {
    name: 'reserve-job: DEADLINE_SOON and auto-release (upstream reserve_job_ttr_deadline_soon)',
    steps: [
      A.call('put 0 5 1 1\r\na\r\n'),
      A.cmd('reserve-job 1'),
      A.cmd('stats-job 1'),
      A.cmd('reserve-with-timeout 1'),
      sleep(1300),
      ttrNudge(A),
      A.cmd('stats-job 1'),
    ],
    refIncludes: ['DEADLINE_SOON', 'state: ready'],
  },
  {
    name: 'reserve: two waiters on one tube (upstream reserve_with_timeout_2conns)',
    steps: [A.cmd('watch foo'), A.cmd('reserve-with-timeout 1', 1, 300), B.cmd('watch foo'), A.read(1, 1500)],
    refIncludes: ['TIMED_OUT'],
  },
  {
    name: 'waiters: 2 waiters are served in order',
    steps: [...waiters(['a', 'b']), E.call(put('1')), E.call(put('2')), A.read(), B.read()],
  },
  {
    name: 'waiters: 3 waiters',
    steps: [...waiters(['a', 'b', 'c']), E.call(put('1')), E.call(put('2')), E.call(put('3')), A.read(), B.read(), C.read()],
  },
  {
    name: 'waiters: 4 waiters are served 1, 2, 4, 3',
    steps: [
      ...waiters(['a', 'b', 'c', 'd']),
      E.call(put('1')),
      E.call(put('2')),
      E.call(put('3')),
      E.call(put('4')),
      A.read(),
      B.read(),
      C.read(),
      D.read(),
    ],
  },
  {
    name: 'waiters: 6 waiters (ms_take round robin)',
    steps: [
      ...waiters(['w1', 'w2', 'w3', 'w4', 'w5', 'w6']),
      ...[1, 2, 3, 4, 5, 6].map((i) => E.call(put(String(i)))),
      ...['w1', 'w2', 'w3', 'w4', 'w5', 'w6'].map((n) => conn(n).read()),
    ],
  },
  {
    name: 'waiters: the round-robin position carries over from earlier reservations',
    steps: [
      A.call(`${put('1')}${put('2')}${put('3')}`, 3),
      B.cmd('reserve'),
      B.cmd('reserve'),
      B.cmd('reserve'),
      ...waiters(['c', 'd', 'e']),
      B.close(),
      C.read(),
      D.read(),
      conn('e').read(),
      A.call(put('5')),
      A.cmd('stats-tube default'),
    ],
  },
  {
    name: 'waiters: a connection watching two tubes waits in both',
    steps: [
      A.cmd('watch t2'),
      B.cmd('watch t2'),
      B.cmd('ignore default'),
      ...waiters(['a', 'b']),
      E.cmd('stats-tube t2'),
      E.cmd('stats-tube default'),
      E.cmd('use t2'),
      E.call(put('x')),
      E.call(put('y')),
      A.read(),
      B.read(),
      E.cmd('stats'),
    ],
  },
  {
    name: 'waiters: a job for a tube only the second waiter watches',
    steps: [
      B.cmd('watch only'),
      ...waiters(['a', 'b', 'c']),
      E.cmd('use only'),
      E.call(put('o')),
      B.read(),
      E.cmd('use default'),
      E.call(put('d1')),
      E.call(put('d2')),
      A.read(),
      C.read(),
    ],
  },
  {
    name: 'waiters: mixed reserve and reserve-with-timeout waiters',
    steps: [
      A.cmd('reserve', 1, 60),
      B.cmd('reserve-with-timeout 10', 1, 60),
      C.cmd('reserve', 1, 60),
      E.call(`${put('1')}${put('2')}${put('3')}`, 3),
      A.read(),
      B.read(),
      C.read(),
      E.cmd('stats'),
    ],
  },
  {
    name: 'waiters: a waiter on another tube is skipped',
    steps: [
      A.cmd('watch t'),
      A.cmd('ignore default'),
      ...waiters(['a']),
      B.cmd('reserve', 1, 60),
      E.call(put('d')),
      B.read(),
      E.cmd('use t'),
      E.call(put('t')),
      A.read(),
    ],
  },
  {
    name: 'waiters: disconnect releases jobs to waiters',
    steps: [
      A.call(`${put('1')}${put('2')}${put('3')}`, 3),
      A.cmd('reserve'),
      A.cmd('reserve'),
      A.cmd('reserve'),
      ...waiters(['b', 'c']),
      A.close(),
      B.read(),
      C.read(),
      E.cmd('stats-tube default'),
    ],
  },
  {
    name: 'waiters: a paused tube with a better job is skipped until the pause ends',
    steps: [
      E.cmd('use t1'),
      E.cmd('pause-tube t1 1'),
      E.call(put('best', { pri: 1 })),
      A.cmd('watch t1'),
      A.cmd('watch t2'),
      A.cmd('reserve', 1, 200),
      E.cmd('use t2'),
      E.call(put('worse', { pri: 9 })),
      A.read(),
      A.cmd('reserve', 1, 300),
      A.read(1, 2000),
    ],
  },
];
