import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobBytes } from '../operations/operations.js';
import { Acl, type AccessSubject } from './acl.js';
import { loadAclFile } from './acl-file.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'beanpole-acl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A log that keeps its lines. */
function memoryLog(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: pino({}, { write: (line: string) => lines.push(line) }), lines };
}

/** Job 1 is in `secret`, job 2 in `jobs`; no others. */
const JOBS = { peek: (id: number) => (id === 1 || id === 2 ? ({ id, tubeName: id === 1 ? 'secret' : 'jobs' } as JobBytes) : undefined) };

function aclFrom(doc: unknown): { acl: Acl; file: string } {
  const file = path.join(dir, `acl-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(doc));
  return { acl: new Acl(file, loadAclFile(file), JOBS), file };
}

function subject(identity: string | null, protocol: 'beanstalkd' | 'gearman', served: string[]): AccessSubject & { dropped: number } {
  const s = { identity, protocol, served: () => served, dropped: 0, drop: () => s.dropped++ };
  return s;
}

describe('Acl and a connection access', () => {
  it('answers commands, tubes and jobs by the identity, and counts denials per rule key', () => {
    const { acl } = aclFrom({ identities: { 'worker-*': { tubes: ['jobs'], commands: ['reserve', 'delete'] }, '*': { tubes: ['public'] } } });
    const w = acl.connect(subject('worker-7', 'beanstalkd', []));
    expect(w.mayRun('reserve')).toBe(true);
    expect(w.mayRun('put')).toBe(false);
    expect(w.mayRun('quit')).toBe(true);
    expect(w.mayTouch('jobs')).toBe(true);
    expect(w.mayTouch('secret')).toBe(false);
    expect(w.mayTouchJob(1)).toBe(false);
    expect(w.mayTouchJob(2)).toBe(true);
    expect(w.mayTouchJob(3)).toBe(true); // no such job: NOT_FOUND, as ever
    expect(w.permits('secret')).toBe(false); // counts nothing
    const plain = acl.connect(subject(null, 'beanstalkd', []));
    expect(plain.mayTouch('public')).toBe(true);
    expect(plain.mayTouch('jobs')).toBe(false);
    expect(acl.denialCounts()).toEqual([
      { identity: 'worker-*', protocol: 'beanstalkd', count: 3 },
      { identity: '*', protocol: 'beanstalkd', count: 1 },
    ]);
  });

  it('Gearman: functions by the function rules, and admin only when commands allow it', () => {
    const { acl } = aclFrom({ identities: { ops: { functions: ['resize_*'], commands: ['admin'] }, app: { functions: [] } } });
    const ops = acl.connect(subject('ops', 'gearman', []));
    expect(ops.mayTouch('resize_small')).toBe(true);
    expect(ops.mayTouch('mail')).toBe(false);
    expect(ops.mayAdminister()).toBe(true);
    const app = acl.connect(subject('app', 'gearman', []));
    expect(app.mayTouch('resize_small')).toBe(false);
    expect(app.mayAdminister()).toBe(true); // commands omitted: everything
    const stranger = acl.connect(subject('stranger', 'gearman', []));
    expect(stranger.mayAdminister()).toBe(false);
    expect(stranger.mayTouch('resize_small')).toBe(false);
    expect(acl.denialCounts()).toContainEqual({ identity: '(none)', protocol: 'gearman', count: 2 });
  });

  it('a reload gives open connections the new rules and closes those served from what they may no longer touch', () => {
    const { acl, file } = aclFrom({ identities: { '*': { tubes: ['a', 'b'] } } });
    const onA = subject(null, 'beanstalkd', ['a']);
    const onB = subject(null, 'beanstalkd', ['b']);
    const accessA = acl.connect(onA);
    const accessB = acl.connect(onB);
    expect(accessB.mayTouch('b')).toBe(true); // cached under the old rule: the reload must clear it
    writeFileSync(file, JSON.stringify({ identities: { '*': { tubes: ['a'] } } }));
    const { log, lines } = memoryLog();
    acl.reload(log);
    expect([onA.dropped, onB.dropped]).toEqual([0, 1]);
    expect(accessA.mayTouch('a')).toBe(true);
    expect(accessB.mayTouch('b')).toBe(false);
    expect(lines.join('')).toMatch(/access rules reloaded/);
    // A closed connection is forgotten: a later reload does not drop it again.
    accessB.close();
    writeFileSync(file, JSON.stringify({ identities: { '*': { tubes: [] } } }));
    acl.reload(log);
    expect([onA.dropped, onB.dropped]).toEqual([1, 1]);
  });

  it('a reload of a file that has become unusable keeps the rules in force and logs why', () => {
    const { acl, file } = aclFrom({ identities: { '*': { tubes: ['a'] } } });
    const access = acl.connect(subject(null, 'beanstalkd', ['a']));
    writeFileSync(file, '{"identities": {"*": {"tubes": [1]}}}');
    const { log, lines } = memoryLog();
    acl.reload(log);
    expect(access.mayTouch('a')).toBe(true);
    expect(access.mayTouch('b')).toBe(false);
    expect(lines.join('')).toMatch(/not reloaded, the previous ones stay in force: --acl .*tubes: want a list of strings/);
  });
});
