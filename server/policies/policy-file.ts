/**
 * The --policies file: tube policies (and Gearman function policies) an operator keeps in
 * version control rather than setting them on the dashboard. Read at start (a problem is a
 * usage error) and again on SIGHUP (a problem keeps the policies already applied).
 *
 *   {"tubes": {"emails": {"concurrency": 5, "rate": {"perSecond": 20}}},
 *    "functions": {"resize": {"concurrency": 2}}}
 */
import { readFileSync } from 'node:fs';
import { isValidTubeName } from '../../shared/limits.js';
import type { TubePolicy } from '../../shared/policy.js';
import { parsePolicy } from '../common/policy-schema.js';
import { isObject, parseJsonObject } from '../common/json-object.js';

/** The policies a file sets, by tube and by Gearman function name. */
export interface PolicyFile {
  tubes: ReadonlyMap<string, TubePolicy>;
  functions: ReadonlyMap<string, TubePolicy>;
}

/** A problem with the policies file, in words that name it and where. */
export class PolicyFileError extends Error {}

/** A policies file is small; anything this big is the wrong file. */
const MAX_FILE_BYTES = 4 * 1024 * 1024;
/** Gearman function names are bytes up to the packet's limit; a file names them as text. */
const MAX_FUNCTION_NAME = 512;

export function parsePolicyFile(text: string): PolicyFile {
  const doc = parseJsonObject(text, ['tubes', 'functions'], '{"tubes": {...}, "functions": {...}}', '"tubes" and "functions"', (m) => new PolicyFileError(m));
  return {
    tubes: section(doc.tubes, 'tubes', isValidTubeName, 'a valid tube name'),
    functions: section(doc.functions, 'functions', (name) => name.length > 0 && name.length <= MAX_FUNCTION_NAME, `1-${MAX_FUNCTION_NAME} characters`),
  };
}

export function loadPolicyFile(file: string): PolicyFile {
  let text: Buffer;
  try {
    text = readFileSync(file);
  } catch (err) {
    throw new PolicyFileError(`cannot read it: ${(err as Error).message}`);
  }
  if (text.length > MAX_FILE_BYTES) throw new PolicyFileError(`it is ${text.length} bytes; a policies file is at most ${MAX_FILE_BYTES}`);
  return parsePolicyFile(text.toString('utf8'));
}

function section(value: unknown, key: string, validName: (name: string) => boolean, want: string): Map<string, TubePolicy> {
  const policies = new Map<string, TubePolicy>();
  if (value === undefined) return policies;
  if (!isObject(value)) throw new PolicyFileError(`"${key}" must be an object of name: policy`);
  for (const [name, raw] of Object.entries(value)) {
    if (!validName(name)) throw new PolicyFileError(`${key}: ${JSON.stringify(name)} is not ${want}`);
    const parsed = parsePolicy(raw);
    if (!parsed.ok) throw new PolicyFileError(`${key}.${name}: ${parsed.problem}`);
    policies.set(name, parsed.policy);
  }
  return policies;
}

