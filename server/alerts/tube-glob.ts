/**
 * A tube glob: `*` any run of characters, `?` one; everything else literal (tube names may hold
 * `.`, `$`, `(`, `)` and `+`, which are not special here).
 */
export function tubeMatcher(glob: string): (tube: string) => boolean {
  if (glob === '*') return () => true;
  const source = glob.replace(/[.*+?^${}()|[\]\\/]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`));
  const re = new RegExp(`^${source}$`);
  return (tube) => re.test(tube);
}

/** Characters a glob may hold: a tube name's, plus `*` and `?`. */
export const TUBE_GLOB = /^[A-Za-z0-9\-+/;.$_()*?]{1,200}$/;
