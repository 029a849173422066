import { execFileSync } from 'node:child_process';

/** A user to run as (`-u USER`): its ids, looked up once at start. */
export interface RunAs {
  name: string;
  uid: number;
  gid: number;
}

/** beanstalkd's exit statuses when it cannot become the user. */
export const EXIT_NO_USER = 32;
export const EXIT_SETGID = 33;
export const EXIT_SETUID = 34;

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
  try {
    const ids = (flag: string): number => Number(execFileSync('id', [flag, name], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim());
    return { name, uid: ids('-u'), gid: ids('-g') };
  } catch {
    throw new PrivilegeError(`getpwnam("${name}") failed: no such user`, EXIT_NO_USER);
  }
}

/**
 * Runs `work` with USER's effective ids, then takes root's back: files it creates belong to
 * USER, and whatever USER may not do fails now, at start, rather than after the server has
 * dropped root for good (the binlog directory is opened this way, before serving).
 */
export function withUserIds<T>(user: RunAs, work: () => T): T {
  // Root's own supplementary groups must not grant access that USER will not have.
  setGroups(user);
  try {
    process.setegid!(user.gid);
    process.seteuid!(user.uid);
  } catch (err) {
    throw new PrivilegeError(`cannot act as ${user.name}: ${(err as Error).message}`, EXIT_SETUID);
  }
  try {
    return work();
  } finally {
    process.seteuid!(0);
    process.setegid!(0);
  }
}

/** Becomes USER for good, with its groups (after binding, like beanstalkd). */
export function becomeUser(user: RunAs): void {
  setGroups(user);
  try {
    process.setgid!(user.gid);
  } catch (err) {
    throw new PrivilegeError(`setgid(${user.gid}) failed: ${(err as Error).message}`, EXIT_SETGID);
  }
  try {
    process.setuid!(user.uid);
  } catch (err) {
    throw new PrivilegeError(`setuid(${user.uid}) failed: ${(err as Error).message}`, EXIT_SETUID);
  }
}

/** process.initgroups exists on POSIX (Node's docs) but is missing from @types/node 20. */
type WithInitgroups = NodeJS.Process & { initgroups: (user: string, extraGroup: number) => void };

/** USER's groups as a login would set them (/etc/group and NSS), replacing root's. */
function setGroups(user: RunAs): void {
  try {
    (process as WithInitgroups).initgroups(user.name, user.gid);
  } catch (err) {
    throw new PrivilegeError(`setgroups for ${user.name} failed: ${(err as Error).message}`, EXIT_SETGID);
  }
}
