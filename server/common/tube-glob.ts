/**
 * A glob over names (tubes, and the access rules' Gearman functions and certificate CNs): `*`
 * any run of characters, `?` one; everything else literal (tube names may hold `.`, `$`, `(`,
 * `)` and `+`, which are not special here).
 */
export function tubeMatcher(glob: string): (tube: string) => boolean {
  if (glob === '*') return () => true;
  const source = glob.replace(/[.*+?^${}()|[\]\\/]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`));
  // `s`: a Gearman function name may hold any byte but NUL, a newline too.
  const re = new RegExp(`^${source}$`, 's');
  return (tube) => re.test(tube);
}

/** Characters a glob may hold: a tube name's, plus `*` and `?`. */
export const TUBE_GLOB = /^[A-Za-z0-9\-+/;.$_()*?]{1,200}$/;
