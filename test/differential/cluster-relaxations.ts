/**
 * Cases a cluster node (BEANPOLE_EXTRA_ARGS='--cluster @test') answers differently on purpose,
 * each with its reason; the README's cluster section lists the same relaxations.
 */
export const CLUSTER_RELAXATIONS: Readonly<Record<string, string>> = {
  'limits: -z above the maximum is clamped (upstream optz_more_than_max)': 'cluster mode caps -z at 64 MiB (one bytea value, read whole by the driver)',
  'limits: -z -1 wraps and is clamped': 'cluster mode caps -z at 64 MiB',
  'waiters: 4 waiters are served 1, 2, 4, 3': 'waiting reserves are served oldest first, not in beanstalkd\'s round-robin rotation',
  'waiters: 6 waiters (ms_take round robin)': 'waiting reserves are served oldest first',
  'waiters: the round-robin position carries over from earlier reservations': 'waiting reserves are served oldest first',
  'waiters: disconnect releases jobs to waiters': 'released jobs go to the oldest waiter by priority then id, not in beanstalkd\'s release order',
  'stats: connections, producers, workers and waiting':
    'a job a disconnect gives back reaches a waiting client after two statements (a few ms, more on a loaded machine), not in the same tick: stats 50 ms later may still see it ready',
  'tubes: list-tubes swap-remove order': 'list-tubes lists the default tube, then tubes with jobs by name, then tubes only this node\'s clients use',
  'tubes: disconnect order decides list-tubes order': 'list-tubes order as above',
};
