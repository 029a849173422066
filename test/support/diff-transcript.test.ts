import { describe, expect, it } from 'vitest';
import { compareTranscripts, escapeBytes, normalizePair, type Entry } from './diff-transcript.js';

const ok = (body: string): string => `OK ${body.length}\r\n${body}\r\n`;
const stats = (pid: number, version: string, urgent: number): string =>
  ok(`---\ncurrent-jobs-urgent: ${urgent}\npid: ${pid}\nversion: ${version}\nuptime: 3\nid: abc\nhostname: h\n`);
const job = (age: number, timeLeft: number): string => ok(`---\nid: 1\ntube: default\nstate: delayed\nage: ${age}\ntime-left: ${timeLeft}\n`);

const transcripts = (ref: string[], tgt: string[]): { reference: Entry[]; target: Entry[]; lateReads: [number, number] } => ({
  reference: [{ where: 'step', got: ref }],
  target: [{ where: 'step', got: tgt }],
  lateReads: [0, 0],
});

describe('differential transcript normalisation', () => {
  it('masks process and host facts in stats, and only those', () => {
    const [a, b] = normalizePair(stats(10, '"1.12"', 0), stats(99999, '"0.1.0"', 0));
    expect(a).toBe(b);
    expect(a).toContain('pid: <masked>');
    const [c, d] = normalizePair(stats(10, '"1.12"', 0), stats(10, '"1.12"', 1));
    expect(c).not.toBe(d);
  });

  it('lets age and time-left differ by one second, not more', () => {
    expect(compareTranscripts(transcripts([job(0, 999)], [job(1, 998)]))).toBeNull();
    expect(compareTranscripts(transcripts([job(0, 999)], [job(2, 999)]))).not.toBeNull();
    expect(compareTranscripts(transcripts([job(9, 1000)], [job(10, 999)]))).toBeNull();
  });

  it('leaves a reply alone when its OK length does not match its body', () => {
    const bad = `OK 5\r\n---\npid: 1\n\r\n`;
    const [, b] = normalizePair(stats(1, '"1.12"', 0), bad);
    expect(b).toBe(bad);
  });

  it('reports missing and extra replies', () => {
    expect(compareTranscripts(transcripts(['A\r\n'], ['A\r\n', 'B\r\n']))).not.toBeNull();
    expect(compareTranscripts(transcripts(['<timeout>'], ['<timeout>']))).toBeNull();
  });

  it('renders bytes unambiguously', () => {
    expect(escapeBytes('a\r\n\0\xff{')).toBe('a\\r\\n\\0\\xff\\x7b');
    expect(escapeBytes('x'.repeat(20))).toBe('{x x20}');
  });
});
