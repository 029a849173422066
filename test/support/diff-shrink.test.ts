import { describe, expect, it } from 'vitest';
import type { Script } from './conversation-gen.js';
import { prefixUpTo, shrinkScript } from './diff-shrink.js';

const step = (conn: number, s: string): { conn: number; bytes: Buffer } => ({ conn, bytes: Buffer.from(s, 'latin1') });
const put = (body: string): string => `put 0 0 1000 ${body.length}\r\n${body}\r\n`;
const text = (s: Script): string[][] => s.map((c) => c.steps.map((st) => `${st.conn}:${st.bytes.toString('latin1')}`));
const budget = { runs: 1000, deadline: Date.now() + 60_000 };

/** The id the server gives the put whose body is `body`, counting puts in script order. */
function idOf(script: Script, body: string): number {
  let id = 0;
  for (const c of script) {
    for (const st of c.steps) {
      const s = st.bytes.toString('latin1');
      if (s.startsWith('put ')) {
        id++;
        if (s.endsWith(`\r\n${body}\r\n`)) return id;
      }
    }
  }
  return -1;
}

describe('differential script shrinker', () => {
  it('drops everything the failure does not need', async () => {
    const script: Script = [
      { conns: 2, steps: [step(0, 'stats\r\n'), step(1, 'BUG\r\n'), step(0, 'list-tubes\r\n')] },
      { conns: 1, steps: [step(0, 'use a\r\n')] },
    ];
    const r = await shrinkScript(script, async (s) => text(s).flat().some((x) => x.endsWith('BUG\r\n')), budget);
    expect(r.script.map((c) => c.conns)).toEqual([1]);
    expect(text(r.script)).toEqual([['0:BUG\r\n']]);
  });

  it('renumbers job ids when it drops the puts before them', async () => {
    const script: Script = [
      { conns: 1, steps: [step(0, put('a')), step(0, put('b')), step(0, put('target'))] },
      { conns: 1, steps: [step(0, 'stats-job 3\r\n')] },
    ];
    // Fails when a stats-job names the id of the put whose body is "target".
    const fails = async (s: Script): Promise<boolean> => {
      const id = idOf(s, 'target');
      return text(s).flat().some((x) => x === `0:stats-job ${id}\r\n`);
    };
    const r = await shrinkScript(script, fails, budget);
    expect(text(r.script)).toEqual([[`0:${put('target')}`], ['0:stats-job 1\r\n']]);
  });

  it('cuts a script after the step that differed', () => {
    const script: Script = [
      { conns: 1, steps: [step(0, 'a\r\n'), step(0, 'b\r\n')] },
      { conns: 1, steps: [step(0, 'c\r\n'), step(0, 'd\r\n')] },
    ];
    expect(text(prefixUpTo(script, 'conversation 1 step 0 connection 0'))).toEqual([['0:a\r\n', '0:b\r\n'], ['0:c\r\n']]);
    expect(text(prefixUpTo(script, 'conversation 0 opens 1 connection(s), each sends "x"'))).toEqual([[]]);
    expect(prefixUpTo(script, 'end of script: conversation 1 connection 0')).toBe(script);
  });
});
