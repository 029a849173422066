/**
 * The --admin-users file: dashboard users, each with the SHA-256 of their bearer token and a
 * role. Read at start (a problem is a usage error) and again on SIGHUP (a problem keeps the users
 * already loaded). Plain checks rather than zod: this runs at start, before the dashboard's
 * modules are loaded (admin/shell.ts).
 *
 *   {"users": [{"name": "ana", "token_sha256": "<64 hex digits>", "role": "viewer"}]}
 */
import { readFileSync } from 'node:fs';
import { ROLES, isRole, type Role } from '../shared/roles.js';

export interface AdminUser {
  name: string;
  /** The token's SHA-256, 32 bytes. */
  tokenSha256: Buffer;
  role: Role;
}

/** A user name: what the audit log and the dashboard's header show. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
/** A users file is small; anything this big is the wrong file. */
const MAX_FILE_BYTES = 1024 * 1024;

/** A problem with the users file, in words that name it. */
export class UsersFileError extends Error {}

/** The users in `text`, or a UsersFileError saying what is wrong and where. */
export function parseUsersFile(text: string): AdminUser[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsersFileError(`not JSON: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new UsersFileError('want an object {"users": [...]}');
  const extra = Object.keys(doc).filter((k) => k !== 'users');
  if (extra.length > 0) throw new UsersFileError(`unknown key ${JSON.stringify(extra[0])} (only "users")`);
  const list = (doc as { users?: unknown }).users;
  if (!Array.isArray(list)) throw new UsersFileError('"users" must be a list');
  const names = new Set<string>();
  const hashes = new Set<string>();
  return list.map((entry: unknown, i): AdminUser => {
    const where = `users[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new UsersFileError(`${where}: want an object`);
    const unknown = Object.keys(entry).filter((k) => k !== 'name' && k !== 'token_sha256' && k !== 'role');
    if (unknown.length > 0) throw new UsersFileError(`${where}: unknown key ${JSON.stringify(unknown[0])} (name, token_sha256, role)`);
    const { name, token_sha256: hash, role } = entry as Record<string, unknown>;
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new UsersFileError(`${where}.name: want 1-64 of A-Z a-z 0-9 . _ @ -, starting with a letter or digit`);
    }
    if (names.has(name)) throw new UsersFileError(`${where}.name: ${name} is listed twice`);
    names.add(name);
    if (typeof hash !== 'string' || !SHA256_HEX.test(hash)) {
      throw new UsersFileError(`${where}.token_sha256 (${name}): want 64 hex digits (printf %s "$TOKEN" | sha256sum)`);
    }
    const lower = hash.toLowerCase();
    // Two users with one token could not be told apart: which name would the audit log write?
    if (hashes.has(lower)) throw new UsersFileError(`${where}.token_sha256 (${name}): another user has the same token`);
    hashes.add(lower);
    if (!isRole(role)) throw new UsersFileError(`${where}.role (${name}): want one of ${ROLES.join(', ')}`);
    return { name, tokenSha256: Buffer.from(lower, 'hex'), role };
  });
}

/** Reads and checks the users file at `file`. */
export function loadUsersFile(file: string, read: (file: string) => Buffer = readFileSync): AdminUser[] {
  let bytes: Buffer;
  try {
    bytes = read(file);
  } catch (err) {
    throw new UsersFileError(`cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (bytes.length > MAX_FILE_BYTES) throw new UsersFileError(`over ${MAX_FILE_BYTES} bytes: not a users file`);
  return parseUsersFile(bytes.toString('utf8'));
}
