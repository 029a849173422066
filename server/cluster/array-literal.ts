/**
 * Array parameters as PostgreSQL array literals, made the cheap way. The batched statements pass
 * arrays of a batch's values (tubes, ids, priorities, bodies: 8 arrays of up to hundreds of
 * elements for a put), and node-postgres turns each element into a string, runs two regular
 * expressions over it and quotes it: a third of everything a busy cluster node allocated
 * (BENCHMARKS.md). Numbers need none of that: `join` writes them at once. The literal is the
 * one pg would send, element for element, but for the quotes numbers do not need.
 */

/** A quoted element: backslashes and double quotes escaped, as pg does. */
function quoted(s: string): string {
  return s.includes('\\') || s.includes('"') ? `"${s.replace(/[\\"]/g, '\\$&')}"` : `"${s}"`;
}

function element(v: unknown): string | null {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'string') return quoted(v);
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  // bytea in hex; the backslash doubled for the array's own escaping.
  if (Buffer.isBuffer(v)) return `\\\\x${v.toString('hex')}`;
  return null;
}

function allNumbers(values: readonly unknown[]): boolean {
  for (let i = 0; i < values.length; i++) if (typeof values[i] !== 'number') return false;
  return true;
}

/** `values` as an array literal, or null when an element is of a kind left to pg (a date, an object, a nested array). */
export function arrayLiteral(values: readonly unknown[]): string | null {
  if (allNumbers(values)) return `{${values.join(',')}}`;
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const e = element(values[i]);
    if (e === null) return null;
    parts[i] = e;
  }
  return `{${parts.join(',')}}`;
}

/** A statement's parameters, each array that arrayLiteral can write replaced by its literal. */
export function withArrayLiterals(values: readonly unknown[]): unknown[] {
  return values.map((v) => (Array.isArray(v) ? (arrayLiteral(v) ?? v) : v));
}
