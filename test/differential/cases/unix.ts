import { A, B, put, restart } from '../dsl.js';
import type { Case } from '../types.js';

/** `-l unix:PATH` listeners. */
export const unixCases: Case[] = [
  {
    name: 'unix: peek over a UNIX socket (upstream peek_ok_unix)',
    unix: true,
    steps: [A.call('put 0 0 1 1\r\na\r\n'), A.cmd('peek 1'), A.cmd('reserve'), A.cmd('delete 1'), A.cmd('list-tubes')],
  },
  {
    name: 'unix: a stale socket file is removed at start (upstream unix_auto_removal)',
    unix: true,
    steps: [A.call(put('a')), restart(true), B.cmd('peek 1'), B.call(put('b'))],
  },
];
