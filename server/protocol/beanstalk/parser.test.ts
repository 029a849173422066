import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CommandParser, LINE_WINDOW, type FrameHandler } from './parser.js';

/** One thing the parser reported, or `resumed` when the test harness resumed a paused parser. */
type Event = ['line', string] | ['overlong'] | ['body', string] | ['skipped'] | ['resumed'];

const line = (text: string): Event => ['line', text];
const body = (bytes: string): Event => ['body', bytes];
const OVERLONG: Event = ['overlong'];
const SKIPPED: Event = ['skipped'];
const RESUMED: Event = ['resumed'];

/** Bytes are written as latin1 strings, so every byte value 0..255 is one character. */
const bytes = (text: string): Buffer => Buffer.from(text, 'latin1');
const a = (n: number): string => 'a'.repeat(n);
const ALL_BYTES = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));

/**
 * The handler a connection would be: `put ... <n>` asks for an n+2 byte body, `skip <n>` discards
 * n bytes, `pause` pauses (the harness resumes once everything is written), and `pause-resume`
 * pauses and resumes inside the same callback.
 */
function recorder(): { parser: CommandParser; events: Event[] } {
  const events: Event[] = [];
  const handler: FrameHandler = {
    line(buf, start, end) {
      // The bytes are valid only during the callback: copy them out as a string now.
      const text = buf.toString('latin1', start, end);
      events.push(line(text));
      if (text.startsWith('put ')) parser.expectBody(Number(/(\d+)$/.exec(text)![1]) + 2);
      else if (text.startsWith('skip ')) parser.skip(Number(text.slice(5)));
      else if (text === 'pause') parser.pause();
      else if (text === 'pause-resume') {
        parser.pause();
        parser.resume();
      }
    },
    overlong() {
      events.push(OVERLONG);
    },
    body(buf, start, end) {
      events.push(body(buf.toString('latin1', start, end)));
    },
    skipped() {
      events.push(SKIPPED);
    },
  };
  const parser = new CommandParser(handler);
  return { parser, events };
}

/** Writes the chunks, then resumes the parser for as long as something paused it. */
function feed(chunks: Buffer[]): Event[] {
  const { parser, events } = recorder();
  for (const chunk of chunks) parser.write(chunk);
  while (parser.paused) {
    events.push(RESUMED);
    parser.resume();
  }
  return events;
}

/**
 * Like `feed`, but as a socket reading into one shared buffer: each chunk is copied into the
 * same memory, written as transient, and that memory is overwritten right after the write.
 */
function feedTransient(chunks: Buffer[]): Event[] {
  const { parser, events } = recorder();
  const shared = Buffer.alloc(Math.max(1, ...chunks.map((c) => c.length)));
  for (const chunk of chunks) {
    chunk.copy(shared);
    parser.write(shared.subarray(0, chunk.length), true);
    shared.fill(0xee);
  }
  while (parser.paused) {
    events.push(RESUMED);
    parser.resume();
  }
  return events;
}

function byteByByte(input: Buffer): Buffer[] {
  return Array.from({ length: input.length }, (_, i) => input.subarray(i, i + 1));
}

interface Fixture {
  name: string;
  input: string;
  events: Event[];
}

const fixtures: Fixture[] = [
  { name: 'a simple line', input: 'stats\r\n', events: [line('stats')] },
  {
    name: 'pipelined lines',
    input: 'use foo\r\nlist-tube-used\r\nstats\r\n',
    events: [line('use foo'), line('list-tube-used'), line('stats')],
  },
  { name: 'an empty line', input: '\r\n', events: [line('')] },
  { name: 'two empty lines', input: '\r\n\r\n', events: [line(''), line('')] },
  { name: 'an unfinished line gives nothing yet', input: 'stats\r\nlist-tub', events: [line('stats')] },
  { name: 'a CR with the LF still to come', input: 'stats\r', events: [] },
  { name: '222 chars + CRLF (224 bytes) is a line', input: `${a(222)}\r\nstats\r\n`, events: [line(a(222)), line('stats')] },
  {
    name: 'the window restarts after each line',
    input: `stats\r\n${a(222)}\r\n${a(222)}\r\n`,
    events: [line('stats'), line(a(222)), line(a(222))],
  },
  { name: '223 chars + CRLF: the CRLF is split across the window boundary, nothing happens', input: `${a(223)}\r\n`, events: [] },
  {
    name: '223 chars + CRLF: the next line is swallowed and answered as overlong',
    input: `${a(223)}\r\nlist-tube-used\r\nstats\r\n`,
    events: [OVERLONG, line('stats')],
  },
  {
    name: '224 chars + CRLF: the CRLF starts the next window',
    input: `${a(224)}\r\nstats\r\n`,
    events: [OVERLONG, line('stats')],
  },
  {
    name: '300 chars + CRLF: overlong, then the next line is parsed normally',
    input: `${a(300)}\r\nlist-tube-used\r\n`,
    events: [OVERLONG, line('list-tube-used')],
  },
  { name: '500 chars + CRLF', input: `${a(500)}\r\nstats\r\n`, events: [OVERLONG, line('stats')] },
  { name: '1000 chars + CRLF', input: `${a(1000)}\r\nstats\r\n`, events: [OVERLONG, line('stats')] },
  {
    name: '446 chars + CRLF ends exactly at the second window',
    input: `${a(446)}\r\nstats\r\n`,
    events: [OVERLONG, line('stats')],
  },
  {
    name: '447 chars + CRLF splits the CRLF across the second window boundary',
    input: `${a(447)}\r\nstats\r\nlist-tubes\r\n`,
    events: [OVERLONG, line('list-tubes')],
  },
  { name: 'an overlong line with no CRLF yet', input: a(1000), events: [] },
  {
    name: 'an overlong line then a put',
    input: `${a(300)}\r\nput 0 0 0 3\r\nabc\r\n`,
    events: [OVERLONG, line('put 0 0 0 3'), body('abc\r\n')],
  },
  {
    name: 'two overlong lines in a row',
    input: `${a(300)}\r\n${a(250)}\r\nstats\r\n`,
    events: [OVERLONG, OVERLONG, line('stats')],
  },
  { name: 'a lone CR: only the first CR counts, so a\\rb\\r\\n is no line', input: 'a\rb\r\nstats\r\n', events: [] },
  {
    name: 'a lone CR: nothing until the window fills, then overlong',
    input: `a\rb\r\n${'x'.repeat(LINE_WINDOW - 5)}stats\r\nlist-tubes\r\n`,
    events: [OVERLONG, line('list-tubes')],
  },
  { name: 'CR CR LF is no line', input: '\r\r\n', events: [] },
  { name: 'a bare LF never ends a line', input: 'stats\nstats\n', events: [] },
  { name: 'a bare LF stays inside the line', input: 'st\nats\r\n\n\r\n', events: [line('st\nats'), line('\n')] },
  {
    name: 'a line of bare LFs fills the window',
    input: `${'\n'.repeat(LINE_WINDOW)}stats\r\nlist-tubes\r\n`,
    events: [OVERLONG, line('list-tubes')],
  },
  { name: 'NUL and high bytes inside a line are passed on', input: 'st\0ts\xff\r\n', events: [line('st\0ts\xff')] },
  {
    name: 'a put with its body',
    input: 'put 0 0 0 5\r\nhello\r\nstats\r\n',
    events: [line('put 0 0 0 5'), body('hello\r\n'), line('stats')],
  },
  {
    name: 'a body containing CRLF',
    input: 'put 0 0 0 4\r\na\r\nb\r\nstats\r\n',
    events: [line('put 0 0 0 4'), body('a\r\nb\r\n'), line('stats')],
  },
  {
    name: 'a body that looks like commands',
    input: 'put 0 0 0 7\r\nstats\r\n\r\nquit\r\n',
    events: [line('put 0 0 0 7'), body('stats\r\n\r\n'), line('quit')],
  },
  {
    name: 'a body with NUL and every byte value',
    input: `put 0 0 0 256\r\n${ALL_BYTES}\r\nstats\r\n`,
    events: [line('put 0 0 0 256'), body(`${ALL_BYTES}\r\n`), line('stats')],
  },
  {
    name: 'a zero-length body is its CRLF',
    input: 'put 0 0 0 0\r\n\r\nstats\r\n',
    events: [line('put 0 0 0 0'), body('\r\n'), line('stats')],
  },
  {
    name: 'a body of 1000 bytes without CRLF is not an overlong line',
    input: `put 0 0 0 1000\r\n${'x'.repeat(1000)}\r\nstats\r\n`,
    events: [line('put 0 0 0 1000'), body(`${'x'.repeat(1000)}\r\n`), line('stats')],
  },
  {
    name: 'a body of 5000 bytes (larger than any chunk of it)',
    input: `put 0 0 0 5000\r\n${ALL_BYTES.repeat(20).slice(0, 5000)}\r\nstats\r\n`,
    events: [line('put 0 0 0 5000'), body(`${ALL_BYTES.repeat(20).slice(0, 5000)}\r\n`), line('stats')],
  },
  {
    name: 'a body is counted, not checked: the parser does not resync after a wrong length',
    input: 'put 0 0 0 1\r\nxy\r\nstats\r\n',
    events: [line('put 0 0 0 1'), body('xy\r'), line('\nstats')],
  },
  {
    name: 'pipelined puts',
    input: 'put 1 0 0 1\r\na\r\nput 2 0 0 2\r\nbc\r\nput 3 0 0 0\r\n\r\n',
    events: [line('put 1 0 0 1'), body('a\r\n'), line('put 2 0 0 2'), body('bc\r\n'), line('put 3 0 0 0'), body('\r\n')],
  },
  {
    name: 'a put line of 224 bytes, then its body',
    input: `put${' '.repeat(212)}0 0 0 1\r\nx\r\nstats\r\n`,
    events: [line(`put${' '.repeat(212)}0 0 0 1`), body('x\r\n'), line('stats')],
  },
  {
    name: 'a body followed by an overlong line',
    input: `put 0 0 0 1\r\nx\r\n${a(300)}\r\nstats\r\n`,
    events: [line('put 0 0 0 1'), body('x\r\n'), OVERLONG, line('stats')],
  },
  {
    name: 'a body does not count towards the next line window',
    input: `put 0 0 0 100\r\n${'x'.repeat(100)}\r\n${a(222)}\r\n`,
    events: [line('put 0 0 0 100'), body(`${'x'.repeat(100)}\r\n`), line(a(222))],
  },
  {
    name: 'skip discards bytes, CRLF included, and reports once',
    input: 'skip 12\r\nab\r\ncd\0\xff\r\nxystats\r\n',
    events: [line('skip 12'), SKIPPED, line('stats')],
  },
  {
    name: 'skip of 100000 bytes',
    input: `skip 100000\r\n${'\r\n'.repeat(50000)}stats\r\n`,
    events: [line('skip 100000'), SKIPPED, line('stats')],
  },
  {
    name: 'pause stops events until resume, which continues in order',
    input: 'pause\r\nstats\r\nput 0 0 0 1\r\nx\r\nskip 2\r\nzzquit\r\n',
    events: [line('pause'), RESUMED, line('stats'), line('put 0 0 0 1'), body('x\r\n'), line('skip 2'), SKIPPED, line('quit')],
  },
  {
    name: 'pause twice',
    input: 'pause\r\npause\r\nstats\r\n',
    events: [line('pause'), RESUMED, line('pause'), RESUMED, line('stats')],
  },
  {
    name: 'pause and resume inside the same callback do not stop anything',
    input: 'pause-resume\r\nstats\r\npause-resume\r\nquit\r\n',
    events: [line('pause-resume'), line('stats'), line('pause-resume'), line('quit')],
  },
];

describe('CommandParser framing fixtures', () => {
  it.each(fixtures)('$name', ({ input, events }) => {
    const data = bytes(input);
    // Serialised once so that thousands of runs compare cheaply; the failing run gets a real diff.
    const expected = JSON.stringify(events);
    const runs: Array<[string, Buffer[]]> = [
      ['whole', [data]],
      ['byte by byte', byteByByte(data)],
    ];
    for (const [how, chunks] of runs) expect(feed(chunks), how).toEqual(events);
    for (let at = 1; at < data.length; at++) {
      const got = feed([data.subarray(0, at), data.subarray(at)]);
      if (JSON.stringify(got) !== expected) expect(got, `split at ${at}`).toEqual(events);
    }
  });

  it('gives the same events for any chunking of all fixtures in a row', () => {
    const data = bytes(fixtures.filter((f) => !f.input.includes('skip 100000')).map((f) => f.input).join(''));
    // The fixtures end in different states, so compute the reference from the whole stream.
    const expected = JSON.stringify(feed([data]));
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: data.length - 1 }), { maxLength: 40 }), (cuts) => {
        const points = [0, ...cuts.sort((x, y) => x - y), data.length];
        const chunks = points.slice(1).map((end, i) => data.subarray(points[i], end));
        return JSON.stringify(feed(chunks)) === expected && JSON.stringify(feedTransient(chunks)) === expected;
      }),
      { numRuns: 200 },
    );
  });
});

describe('CommandParser bodies', () => {
  function capture(chunks: Buffer[]): Array<{ body: Buffer; owned: boolean }> {
    const out: Array<{ body: Buffer; owned: boolean }> = [];
    const parser: CommandParser = new CommandParser({
      line: (l, start, end) => {
        const text = l.toString('latin1', start, end);
        if (text.startsWith('put ')) parser.expectBody(Number(/(\d+)$/.exec(text)![1]) + 2);
      },
      overlong: () => undefined,
      body: (b, start, end, owned) => out.push({ body: b.subarray(start, end), owned }), // a view: what it shares is checked
      skipped: () => undefined,
    });
    for (const c of chunks) parser.write(c);
    return out;
  }

  /** A chunk with an ArrayBuffer of its own: small Buffers otherwise share Node's 8 KiB pool. */
  function unpooled(text: string): Buffer {
    const chunk = Buffer.from(new ArrayBuffer(text.length));
    chunk.write(text, 'latin1');
    return chunk;
  }

  it('hands out a body that came in one chunk as a view of that chunk', () => {
    const chunk = unpooled('put 0 0 0 5\r\nhello\r\nput 0 0 0 2\r\nhi\r\n');
    const got = capture([chunk]);
    expect(got).toHaveLength(2);
    const [first, second] = got;
    expect(first!.owned).toBe(false);
    expect(first!.body.buffer).toBe(chunk.buffer);
    expect(first!.body.byteOffset).toBe(chunk.byteOffset + 13);
    expect(first!.body.toString('latin1')).toBe('hello\r\n');
    expect(second!.owned).toBe(false);
    expect(second!.body.buffer).toBe(chunk.buffer);
    // No copy: a change to the chunk shows through the body.
    chunk[13] = 0x48;
    expect(first!.body.toString('latin1')).toBe('Hello\r\n');
  });

  it('hands out a view of the later chunk when only the line was split', () => {
    const second = unpooled('0 0 5\r\nhello\r\n');
    const got = capture([unpooled('put 0 '), second]);
    expect(got).toHaveLength(1);
    expect(got[0]!.owned).toBe(false);
    expect(got[0]!.body.buffer).toBe(second.buffer);
    expect(got[0]!.body.toString('latin1')).toBe('hello\r\n');
  });

  it('assembles a body split across chunks into a buffer of its own', () => {
    const chunks = [unpooled('put 0 0 0 5\r\nhel'), unpooled('lo\r\n')];
    const got = capture(chunks);
    expect(got).toHaveLength(1);
    expect(got[0]!.owned).toBe(true);
    for (const c of chunks) expect(got[0]!.body.buffer).not.toBe(c.buffer);
    chunks[0]!.fill(0);
    chunks[1]!.fill(0);
    expect(got[0]!.body.toString('latin1')).toBe('hello\r\n');
  });
});

describe('CommandParser large bodies', () => {
  it('does not count a body being assembled as unparsed input, however large', () => {
    const { parser, events } = recorder();
    const size = 8 << 20;
    parser.write(bytes(`put 0 0 0 ${size}\r\n`));
    const piece = Buffer.alloc(64 << 10, 0x62);
    for (let sent = 0; sent < size; sent += piece.length) {
      parser.write(piece);
      // Flow control stops reading above a few MiB of unparsed input: the body must not count.
      expect(parser.buffered).toBe(0);
    }
    parser.write(bytes('\r\nstats\r\n'));
    expect(events).toEqual([line(`put 0 0 0 ${size}`), body('b'.repeat(size) + '\r\n'), line('stats')]);
    expect(parser.idle).toBe(true);
  });
});

describe('CommandParser skip', () => {
  it('skips more than 2^32 bytes without buffering them', () => {
    const { parser, events } = recorder();
    const block = Buffer.alloc(1 << 20, 0x0d);
    const length = 2 ** 32 + 3;
    parser.write(bytes(`skip ${length}\r\n`));
    for (let i = 0; i < 2 ** 12; i++) parser.write(block);
    expect(events).toEqual([line(`skip ${length}`)]);
    expect(parser.idle).toBe(false);
    expect(parser.buffered).toBe(0);
    parser.write(bytes('xy'));
    expect(events).toEqual([line(`skip ${length}`)]);
    parser.write(bytes('zstats\r\n'));
    expect(events).toEqual([line(`skip ${length}`), SKIPPED, line('stats')]);
    expect(parser.idle).toBe(true);
  });
});

describe('CommandParser pause and resume', () => {
  it('delivers nothing while paused and everything, in order, after resume', () => {
    const { parser, events } = recorder();
    parser.write(bytes('stats\r\n'));
    parser.pause();
    expect(parser.paused).toBe(true);
    parser.write(bytes('list-tubes\r\nput 0 0 0 1\r\nx'));
    parser.write(bytes('\r\nquit\r\n'));
    expect(events).toEqual([line('stats')]);
    expect(parser.idle).toBe(false);
    expect(parser.buffered).toBe(34);
    parser.resume();
    expect(parser.paused).toBe(false);
    expect(events).toEqual([line('stats'), line('list-tubes'), line('put 0 0 0 1'), body('x\r\n'), line('quit')]);
    expect(parser.idle).toBe(true);
    expect(parser.buffered).toBe(0);
  });

  it('holds back a body that is half read when paused', () => {
    const { parser, events } = recorder();
    parser.write(bytes('put 0 0 0 3\r\nab'));
    parser.pause();
    parser.write(bytes('c\r\nstats\r\n'));
    expect(events).toEqual([line('put 0 0 0 3')]);
    // The two body bytes already sit in the body's own buffer; only the queued input counts.
    expect(parser.buffered).toBe(10);
    parser.resume();
    expect(events).toEqual([line('put 0 0 0 3'), body('abc\r\n'), line('stats')]);
  });

  it('stops after the callback that paused, and continues when a later callback resumes', () => {
    const events: string[] = [];
    const parser: CommandParser = new CommandParser({
      line: (l, start, end) => {
        const text = l.toString('latin1', start, end);
        events.push(text);
        if (text === 'pause') parser.pause();
      },
      overlong: () => events.push('overlong'),
      body: () => events.push('body'),
      skipped: () => events.push('skipped'),
    });
    parser.write(bytes('a\r\npause\r\nb\r\nc\r\n'));
    expect(events).toEqual(['a', 'pause']);
    expect(parser.paused).toBe(true);
    expect(parser.buffered).toBe(6);
    // Another source of callbacks (here: a second parser's line callback) resumes this one.
    const other = new CommandParser({
      line: () => parser.resume(),
      overlong: () => undefined,
      body: () => undefined,
      skipped: () => undefined,
    });
    other.write(bytes('go\r\n'));
    expect(events).toEqual(['a', 'pause', 'b', 'c']);
    expect(parser.idle).toBe(true);
  });

  it('continues in order when a callback pauses and later resumes from a nested write', () => {
    const events: string[] = [];
    const parser: CommandParser = new CommandParser({
      line: (l, start, end) => {
        const text = l.toString('latin1', start, end);
        events.push(text);
        if (text === 'pause') {
          parser.pause();
          // A re-entrant write queues behind what is already buffered.
          parser.write(bytes('late\r\n'));
          expect(events).toEqual(['pause']);
          parser.resume();
          expect(events).toEqual(['pause']);
        }
      },
      overlong: () => events.push('overlong'),
      body: () => events.push('body'),
      skipped: () => events.push('skipped'),
    });
    parser.write(bytes('pause\r\nb\r\n'));
    expect(events).toEqual(['pause', 'b', 'late']);
    expect(parser.idle).toBe(true);
  });

  it('keeps what it has not parsed of a transient chunk, wherever the chunk sits in its queue', () => {
    const events: string[] = [];
    const shared = Buffer.alloc(64);
    const transient = (text: string): void => {
      shared.write(text, 'latin1');
      parser.write(shared.subarray(0, text.length), true);
      shared.fill(0xee);
    };
    const parser: CommandParser = new CommandParser({
      line: (l, start, end) => {
        const text = l.toString('latin1', start, end);
        events.push(text);
        if (text.startsWith('put ')) parser.expectBody(4);
        if (text === 'pause') {
          parser.pause();
          // A callback's own write lands behind the rest of the chunk being parsed.
          parser.write(bytes('late\r\n'));
        }
      },
      overlong: () => events.push('overlong'),
      body: (b, start, end) => events.push(`body ${b.toString('latin1', start, end)}`),
      skipped: () => events.push('skipped'),
    });
    transient('a\r\npause\r\nput 0 0 0 2\r\nhi\r\nb\r\n');
    transient('c\r\n'); // queued behind the held rest while paused
    expect(events).toEqual(['a', 'pause']);
    parser.resume();
    expect(events).toEqual(['a', 'pause', 'put 0 0 0 2', 'body hi\r\n', 'b', 'late', 'c']);
    expect(parser.idle).toBe(true);
  });

  it('resume on a parser that is not paused is harmless', () => {
    const { parser, events } = recorder();
    parser.resume();
    parser.write(bytes('stats\r\n'));
    parser.resume();
    expect(events).toEqual([line('stats')]);
  });
});

describe('CommandParser buffered and idle', () => {
  it('starts idle with nothing buffered', () => {
    const { parser } = recorder();
    expect(parser.idle).toBe(true);
    expect(parser.buffered).toBe(0);
    expect(parser.paused).toBe(false);
  });

  it('counts a partial line', () => {
    const { parser, events } = recorder();
    parser.write(bytes('sta'));
    expect(parser.buffered).toBe(3);
    expect(parser.idle).toBe(false);
    parser.write(bytes('ts\r'));
    expect(parser.buffered).toBe(6);
    parser.write(bytes('\n'));
    expect(events).toEqual([line('stats')]);
    expect(parser.buffered).toBe(0);
    expect(parser.idle).toBe(true);
  });

  it('ignores empty chunks', () => {
    const { parser, events } = recorder();
    parser.write(Buffer.alloc(0));
    expect(parser.idle).toBe(true);
    parser.write(bytes('stats\r\n'));
    parser.write(Buffer.alloc(0));
    expect(events).toEqual([line('stats')]);
  });

  it('does not count a partial body as unparsed input, and is not idle until it is complete', () => {
    const { parser } = recorder();
    parser.write(bytes('put 0 0 0 10\r\n'));
    expect(parser.idle).toBe(false);
    expect(parser.buffered).toBe(0);
    parser.write(bytes('abcd'));
    expect(parser.buffered).toBe(0);
    expect(parser.idle).toBe(false);
    parser.write(bytes('efghij\r\n'));
    expect(parser.buffered).toBe(0);
    expect(parser.idle).toBe(true);
  });

  it('is not idle while discarding an overlong line, and drops what it discarded', () => {
    const { parser, events } = recorder();
    parser.write(bytes(a(300)));
    expect(parser.idle).toBe(false);
    expect(parser.buffered).toBe(300 - LINE_WINDOW);
    parser.write(bytes('\r\n'));
    expect(events).toEqual([OVERLONG]);
    expect(parser.idle).toBe(true);
  });

  it('is not idle while a line with a lone CR waits for the window to fill', () => {
    const { parser, events } = recorder();
    parser.write(bytes('a\rb\r\n'));
    expect(events).toEqual([]);
    expect(parser.idle).toBe(false);
    expect(parser.buffered).toBe(5);
  });
});
