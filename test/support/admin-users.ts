/** Users files for tests: a name, a token and a role each, written where the test says. */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { Role } from '../../shared/roles.js';

export interface TestUser {
  name: string;
  token: string;
  role: Role;
}

/** One user of each role, with tokens of their own. */
export const TEST_USERS: readonly TestUser[] = [
  { name: 'vera', token: 'viewer-token-7c1e', role: 'viewer' },
  { name: 'otto', token: 'operator-token-52ab', role: 'operator' },
  { name: 'ada', token: 'admin-token-e90f', role: 'admin' },
];

/** The token's SHA-256 in hex, as `printf %s "$TOKEN" | sha256sum` prints it. */
export const sha256Hex = (token: string): string => createHash('sha256').update(token).digest('hex');

/** Writes `users` to `file` in the --admin-users format. */
export function writeUsersFile(file: string, users: readonly TestUser[] = TEST_USERS): string {
  writeFileSync(file, JSON.stringify({ users: users.map((u) => ({ name: u.name, token_sha256: sha256Hex(u.token), role: u.role })) }));
  return file;
}

export const userNamed = (name: string): TestUser => TEST_USERS.find((u) => u.name === name)!;
