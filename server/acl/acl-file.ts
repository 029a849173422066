/**
 * The --acl file: what each client identity (its certificate's subject CN) may do on the job
 * ports. Read at start (a problem is a usage error) and again on SIGHUP (a problem keeps the
 * rules in force). Plain checks, as for the --admin-users file: this runs at start.
 *
 *   {"identities": {
 *     "billing-api": {"tubes": ["billing-*"], "commands": ["use", "put"]},
 *     "worker-*":    {"tubes": ["billing-*", "mail"], "functions": ["resize_*"]},
 *     "*":           {"tubes": ["public-*"], "functions": [], "commands": ["use", "put", "list-tubes"]}}}
 *
 * An omitted list allows everything; an empty one nothing.
 */
import { readFileSync } from 'node:fs';
import { isObject, parseJsonObject } from '../common/json-object.js';
import { COUNTED_COMMANDS } from '../operations/operations.js';
import { TUBE_GLOB, tubeMatcher } from '../common/tube-glob.js';

/** The name in `commands` that allows Gearman's text admin commands that change the server. */
export const ADMIN_COMMAND = 'admin';
/** Names a `commands` list may hold: beanstalkd's commands, and `admin`. */
export const ACL_COMMANDS: readonly string[] = [...COUNTED_COMMANDS, 'quit', ADMIN_COMMAND];

/** What one entry of `identities` allows; null: everything of that kind. */
export interface AclRule {
  /** The entry's key as written (a CN, a glob of CNs, or `*`): what denials are counted under. */
  key: string;
  tubes: ((tube: string) => boolean) | null;
  functions: ((fn: string) => boolean) | null;
  commands: ReadonlySet<string> | null;
}

/** The rules of a file, ready to look an identity up in. */
export interface AclRules {
  /** Keys without a wildcard: the CN itself. */
  exact: ReadonlyMap<string, AclRule>;
  /** Keys with `*` or `?` (but `*` alone), in file order, each with its CN matcher. */
  globs: readonly { matches: (cn: string) => boolean; rule: AclRule }[];
  /** `*`: everyone else, plaintext clients too; null: they may do nothing. */
  others: AclRule | null;
}

/** A problem with the rule file, in words that say where. */
export class AclFileError extends Error {}

/** Longest Gearman function name (gearman/limits.ts allows 255 bytes); a longer glob could match none. */
const MAX_FUNCTION_GLOB = 255;
/** A rule file is small; anything this big is the wrong file. */
const MAX_FILE_BYTES = 1024 * 1024;
const RULE_KEYS = ['tubes', 'functions', 'commands'];

/** The rules in `text`, or an AclFileError saying what is wrong and where. */
export function parseAclFile(text: string): AclRules {
  const doc = parseJsonObject(text, ['identities'], '{"identities": {...}}', '"identities"', (m) => new AclFileError(m));
  const identities = doc.identities;
  if (!isObject(identities)) throw new AclFileError('"identities" must be an object: {"<certificate CN or glob>": {"tubes": [...], ...}}');
  const exact = new Map<string, AclRule>();
  const globs: { matches: (cn: string) => boolean; rule: AclRule }[] = [];
  let others: AclRule | null = null;
  for (const [key, entry] of Object.entries(identities)) {
    if (key.length === 0) throw new AclFileError('identities: an empty key (want a certificate CN, a glob of CNs, or "*")');
    const rule = parseRule(key, entry);
    if (key === '*') others = rule;
    else if (/[*?]/.test(key)) globs.push({ matches: tubeMatcher(key), rule });
    else exact.set(key, rule);
  }
  return { exact, globs, others };
}

function parseRule(key: string, entry: unknown): AclRule {
  const where = `identities[${JSON.stringify(key)}]`;
  if (!isObject(entry)) throw new AclFileError(`${where}: want an object {"tubes": [...], "functions": [...], "commands": [...]}`);
  const unknown = Object.keys(entry).filter((k) => !RULE_KEYS.includes(k));
  if (unknown.length > 0) throw new AclFileError(`${where}: unknown key ${JSON.stringify(unknown[0])} (${RULE_KEYS.join(', ')})`);
  const tubes = globList(entry.tubes, `${where}.tubes`, (g) => TUBE_GLOB.test(g), 'tube names and globs (A-Z a-z 0-9 - + / ; . $ _ ( ) * ?, at most 200)');
  const functions = globList(
    entry.functions,
    `${where}.functions`,
    (g) => g.length > 0 && g.length <= MAX_FUNCTION_GLOB && !g.includes('\0'),
    `function names and globs (1-${MAX_FUNCTION_GLOB} characters, no NUL)`,
  );
  let commands: Set<string> | null = null;
  if (entry.commands !== undefined) {
    const list = stringList(entry.commands, `${where}.commands`);
    const bad = list.find((c) => !ACL_COMMANDS.includes(c));
    if (bad !== undefined) throw new AclFileError(`${where}.commands: ${JSON.stringify(bad)} is not a beanstalkd command nor "admin"`);
    commands = new Set(list);
  }
  return { key, tubes, functions, commands };
}

/** A list of globs as one matcher; null when the list is omitted (everything). */
function globList(value: unknown, where: string, valid: (glob: string) => boolean, want: string): ((name: string) => boolean) | null {
  if (value === undefined) return null;
  const list = stringList(value, where);
  const bad = list.find((g) => !valid(g));
  if (bad !== undefined) throw new AclFileError(`${where}: ${JSON.stringify(bad)} is not valid (want ${want})`);
  if (list.includes('*')) return () => true;
  const matchers = list.map(tubeMatcher);
  return (name) => matchers.some((m) => m(name));
}

function stringList(value: unknown, where: string): string[] {
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === 'string')) throw new AclFileError(`${where}: want a list of strings`);
  return value;
}

/** Reads and checks the rule file at `file`; AclFileError names the file. */
export function loadAclFile(file: string, read: (file: string) => Buffer = readFileSync): AclRules {
  let bytes: Buffer;
  try {
    bytes = read(file);
  } catch (err) {
    throw new AclFileError(`--acl ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (bytes.length > MAX_FILE_BYTES) throw new AclFileError(`--acl ${file}: over ${MAX_FILE_BYTES} bytes: not a rule file`);
  try {
    return parseAclFile(bytes.toString('utf8'));
  } catch (err) {
    throw new AclFileError(`--acl ${file}: ${(err as Error).message}`);
  }
}

/** The rule for a connection whose certificate says `cn` (null: no certificate); null: no rule, nothing allowed. */
export function ruleFor(rules: AclRules, cn: string | null): AclRule | null {
  if (cn !== null) {
    const exact = rules.exact.get(cn);
    if (exact !== undefined) return exact;
    for (const g of rules.globs) if (g.matches(cn)) return g.rule;
  }
  return rules.others;
}
