import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { arrayLiteral, withArrayLiterals } from './array-literal.js';

// node-postgres's own encoder: the literal must mean what pg's would.
const require = createRequire(import.meta.url);
const pgUtils = require('pg/lib/utils') as { prepareValue(v: unknown): unknown };
/** pg quotes numbers; PostgreSQL reads `"7"` and `7` alike in an array of numbers. */
const unquoteNumbers = (s: string): string => s.replace(/"(-?[0-9.e+]+)"/g, '$1');

describe('arrayLiteral', () => {
  it('writes numbers as pg does, unquoted', () => {
    const values = [0, 1, -2, 2 ** 53 - 1, 1.5, 1e21];
    expect(arrayLiteral(values)).toBe('{0,1,-2,9007199254740991,1.5,1e+21}');
    expect(arrayLiteral(values)).toBe(unquoteNumbers(pgUtils.prepareValue(values) as string));
  });

  it('quotes and escapes text as pg does', () => {
    const values = ['default', 'a"b', 'back\\slash', '', 'NULL', 'with,comma', '{}', 'é'];
    expect(arrayLiteral(values)).toBe(pgUtils.prepareValue(values));
  });

  it('writes bytea in hex, nulls as NULL, mixed values, as pg does', () => {
    const values = [Buffer.from('hi'), Buffer.alloc(0), null, Buffer.from([0, 255, 92, 34])];
    expect(arrayLiteral(values)).toBe(pgUtils.prepareValue(values));
    expect(arrayLiteral([1, null, 'x', true])).toBe('{1,NULL,"x",true}');
    expect(arrayLiteral([])).toBe('{}');
  });

  it('leaves to pg what it does not write (dates, nested arrays), and other parameters alone', () => {
    expect(arrayLiteral([new Date(0)])).toBeNull();
    expect(arrayLiteral([[1, 2]])).toBeNull();
    const nested = [[1]];
    const params = [[1, 2], 'text', 5, nested, Buffer.from('x')];
    const out = withArrayLiterals(params);
    expect(out).toEqual(['{1,2}', 'text', 5, nested, Buffer.from('x')]);
    expect(params[0]).toEqual([1, 2]); // the caller's values are not changed
  });
});
