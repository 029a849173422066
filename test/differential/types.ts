/**
 * The data model of the differential suite: a case is a name, the server flags and a list of
 * steps on named connections. Running a case yields a transcript; the transcripts of
 * beanstalkd and Beanpole are compared byte for byte (after `normalize.ts`).
 */

/** Bytes to send: a string is sent as latin1 (one byte per char, so `\0` and `\xff` work). */
export type Data = string | Buffer;

export type Step =
  /** Connects `conn` now (connections otherwise open on first use). */
  | { op: 'open'; conn: string }
  /** Sends `data` in one write, then reads `replies` whole replies (0: read nothing). */
  | { op: 'send'; conn: string; data: Data; replies: number; timeoutMs?: number }
  /** Reads `n` whole replies (a line, plus the body for RESERVED/FOUND/OK). */
  | { op: 'read'; conn: string; n: number; timeoutMs?: number }
  /** Reads exactly `n` bytes, whatever they are. */
  | { op: 'bytes'; conn: string; n: number; timeoutMs?: number }
  /** Waits; keep these rare and short. */
  | { op: 'sleep'; ms: number }
  /** Shuts down the client's write side; the server sees end of input. */
  | { op: 'half-close'; conn: string }
  /** Closes the connection from the client side. */
  | { op: 'close'; conn: string }
  /** Waits until the server closes the connection (records `<closed>` or `<still open>`). */
  | { op: 'expect-closed'; conn: string; timeoutMs?: number }
  /** Streams `count` copies of `byte` (for huge bodies), honouring backpressure; reads nothing. */
  | { op: 'fill'; conn: string; byte: number; count: number }
  /** Sends a signal to the server process, then waits `settleMs` for it to take effect. */
  | { op: 'signal'; signal: NodeJS.Signals; settleMs: number }
  /**
   * Stops the server (SIGTERM, or SIGKILL when `hard`) and starts it again with the same flags
   * (and the same UNIX socket path or binlog directory). Every connection is dropped; names
   * can be reused.
   */
  | { op: 'restart'; hard: boolean };

export interface Case {
  /** Unique; shown as the test name. */
  name: string;
  /** Extra beanstalkd-style flags for both servers, e.g. ['-z', '10']. */
  args?: string[];
  steps: Step[];
  /** Listen on a UNIX socket (`-l unix:PATH`) instead of TCP. */
  unix?: boolean;
  /**
   * Sanity anchors checked against beanstalkd's transcript only: each string must occur in it.
   * They guard the case itself (that it really reaches the quirk it is named after), not Beanpole.
   */
  refIncludes?: string[];
}

/** One thing a connection received, in step order. */
export type TranscriptEntry =
  | { conn: string; kind: 'reply'; data: Buffer }
  | { conn: string; kind: 'bytes'; data: Buffer }
  /** Nothing (or only `partial`, not a whole reply) arrived in time. */
  | { conn: string; kind: 'timeout'; partial: Buffer }
  /** The server closed the connection; `partial` is what arrived before that and was not read. */
  | { conn: string; kind: 'closed'; partial: Buffer }
  | { conn: string; kind: 'still-open'; partial: Buffer }
  /** The harness could not go on (e.g. the server did not come back after a restart). */
  | { conn: string; kind: 'error'; message: string }
  /** Connecting to the server failed. */
  | { conn: string; kind: 'connect-failed' }
  /** Bytes that arrived after the last step and were never read. */
  | { conn: string; kind: 'leftover'; data: Buffer };
