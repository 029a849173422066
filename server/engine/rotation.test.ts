import { describe, expect, it } from 'vitest';
import { Rotation } from './rotation.js';

describe('Rotation', () => {
  it('offers the last registered first, and sends the one just served to the back', () => {
    const r = new Rotation<string>();
    for (const f of ['a', 'b', 'c']) r.add(f);
    expect(r.order()).toEqual(['c', 'b', 'a']);
    r.served('c');
    expect(r.order()).toEqual(['b', 'a', 'c']);
    r.add('b'); // registered again: no change
    r.delete('a');
    r.add('d');
    expect(r.order()).toEqual(['d', 'b', 'c']);
  });
});
