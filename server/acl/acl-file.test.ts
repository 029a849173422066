import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AclFileError, loadAclFile, parseAclFile, ruleFor, type AclRule } from './acl-file.js';

const rules = (doc: unknown) => parseAclFile(JSON.stringify(doc));
const bad = (doc: unknown): string => {
  try {
    parseAclFile(typeof doc === 'string' ? doc : JSON.stringify(doc));
  } catch (err) {
    expect(err).toBeInstanceOf(AclFileError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('the --acl file', () => {
  it('reads identities by CN, by glob and "*", and omitted lists allow everything', () => {
    const r = rules({
      identities: {
        'billing-api': { tubes: ['billing-*'], commands: ['use', 'put'] },
        'worker-?': { tubes: ['jobs'], functions: ['resize_*'] },
        '*': { tubes: [], functions: [], commands: [] },
      },
    });
    const billing = ruleFor(r, 'billing-api')!;
    expect(billing.key).toBe('billing-api');
    expect(billing.tubes!('billing-eu')).toBe(true);
    expect(billing.tubes!('default')).toBe(false);
    expect(billing.functions).toBeNull();
    expect([...billing.commands!]).toEqual(['use', 'put']);
    expect(ruleFor(r, 'worker-7')!.key).toBe('worker-?');
    expect(ruleFor(r, 'worker-17')!.key).toBe('*');
    expect(ruleFor(r, null)!.key).toBe('*');
    const others = ruleFor(r, 'stranger')!;
    expect(others.tubes!('anything')).toBe(false);
    expect(others.commands!.size).toBe(0);
  });

  it('an exact CN wins over a glob, and globs are tried in file order', () => {
    const r = rules({ identities: { 'w-*': { tubes: ['a'] }, 'w-1*': { tubes: ['b'] }, 'w-1': { tubes: ['c'] } } });
    expect(ruleFor(r, 'w-1')!.key).toBe('w-1');
    expect(ruleFor(r, 'w-10')!.key).toBe('w-*');
  });

  it('without "*", a client no entry matches has no rule (it may do nothing)', () => {
    const r = rules({ identities: { ana: {} } });
    expect(ruleFor(r, 'bob')).toBeNull();
    expect(ruleFor(r, null)).toBeNull();
    const ana: AclRule = ruleFor(r, 'ana')!;
    expect([ana.tubes, ana.functions, ana.commands]).toEqual([null, null, null]);
  });

  it('"*" in a list allows every name, and globs match any characters of a function name', () => {
    const r = rules({ identities: { '*': { tubes: ['*'], functions: ['img.*', 'a?c'] } } });
    const rule = ruleFor(r, null)!;
    expect(rule.tubes!('x')).toBe(true);
    expect(rule.functions!('img.resize\nnow')).toBe(true);
    expect(rule.functions!('abc')).toBe(true);
    expect(rule.functions!('imgXresize')).toBe(false);
  });

  it('refuses files that are not rules, saying where', () => {
    expect(bad('{')).toMatch(/^not JSON/);
    expect(bad([])).toMatch(/want an object/);
    expect(bad({ identities: {}, users: [] })).toMatch(/unknown key "users"/);
    expect(bad({ identities: [] })).toMatch(/"identities" must be an object/);
    expect(bad({ identities: { '': {} } })).toMatch(/empty key/);
    expect(bad({ identities: { ana: [] } })).toMatch(/identities\["ana"\]: want an object/);
    expect(bad({ identities: { ana: { tube: [] } } })).toMatch(/identities\["ana"\]: unknown key "tube"/);
    expect(bad({ identities: { ana: { tubes: 'jobs' } } })).toMatch(/identities\["ana"\]\.tubes: want a list of strings/);
    expect(bad({ identities: { ana: { tubes: ['bad tube'] } } })).toMatch(/\.tubes: "bad tube" is not valid/);
    expect(bad({ identities: { ana: { functions: [''] } } })).toMatch(/\.functions: "" is not valid/);
    expect(bad({ identities: { ana: { commands: ['reserve', 'delete-all'] } } })).toMatch(/\.commands: "delete-all" is not a beanstalkd command nor "admin"/);
  });

  describe('from a file', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-acl-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('names the file in every problem', () => {
      const file = path.join(dir, 'acl.json');
      writeFileSync(file, '{"identities": {"*": {"commands": ["nope"]}}}');
      expect(() => loadAclFile(file)).toThrow(`--acl ${file}: identities["*"].commands: "nope" is not a beanstalkd command nor "admin"`);
      expect(() => loadAclFile(path.join(dir, 'missing.json'))).toThrow(/cannot read it \(ENOENT\)/);
      writeFileSync(file, '{"identities": {"*": {"commands": ["admin", "quit", "reserve-job"]}}}');
      expect([...ruleFor(loadAclFile(file), null)!.commands!]).toEqual(['admin', 'quit', 'reserve-job']);
    });
  });
});
