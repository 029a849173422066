/**
 * Who a bearer token belongs to: the --admin-token (an admin), or a user of --admin-users with
 * the role the file gives them. SIGHUP reads the file again; a file that has become unusable is
 * logged and the users already loaded stay.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { Role } from '../../shared/roles.js';
import { UsersFileError, loadUsersFile, type AdminUser } from '../admin-users.js';
import type { AdminOptions } from '../cli.js';

/** Who made a request, as the audit log and GET /api/me name them. */
export interface Principal {
  /** A users-file name, ADMIN_TOKEN_USER, or null when the dashboard needs no token. */
  user: string | null;
  role: Role;
}

/** The name the admin token signs in as (no users-file name starts with '-'). */
export const ADMIN_TOKEN_USER = '--admin-token';

const OPEN: Principal = Object.freeze({ user: null, role: 'admin' });

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

export class AdminUsers {
  private users: readonly AdminUser[];
  private readonly tokenSha256: Buffer | null;
  /** Called after each successful reload (open sockets are checked again). */
  onReload: (() => void) | null = null;

  constructor(
    private readonly options: Pick<AdminOptions, 'token' | 'usersFile' | 'users'>,
    private readonly log: Logger,
    private readonly load: (file: string) => AdminUser[] = loadUsersFile,
  ) {
    this.users = options.users;
    this.tokenSha256 = options.token === null ? null : sha256(options.token);
  }

  /** True when requests must carry a token (a token or a users file is configured). */
  get required(): boolean {
    return this.tokenSha256 !== null || this.options.usersFile !== null;
  }

  /**
   * Who `token` is, or null when it is nobody's. Hashes are compared in constant time, and with
   * every user whoever matches, so the time taken says nothing of which user or how many.
   */
  identify(token: string | undefined): Principal | null {
    if (!this.required) return OPEN;
    if (token === undefined) return null;
    const given = sha256(token);
    let found: Principal | null = null;
    if (this.tokenSha256 !== null && timingSafeEqual(given, this.tokenSha256)) found = { user: ADMIN_TOKEN_USER, role: 'admin' };
    for (const user of this.users) {
      if (timingSafeEqual(given, user.tokenSha256) && found === null) found = { user: user.name, role: user.role };
    }
    return found;
  }

  /** Reads the users file again (SIGHUP); keeps the current users when it is unusable. */
  reload(): void {
    const file = this.options.usersFile;
    if (file === null) return;
    try {
      this.users = this.load(file);
    } catch (err) {
      if (!(err instanceof UsersFileError)) throw err;
      this.log.error({ file, err: err.message }, `--admin-users ${file}: ${err.message}; keeping the ${this.users.length} users loaded before`);
      return;
    }
    this.log.info({ file, users: this.users.length }, `--admin-users: ${this.users.length} users loaded`);
    this.onReload?.();
  }
}
