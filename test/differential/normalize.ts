import type { TranscriptEntry } from './types.js';

/**
 * Keys of the global `stats` body whose values legitimately differ between two servers
 * (process, build and host facts). Nothing else is normalised.
 */
export const STATS_VOLATILE_KEYS: readonly string[] = [
  'pid',
  'version',
  'rusage-utime',
  'rusage-stime',
  'uptime',
  'id',
  'hostname',
  'os',
  'platform',
];

/**
 * Only when a side runs with `-b`: the binlog facts that depend on `-b` and on the on-disk
 * format (stats binlog indexes and counters, stats-job `file`).
 */
export const STATS_BINLOG_KEYS: readonly string[] = [
  'binlog-oldest-index',
  'binlog-current-index',
  'binlog-records-migrated',
  'binlog-records-written',
];
export const STATS_JOB_BINLOG_KEYS: readonly string[] = ['file'];

export interface NormalizeOptions {
  /** Also blank the binlog fields (set when either side runs with `-b`). */
  binlog: boolean;
}

const MASK = '*';

function maskKeys(yaml: string, keys: ReadonlySet<string>): string {
  return yaml
    .split('\n')
    .map((line) => {
      const colon = line.indexOf(': ');
      if (colon < 0) return line;
      return keys.has(line.slice(0, colon)) ? `${line.slice(0, colon)}: ${MASK}` : line;
    })
    .join('\n');
}

/**
 * Normalises one whole reply. Only `OK <n>` replies whose YAML is a `stats` body (it starts with
 * `---\ncurrent-jobs-urgent:`) are touched, plus, in binlog mode, `stats-job` bodies (they
 * start with `---\nid:`). If masking changes the body length, the `OK <n>` count is shifted by
 * the same amount, so a wrong count stays wrong.
 */
export function normalizeReply(reply: Buffer, opts: NormalizeOptions): Buffer {
  const eol = reply.indexOf('\r\n');
  if (eol < 0) return reply;
  const head = reply.toString('latin1', 0, eol);
  const m = /^OK (\d+)$/.exec(head);
  if (m === null) return reply;
  // The body is everything between the header line and the final CRLF of the reply.
  const bodyEnd = reply.length >= eol + 4 ? reply.length - 2 : reply.length;
  const body = reply.toString('latin1', eol + 2, bodyEnd);
  const tail = reply.subarray(bodyEnd);
  let keys: Set<string> | null = null;
  if (body.startsWith('---\ncurrent-jobs-urgent:')) {
    keys = new Set(STATS_VOLATILE_KEYS);
    if (opts.binlog) for (const k of STATS_BINLOG_KEYS) keys.add(k);
  } else if (opts.binlog && body.startsWith('---\nid:')) {
    keys = new Set(STATS_JOB_BINLOG_KEYS);
  }
  if (keys === null) return reply;
  const masked = maskKeys(body, keys);
  const delta = Buffer.byteLength(masked, 'latin1') - Buffer.byteLength(body, 'latin1');
  const newHead = `OK ${BigInt(m[1]!) + BigInt(delta)}\r\n`;
  return Buffer.concat([Buffer.from(newHead, 'latin1'), Buffer.from(masked, 'latin1'), tail]);
}

export function normalizeTranscript(t: readonly TranscriptEntry[], opts: NormalizeOptions): TranscriptEntry[] {
  return t.map((e) => (e.kind === 'reply' ? { ...e, data: normalizeReply(e.data, opts) } : e));
}

function escapeByte(byte: number): string {
  if (byte === 0x5c) return '\\\\';
  if (byte === 0x0d) return '\\r';
  if (byte === 0x0a) return '\\n';
  if (byte === 0x09) return '\\t';
  if (byte === 0x00) return '\\0';
  if (byte >= 0x20 && byte < 0x7f) return String.fromCharCode(byte);
  return `\\x${byte.toString(16).padStart(2, '0')}`;
}

/** Runs at least this long are shown as `\{a*300}`. */
const RUN_MIN = 16;

/**
 * Shows bytes unambiguously: printable ASCII as is; `\\`, `\r`, `\n`, `\t`, `\0` escaped; any
 * other byte as `\xNN`; a run of 16 or more equal bytes as `\{<byte>*<count>}`. The mapping is
 * injective (a backslash is always escaped), so comparing renderings compares the bytes.
 */
export function escapeBytes(b: Buffer): string {
  let s = '';
  for (let i = 0; i < b.length; ) {
    const byte = b[i]!;
    let j = i + 1;
    while (j < b.length && b[j] === byte) j++;
    if (j - i >= RUN_MIN) {
      s += `\\{${escapeByte(byte)}*${j - i}}`;
    } else {
      for (let k = i; k < j; k++) s += escapeByte(byte);
    }
    i = j;
  }
  return s;
}

function renderData(b: Buffer): string {
  return `"${escapeBytes(b)}"`;
}

/** One line per entry, e.g. `a: "INSERTED 1\r\n"`, `b: <timeout>`. */
export function renderEntry(e: TranscriptEntry): string {
  switch (e.kind) {
    case 'reply':
      return `${e.conn}: ${renderData(e.data)}`;
    case 'bytes':
      return `${e.conn}: bytes ${renderData(e.data)}`;
    case 'timeout':
      return e.partial.length === 0 ? `${e.conn}: <timeout>` : `${e.conn}: <timeout> after partial ${renderData(e.partial)}`;
    case 'closed':
      return e.partial.length === 0 ? `${e.conn}: <closed>` : `${e.conn}: <closed> after ${renderData(e.partial)}`;
    case 'still-open':
      return e.partial.length === 0 ? `${e.conn}: <still open>` : `${e.conn}: <still open> after ${renderData(e.partial)}`;
    case 'error':
      return `${e.conn}: <error> ${e.message}`;
    case 'connect-failed':
      return `${e.conn}: <connect failed>`;
    case 'leftover':
      return `${e.conn}: <unread at end> ${renderData(e.data)}`;
  }
}

export function renderTranscript(t: readonly TranscriptEntry[]): string[] {
  return t.map(renderEntry);
}
