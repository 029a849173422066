/**
 * The hand-written rule files (--acl, --policies) are checked field by field so that an
 * operator's mistake is named with its place; both begin the same way: JSON, one object, and
 * only the top-level keys the file knows.
 */

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `text` as a JSON object with no key outside `keys`; else `fail` with what is wrong (`shape`
 * shows the object the file should hold, `only` names the keys it may have).
 */
export function parseJsonObject(text: string, keys: readonly string[], shape: string, only: string, fail: (message: string) => Error): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw fail(`not JSON: ${(err as Error).message}`);
  }
  if (!isObject(doc)) throw fail(`want an object ${shape}`);
  const extra = Object.keys(doc).find((k) => !keys.includes(k));
  if (extra !== undefined) throw fail(`unknown key ${JSON.stringify(extra)} (only ${only})`);
  return doc;
}
