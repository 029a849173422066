/**
 * Why a buried job was buried: a worker's `bury`, or the dead-letter rule (`--dead-letter-after`,
 * or the tube's own setting) on a release or on a TTR timeout; `none` until it is buried. The
 * engine stores the index (Job.buryCause), which is also its code in the binlog, so the order
 * of this list is fixed.
 */
export const BURY_CAUSES = ['none', 'bury', 'dead-letter-release', 'dead-letter-timeout'] as const;
export type BuryCause = (typeof BURY_CAUSES)[number];
