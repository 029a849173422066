/**
 * A cluster keeps two sets of jobs apart, as a single node keeps two engines: the beanstalkd
 * realm and the Gearman realm (ids, tubes or functions, counts and stats of their own). Each
 * realm has its own tables, named by its prefix; the nodes and the body-byte budget are shared.
 */
export interface Realm {
  name: 'beanstalk' | 'gearman';
  /** Starts the names of the realm's tables and of its prepared statements. */
  prefix: string;
  tables: {
    jobs: string;
    /** Jobs ever put, per node and tube. */
    totals: string;
    /** Paused tubes and tubes with settings of their own. */
    tubes: string;
    /** The sequence job ids come from. */
    ids: string;
  };
}

function realm(name: Realm['name'], prefix: string): Realm {
  return { name, prefix, tables: { jobs: `${prefix}jobs`, totals: `${prefix}tube_totals`, tubes: `${prefix}tubes`, ids: `${prefix}job_ids` } };
}

export const BEANSTALK_REALM = realm('beanstalk', 'beanpole_');
export const GEARMAN_REALM = realm('gearman', 'beanpole_gearman_');
/** Gearman's own tables beside its jobs: who waits on a foreground job, and WORK_* packets on their way to another node. */
export const GEARMAN_TABLES = { waiters: 'beanpole_gearman_waiters', updates: 'beanpole_gearman_updates' } as const;
