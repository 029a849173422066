/**
 * How the Gearman door stores a job in the engine: the body is `unique NUL data`, exactly the
 * tail of a SUBMIT_JOB packet after the function name. So a submit's body is a view of the
 * packet (no copy), JOB_ASSIGN_UNIQ sends the body as it is, and the unique id is kept with the
 * job wherever the body goes (the binlog, a restart), with no field of its own in the engine.
 */

/** The body for a job with this unique id and data (SUBMIT_JOB_EPOCH and _SCHED, whose packets put the time between them). */
export function jobBody(unique: Buffer, data: Buffer): Buffer {
  return Buffer.concat([unique, NUL, data]);
}

/** Where the unique id ends (the NUL) within body[start, end); `end` when there is none. */
export function uniqueEnd(buf: Buffer, start: number, end: number): number {
  const nul = buf.indexOf(0, start);
  return nul < 0 || nul >= end ? end : nul;
}

/** A stored body's data, without the unique id in front. */
export function dataOf(body: Buffer): Buffer {
  const end = uniqueEnd(body, 0, body.length);
  return end === body.length ? body.subarray(end) : body.subarray(end + 1);
}

const NUL = Buffer.from([0]);
