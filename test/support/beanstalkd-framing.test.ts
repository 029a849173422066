import { describe, expect, it } from 'vitest';
import { FramingModel, lineHazard, newServerFrames } from './beanstalkd-framing.js';

/** Feeds each chunk in turn; returns the forecasts. */
function feed(...chunks: string[]): { replies: number; closes: boolean; hazard: string | null }[] {
  const m = new FramingModel(newServerFrames());
  return chunks.map((c) => {
    const { replies, closes, hazard } = m.feed(Buffer.from(c, 'latin1'));
    return { replies, closes, hazard };
  });
}

const replies = (...chunks: string[]): number[] => feed(...chunks).map((f) => f.replies);

// Cases from the reference notes (section 1.1 and 1.3), all verified there against beanstalkd 1.12.
describe('beanstalkd framing model', () => {
  it('answers each complete line once, pipelined or not', () => {
    expect(replies('use a\r\nuse b\r\n')).toEqual([2]);
    expect(replies('stats\r', '\n')).toEqual([0, 1]);
    expect(replies('\r\n')).toEqual([1]);
  });

  it('waits for the body of a put and answers after it', () => {
    expect(replies('put 0 0 1000 3\r\n', 'a\r\n', 'c\r\n')).toEqual([0, 0, 1]);
    expect(replies('put 0 0 1000 3\r\nabc\r\n')).toEqual([1]);
    // EXPECTED_CRLF does not resync: the leftover \n starts the next line.
    expect(replies('put 0 0 0 1\r\nxy\r\n', 'stats\r\n')).toEqual([1, 1]);
    // trailing garbage: BAD_FORMAT and the body is a command
    expect(replies('put 0 0 0 1 \r\nx\r\n')).toEqual([2]);
    // JOB_TOO_BIG only after bytes + 2 bytes
    expect(replies('put 0 0 0 65536\r\n', 'x'.repeat(65537), 'x', 'stats\r\n')).toEqual([0, 0, 1, 1]);
    expect(replies('put 0 0 0 65535\r\n', 'x'.repeat(65535), '\r\n')).toEqual([0, 0, 1]);
  });

  it('answers BAD_FORMAT once for an overlong line and parses what follows', () => {
    expect(replies(`${'a'.repeat(300)}\r\nlist-tube-used\r\n`)).toEqual([2]);
    expect(replies(`${'a'.repeat(222)}\r\n`)).toEqual([1]);
    // the CRLF split across the window boundary is missed; the next line is swallowed
    expect(replies(`${'a'.repeat(223)}\r\n`, 'stats\r\n', 'stats\r\n')).toEqual([0, 1, 1]);
  });

  it('finds a line end only at the first CR', () => {
    expect(replies('a\rb\r\n')).toEqual([0]);
    expect(replies('a\rb\r\n', 'x'.repeat(218), 'stats\r\n')).toEqual([0, 0, 1]);
    expect(replies('stats\n')).toEqual([0]);
  });

  it('closes on quit as a prefix, and ignores the rest', () => {
    expect(feed('quit-foo\r\nstats\r\n')).toEqual([{ replies: 0, closes: true, hazard: null }]);
    expect(feed('quit\0\r\n')).toEqual([{ replies: 1, closes: false, hazard: null }]);
  });

  it('flags input whose outcome depends on time', () => {
    expect(lineHazard('reserve')).not.toBeNull();
    expect(lineHazard('reserve-with-timeout 1')).not.toBeNull();
    expect(lineHazard('reserve-with-timeout -1')).not.toBeNull();
    expect(lineHazard('reserve-with-timeout \t5')).not.toBeNull();
    expect(lineHazard('reserve-with-timeout 0abc')).toBeNull();
    expect(lineHazard('reserve-with-timeout abc')).toBeNull();
    expect(lineHazard('release 1 0 5')).not.toBeNull();
    expect(lineHazard('release 1 0 1000')).toBeNull();
    expect(lineHazard('pause-tube default 999')).not.toBeNull();
    expect(lineHazard('pause-tube default 0')).toBeNull();
    expect(feed('put 0 5 1000 1\r\nx\r\n')[0]!.hazard).not.toBeNull();
    expect(feed('put 0 0 0 1\r\nx\r\n')[0]!.hazard).not.toBeNull();
    expect(feed('put 0 0 1000 1\r\nx\r\n')[0]!.hazard).toBeNull();
    expect(feed('put 0 5 0 70000\r\n')[0]!.hazard).toBeNull(); // JOB_TOO_BIG: no job, no hazard
  });

  it('knows which jobs are still receiving their body', () => {
    const server = newServerFrames();
    const a = new FramingModel(server);
    const b = new FramingModel(server);
    a.feed(Buffer.from('put 0 0 1000 5\r\nab', 'latin1'));
    expect(b.feed(Buffer.from('peek 1\r\n', 'latin1')).hazard).not.toBeNull();
    expect(b.feed(Buffer.from('stats-job 1\r\n', 'latin1')).quirks).toEqual(['stats-job-in-flight']);
    expect(a.feed(Buffer.from('cde\r\n', 'latin1')).replies).toBe(1);
    expect(b.feed(Buffer.from('peek 1\r\nstats-job 1\r\n', 'latin1'))).toEqual({ replies: 2, closes: false, ignored: false, newIds: 0, hazard: null, quirks: [] });
  });
});
