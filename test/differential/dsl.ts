import type { Data, Step } from './types.js';

/** Default wait for a reply that is expected to come. */
export const REPLY_TIMEOUT_MS = 3000;
/** Default wait when a case checks that no reply comes (recorded as `<timeout>`). */
export const SILENCE_MS = 300;

/** Step builders for one named connection. */
export interface Conn {
  readonly name: string;
  open(): Step;
  /** Sends raw bytes and reads nothing. */
  send(data: Data): Step;
  /** Sends raw bytes and reads `replies` whole replies. */
  call(data: Data, replies?: number, timeoutMs?: number): Step;
  /** Sends `line + "\r\n"` and reads `replies` whole replies. */
  cmd(line: string, replies?: number, timeoutMs?: number): Step;
  read(n?: number, timeoutMs?: number): Step;
  /** A read that is expected to find nothing: `<timeout>` after `ms`. */
  silent(ms?: number): Step;
  bytes(n: number, timeoutMs?: number): Step;
  /** Streams `count` copies of the byte `ch` (for bodies too big to spell out). */
  fill(ch: string, count: number): Step;
  halfClose(): Step;
  close(): Step;
  closed(timeoutMs?: number): Step;
}

export function conn(name: string): Conn {
  return {
    name,
    open: () => ({ op: 'open', conn: name }),
    send: (data) => ({ op: 'send', conn: name, data, replies: 0 }),
    call: (data, replies = 1, timeoutMs) => ({ op: 'send', conn: name, data, replies, timeoutMs }),
    cmd: (line, replies = 1, timeoutMs) => ({ op: 'send', conn: name, data: `${line}\r\n`, replies, timeoutMs }),
    read: (n = 1, timeoutMs) => ({ op: 'read', conn: name, n, timeoutMs }),
    silent: (ms = SILENCE_MS) => ({ op: 'read', conn: name, n: 1, timeoutMs: ms }),
    bytes: (n, timeoutMs) => ({ op: 'bytes', conn: name, n, timeoutMs }),
    fill: (ch, count) => ({ op: 'fill', conn: name, byte: ch.charCodeAt(0), count }),
    halfClose: () => ({ op: 'half-close', conn: name }),
    close: () => ({ op: 'close', conn: name }),
    closed: (timeoutMs) => ({ op: 'expect-closed', conn: name, timeoutMs }),
  };
}

export const A = conn('a');
export const B = conn('b');
export const C = conn('c');
export const D = conn('d');
export const E = conn('e');

export function sleep(ms: number): Step {
  return { op: 'sleep', ms };
}

/** SIGUSR1 turns on drain mode on both servers. */
export function drain(settleMs = 150): Step {
  return { op: 'signal', signal: 'SIGUSR1', settleMs };
}

/** Restarts the server; `hard` kills it with SIGKILL (no cleanup) instead of SIGTERM. */
export function restart(hard = false): Step {
  return { op: 'restart', hard };
}

/**
 * A harmless command on the connection that holds an expired reservation. beanstalkd 1.12 often
 * loses the timer tick for an idle connection's TTR (it can fire a few microseconds before the
 * deadline, find nothing expired and never reschedule), so the expiry is then processed only
 * when that connection next does something. Cases that observe a TTR expiry send this first, so
 * the reference is deterministic; a server that expires jobs on time gives the same transcript.
 */
export function ttrNudge(c: Conn): Step {
  return c.cmd('list-tube-used');
}

export interface PutOptions {
  pri?: number | string;
  delay?: number | string;
  ttr?: number | string;
}

/** A whole put command with its body: `put <pri> <delay> <ttr> <len>\r\n<body>\r\n`. */
export function put(body: Data = 'x', { pri = 0, delay = 0, ttr = 10 }: PutOptions = {}): Data {
  const len = typeof body === 'string' ? Buffer.byteLength(body, 'latin1') : body.length;
  const head = `put ${pri} ${delay} ${ttr} ${len}\r\n`;
  if (typeof body === 'string') return `${head}${body}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body, Buffer.from('\r\n', 'latin1')]);
}

/** `n` copies of `ch`. */
export function rep(ch: string, n: number): string {
  return ch.repeat(n);
}
