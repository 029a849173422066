/**
 * README's architecture map names every source file of server/ (by file name), so a newcomer
 * finds each one where the map says; a file added without a line there fails here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sources(full));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(full);
  }
  return out;
}

describe("README's architecture map", () => {
  it('names every folder and every source file of server/', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const map = readme.slice(readme.indexOf('## Architecture'), readme.indexOf('\n## ', readme.indexOf('## Architecture') + 1));
    const files = sources(path.join(ROOT, 'server'));
    const unnamed = files.map((f) => path.relative(ROOT, f)).filter((f) => !map.includes(path.basename(f, '.ts')) && !map.includes(path.basename(f)));
    expect(unnamed).toEqual([]);
    const folders = [...new Set(files.map((f) => path.relative(ROOT, path.dirname(f))))].filter((d) => d !== 'server');
    expect(folders.filter((d) => !map.includes(`${d}/`))).toEqual([]);
  });
});
