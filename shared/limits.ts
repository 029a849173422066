/** Limits and thresholds shared by the engine, every front door and the dashboard. */

/** A ready job whose priority is below this counts as urgent (beanstalkd's URGENT_THRESHOLD). */
export const URGENT_BELOW = 1024;
/** Largest priority, delay or TTR value (u32). */
export const MAX_U32 = 4294967295;

/**
 * The longest pause, in seconds (136 years): pause-tube's delay is a u32 (protocol). The dashboard's
 * "pause until resumed" is a pause of this length, so every door, the binlog and the cluster see
 * an ordinary pause and an unpause (0) ends it.
 */
export const MAX_PAUSE_SECONDS = MAX_U32;
/** Default and largest accepted maximum job body size in bytes (`-z`). */
export const DEFAULT_MAX_JOB_SIZE = 65535;
export const MAX_JOB_SIZE_LIMIT = 1073741824;
/** Default largest Gearman job data in bytes (`--gearman-max-size`; `-z` is beanstalkd's). */
export const DEFAULT_GEARMAN_MAX_SIZE = 64 * 1024 * 1024;
/** Tube names: 1..200 bytes of these characters, not starting with '-'. */
export const MAX_TUBE_NAME_LENGTH = 200;
export const TUBE_NAME_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()';
/** A reserved job's deadline is "soon" this many milliseconds before it passes. */
export const DEADLINE_SOON_MARGIN_MS = 1000;
/** TTR below one second is raised to one second. */
export const MIN_TTR_MS = 1000;
/** The name of the tube that always exists. */
export const DEFAULT_TUBE = 'default';
/** Default binlog segment size in bytes (`-s`). */
export const DEFAULT_BINLOG_SIZE = 10485760;

const NAME_CHAR_SET = new Set(TUBE_NAME_CHARS);

/** True when `name` is a valid tube name under the protocol's rules. */
export function isValidTubeName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_TUBE_NAME_LENGTH || name.charCodeAt(0) === 45 /* - */) return false;
  for (let i = 0; i < name.length; i++) if (!NAME_CHAR_SET.has(name[i]!)) return false;
  return true;
}
