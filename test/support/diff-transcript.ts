import type { Forecast } from './beanstalkd-framing.js';
import type { Conversation, Script, ScriptForecast } from './conversation-gen.js';
import { RawClient } from './raw-client.js';
import { ReadMeter } from './server-reads.js';
import { startServer, type RunningServer, type ServerKind } from './servers.js';

/**
 * Runs a script of conversations on a reference server and a target server in lock step and
 * compares what every connection received, byte for byte.
 *
 * Each step is sent on both servers at once; then the replies the framing model predicts are read
 * (a reply that does not come within `replyMs` is recorded as `<timeout>`, a connection the server
 * closed as `<closed>`), and then the runner waits until the server has read all the step's bytes
 * (server-reads.ts), so that a step that gets no reply cannot take effect after a later step on
 * another connection. At the end of the script every connection is left quiet for `replyMs` and
 * whatever arrived unasked is recorded too, so a reply one server sends and the other does not is
 * never lost.
 *
 * Every new connection first sends HELLO and waits for its reply, which proves the server has
 * accepted it: otherwise a `stats` on one connection could count another that the server has not
 * accepted yet, and bytes sent on a connection not yet accepted would wait in the kernel while
 * later steps on other connections are served.
 */

/**
 * The handshake on every new connection: `kick-job 0` always answers NOT_FOUND, and beanstalkd
 * 1.12 shows no counter for kick-job, so it changes nothing a later command can see.
 */
export const HELLO = 'kick-job 0\r\n';

export interface RunOptions {
  reference: ServerKind;
  target: ServerKind;
  /** How long to wait for one predicted reply, and the quiet period before the final drain. */
  replyMs: number;
}

/** What one connection received for one step (or in the final drain). */
export interface Entry {
  where: string;
  got: string[];
}

export interface Transcripts {
  reference: Entry[];
  target: Entry[];
  /** Steps after which [reference, target] had not read all bytes sent within `replyMs`. */
  lateReads: [number, number];
}

export interface Mismatch {
  /** Index of the first entry that differs. */
  index: number;
  where: string;
  expected: string[];
  actual: string[];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One server and the connections a script opened on it. */
class Side {
  private readonly conversations: RawClient[][] = [];
  private readonly reads: ReadMeter;
  /** Steps after which the server had not read everything in time. */
  lateReads = 0;

  constructor(readonly server: RunningServer) {
    this.reads = new ReadMeter(server.process.pid);
  }

  /** Opens a conversation's connections; returns each one's reply to HELLO. */
  async open(conns: number, replyMs: number): Promise<string[]> {
    const list: RawClient[] = [];
    for (let i = 0; i < conns; i++) list.push(await RawClient.connect(this.server.port));
    this.conversations.push(list);
    this.reads.expect(conns * HELLO.length);
    return Promise.all(list.map((c) => c.call(HELLO, replyMs).catch(() => (c.closed ? '<closed>' : '<timeout>'))));
  }

  async step(conv: number, conn: number, bytes: Buffer, forecast: Forecast, replyMs: number): Promise<string[]> {
    const client = this.conversations[conv]![conn]!;
    if (!client.socket.destroyed) client.send(bytes);
    if (!forecast.ignored) this.reads.expect(bytes.length);
    const got = await this.replies(client, forecast, replyMs);
    if (forecast.closes) this.reads.rebase();
    else if (!(await this.reads.settle(replyMs))) this.lateReads++;
    return got;
  }

  private async replies(client: RawClient, forecast: Forecast, replyMs: number): Promise<string[]> {
    const got: string[] = [];
    for (let i = 0; i < forecast.replies; i++) {
      try {
        got.push(await client.reply(replyMs));
      } catch {
        got.push(client.closed ? '<closed>' : '<timeout>');
        break;
      }
    }
    if (forecast.closes) {
      try {
        const rest = await client.waitClosed(replyMs);
        got.push(rest === '' ? '<closed>' : `<closed after unread ${rest}>`);
      } catch {
        got.push('<still open>');
      }
    }
    return got;
  }

  /** What every connection received that nobody read, and whether the server closed it. */
  drain(): Entry[] {
    const out: Entry[] = [];
    this.conversations.forEach((list, i) =>
      list.forEach((c, j) => {
        const unread = c.pending.toString('latin1');
        const got = [unread === '' ? '<nothing unread>' : `<unread ${unread}>`, c.closed ? '<closed>' : '<open>'];
        out.push({ where: `end of script: conversation ${i} connection ${j}`, got });
      }),
    );
    return out;
  }

  close(): void {
    for (const list of this.conversations) for (const c of list) c.destroy();
  }
}

/** Servers started by runScript and not stopped yet. */
const live = new Set<RunningServer>();
let shutDown = false;

/**
 * Stops every server runScript started and makes later runScript calls fail: for an afterAll
 * hook, so that a test that times out does not leave server processes behind.
 */
export async function stopAllServers(): Promise<void> {
  shutDown = true;
  await Promise.all([...live].map((s) => s.stop()));
  live.clear();
}

async function startPair(opts: RunOptions): Promise<RunningServer[]> {
  if (shutDown) throw new Error('the differential runner was shut down');
  const started = await Promise.allSettled([startServer(opts.reference), startServer(opts.target)]);
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  for (const s of servers) live.add(s);
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined || shutDown) {
    await stopPair(servers);
    throw failed?.reason instanceof Error ? failed.reason : new Error(String(failed?.reason ?? 'the differential runner was shut down'));
  }
  return servers;
}

async function stopPair(servers: RunningServer[]): Promise<void> {
  await Promise.all(servers.map((s) => s.stop()));
  for (const s of servers) live.delete(s);
}

/** Runs `script` on a fresh reference server and a fresh target server. */
export async function runScript(script: Script, forecast: ScriptForecast, opts: RunOptions): Promise<Transcripts> {
  const servers = await startPair(opts);
  const sides = servers.map((s) => new Side(s));
  const ref: Entry[] = [];
  const tgt: Entry[] = [];
  try {
    for (let i = 0; i < script.length; i++) {
      const conv = script[i]!;
      const [ha, hb] = await Promise.all(sides.map((s) => s.open(conv.conns, opts.replyMs)));
      const where = `conversation ${i} opens ${conv.conns} connection(s), each sends "${HELLO.trim()}"`;
      ref.push({ where, got: ha! });
      tgt.push({ where, got: hb! });
      for (let j = 0; j < conv.steps.length; j++) {
        const step = conv.steps[j]!;
        const f = forecast.forecasts[i]![j]!;
        const [a, b] = await Promise.all(sides.map((s) => s.step(i, step.conn, step.bytes, f, opts.replyMs)));
        const where = `conversation ${i} step ${j} connection ${step.conn}`;
        ref.push({ where, got: a! });
        tgt.push({ where, got: b! });
      }
    }
    await sleep(opts.replyMs);
    ref.push(...sides[0]!.drain());
    tgt.push(...sides[1]!.drain());
  } finally {
    for (const s of sides) s.close();
    await stopPair(servers);
  }
  return { reference: ref, target: tgt, lateReads: [sides[0]!.lateReads, sides[1]!.lateReads] };
}

// ---- normalisation ---------------------------------------------------------------------------

/** `stats` keys whose values are facts about the process, build or host. */
const MASKED_STATS_KEYS = ['pid', 'version', 'rusage-utime', 'rusage-stime', 'uptime', 'id', 'hostname', 'os', 'platform'];
/** Wall-clock second counts that may tick between the two servers' answers. */
const CLOCK_KEYS = ['age', 'time-left', 'pause-time-left'];

interface YamlReply {
  body: string;
}

/** The YAML of an `OK <n>` reply whose n matches its body, or null. */
function okBody(reply: string): YamlReply | null {
  const m = /^OK (\d+)\r\n/.exec(reply);
  if (m === null || !reply.endsWith('\r\n')) return null;
  const body = reply.slice(m[0].length, reply.length - 2);
  return Number(m[1]) === body.length ? { body } : null;
}

const okReply = (body: string): string => `OK ${body.length}\r\n${body}\r\n`;

function maskStats(body: string): string {
  if (!body.startsWith('---\ncurrent-jobs-urgent: ')) return body;
  let out = body;
  for (const key of MASKED_STATS_KEYS) out = out.replace(new RegExp(`\\n${key}: [^\\n]*\\n`), `\n${key}: <masked>\n`);
  return out;
}

function clockValue(body: string, key: string): { at: number; text: string } | null {
  const m = new RegExp(`\\n${key}: (-?\\d+)\\n`).exec(body);
  if (m === null) return null;
  return { at: m.index + key.length + 3, text: m[1]! };
}

/**
 * Masks process facts in `stats` on both sides, then lets a stats-job `age`/`time-left` or a
 * stats-tube `pause-time-left` of the target take the reference's value when they differ by
 * one second at most (the two servers read the clock a moment apart).
 */
export function normalizePair(expected: string, actual: string): [string, string] {
  const a = okBody(expected);
  const b = okBody(actual);
  if (a === null || b === null) return [a === null ? expected : okReply(maskStats(a.body)), b === null ? actual : okReply(maskStats(b.body))];
  const ea = maskStats(a.body);
  let eb = maskStats(b.body);
  if ((ea.startsWith('---\nid: ') && eb.startsWith('---\nid: ')) || (ea.startsWith('---\nname: ') && eb.startsWith('---\nname: '))) {
    for (const key of CLOCK_KEYS) {
      const va = clockValue(ea, key);
      const vb = clockValue(eb, key);
      if (va === null || vb === null || va.text === vb.text) continue;
      if (Math.abs(Number(va.text) - Number(vb.text)) <= 1) eb = eb.slice(0, vb.at) + va.text + eb.slice(vb.at + vb.text.length);
    }
  }
  return [okReply(ea), okReply(eb)];
}

/** The first entry where the transcripts differ after normalisation, or null. */
export function compareTranscripts(t: Transcripts): Mismatch | null {
  const n = Math.max(t.reference.length, t.target.length);
  for (let i = 0; i < n; i++) {
    const e = t.reference[i];
    const a = t.target[i];
    if (e === undefined || a === undefined) return { index: i, where: (e ?? a)!.where, expected: e?.got ?? [], actual: a?.got ?? [] };
    const len = Math.max(e.got.length, a.got.length);
    for (let k = 0; k < len; k++) {
      const x = e.got[k];
      const y = a.got[k];
      if (x === undefined || y === undefined) return { index: i, where: e.where, expected: e.got, actual: a.got };
      const [nx, ny] = normalizePair(x, y);
      if (nx !== ny) return { index: i, where: e.where, expected: e.got, actual: a.got };
    }
  }
  return null;
}

// ---- rendering -------------------------------------------------------------------------------

/** Bytes as a JS-style string literal body: printable ASCII as is, the rest escaped. */
export function escapeBytes(s: string | Buffer): string {
  const str = typeof s === 'string' ? s : s.toString('latin1');
  let out = '';
  let i = 0;
  while (i < str.length) {
    // collapse long runs of one character
    let j = i;
    while (j < str.length && str[j] === str[i]) j++;
    const ch = escapeChar(str.charCodeAt(i));
    if (j - i >= 12) {
      out += `{${ch} x${j - i}}`;
      i = j;
      continue;
    }
    out += ch;
    i++;
  }
  return out;
}

function escapeChar(c: number): string {
  if (c === 13) return '\\r';
  if (c === 10) return '\\n';
  if (c === 9) return '\\t';
  if (c === 0) return '\\0';
  if (c === 92) return '\\\\';
  if (c === 123 || c === 125) return `\\x${c.toString(16)}`; // braces mark runs
  if (c >= 32 && c < 127) return String.fromCharCode(c);
  return `\\x${c.toString(16).padStart(2, '0')}`;
}

/** A script as a readable list of steps, with both servers' replies to each. */
export function renderRun(script: Script, t: Transcripts, labels: [string, string]): string {
  const lines: string[] = [];
  let k = 0;
  script.forEach((conv: Conversation, i) => {
    const hello = [t.reference[k], t.target[k]];
    k++;
    const helloSame = sameGot(hello[0]?.got, hello[1]?.got);
    lines.push(`conversation ${i} opens ${conv.conns} connection(s); each sends "${escapeBytes(HELLO)}" first`);
    if (!helloSame) {
      lines.push(`    ${labels[0].padEnd(10)} ${formatGot(hello[0]?.got)}`);
      lines.push(`    ${labels[1].padEnd(10)} ${formatGot(hello[1]?.got)}`);
    }
    for (const step of conv.steps) {
      const e = t.reference[k];
      const a = t.target[k];
      k++;
      lines.push(`  conn ${step.conn} sends "${escapeBytes(step.bytes)}"`);
      const same = sameGot(e?.got, a?.got);
      lines.push(`    ${labels[0].padEnd(10)} ${formatGot(e?.got)}`);
      lines.push(same ? `    ${labels[1]}: same` : `    ${labels[1].padEnd(10)} ${formatGot(a?.got)}`);
    }
  });
  for (; k < Math.max(t.reference.length, t.target.length); k++) {
    const e = t.reference[k];
    const a = t.target[k];
    lines.push(`${(e ?? a)!.where}`);
    lines.push(`    ${labels[0].padEnd(10)} ${formatGot(e?.got)}`);
    lines.push(`    ${labels[1].padEnd(10)} ${formatGot(a?.got)}`);
  }
  return lines.join('\n');
}

/** True if two lists of replies are equal after normalisation. */
function sameGot(e: string[] | undefined, a: string[] | undefined): boolean {
  if (e === undefined || a === undefined || e.length !== a.length) return false;
  return e.every((x, i) => {
    const [nx, ny] = normalizePair(x, a[i]!);
    return nx === ny;
  });
}

function formatGot(got: string[] | undefined): string {
  if (got === undefined) return '<missing>';
  if (got.length === 0) return '(no reply expected)';
  return got.map((g) => (g.startsWith('<') ? escapeBytes(g) : `"${escapeBytes(g)}"`)).join(' + ');
}

/** The script as JSON (bytes in base64), to replay it exactly. */
export function scriptJson(script: Script): string {
  return JSON.stringify(script.map((c) => ({ conns: c.conns, steps: c.steps.map((s) => ({ conn: s.conn, base64: s.bytes.toString('base64') })) })));
}
