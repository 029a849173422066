import { spawnSync } from 'node:child_process';

/** A user to run as (`-u USER`): its ids, looked up once at start. */
export interface RunAs {
  name: string;
  uid: number;
  gid: number;
}

/** beanstalkd's exit statuses in su(): the lookup failed, no such user, setgid/setuid failed. */
export const EXIT_LOOKUP_FAILED = 32;
export const EXIT_NO_USER = 33;
export const EXIT_SET_IDS = 34;

export class PrivilegeError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** Looks USER up (getpwnam, through `id`, which also reads NSS sources such as LDAP). */
export function lookUpUser(name: string): RunAs {
  const id = (flag: string): number => {
    // `--`: a name such as `-g` is a name, not a flag.
    const run = spawnSync('id', [flag, '--', name], { stdio: ['ignore', 'pipe', 'pipe'] });
    if (run.error !== undefined) throw new PrivilegeError(`getpwnam("${name}"): ${run.error.message}`, EXIT_LOOKUP_FAILED);
    const out = run.stdout.toString().trim();
    if (run.status !== 0 || !/^\d+$/.test(out)) throw new PrivilegeError(`getpwnam("${name}"): no such user`, EXIT_NO_USER);
    return Number(out);
  };
  return { name, uid: id('-u'), gid: id('-g') };
}

/** Whom files made for USER must belong to: USER when the server runs as root, else nobody else. */
export function fileOwner(user: RunAs | null): { uid: number; gid: number } | null {
  return user !== null && isRoot() ? { uid: user.uid, gid: user.gid } : null;
}

/** Root can change ids at will; anyone else can only "become" themselves (as with beanstalkd). */
function isRoot(): boolean {
  return process.geteuid!() === 0;
}

/**
 * Runs `work` with USER's effective ids, then takes root's back: files it creates belong to
 * USER, and whatever USER may not do fails now, at start, rather than after the server has
 * dropped root for good (the binlog directory is opened this way, before serving). Without
 * root, `work` runs as the server already is.
 */
export function withUserIds<T>(user: RunAs, work: () => T): T {
  if (!isRoot()) return work();
  const [egid, groups] = [process.getegid!(), process.getgroups!()];
  try {
    // Root's own supplementary groups must not grant access that USER will not have.
    setGroups(user);
    process.setegid!(user.gid);
    process.seteuid!(user.uid);
  } catch (err) {
    throw new PrivilegeError(`cannot act as ${user.name}: ${(err as Error).message}`, EXIT_SET_IDS);
  }
  try {
    return work();
  } finally {
    process.seteuid!(0);
    process.setegid!(egid);
    process.setgroups!(groups);
  }
}

/** Becomes USER for good, with its groups (after binding, like beanstalkd). */
export function becomeUser(user: RunAs): void {
  try {
    if (isRoot()) setGroups(user);
    process.setgid!(user.gid);
    process.setuid!(user.uid);
  } catch (err) {
    throw new PrivilegeError(`cannot become ${user.name} (uid ${user.uid}, gid ${user.gid}): ${(err as Error).message}`, EXIT_SET_IDS);
  }
}

/** process.initgroups exists on POSIX (Node's docs) but is missing from @types/node 20. */
type WithInitgroups = NodeJS.Process & { initgroups: (user: string, extraGroup: number) => void };

/** USER's groups as a login would set them (/etc/group and NSS), replacing root's. */
function setGroups(user: RunAs): void {
  (process as WithInitgroups).initgroups(user.name, user.gid);
}
