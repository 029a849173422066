/**
 * What an engine's jobs keep their times relative to (Job), so that those times are 31-bit
 * integers V8 stores inline rather than 16-byte boxed numbers (an epoch time in milliseconds
 * needs 41 bits and has a fraction).
 *
 * Deadlines are kept to the millisecond from the current base, within 12 days either way (a
 * deadline further out is kept apart, reached through the job's counters object). The base moves forward every
 * SWITCH_AFTER_MS (Engine.keepTimesSmall, which re-encodes the deadlines of the delayed and
 * reserved jobs). A creation time never changes, so it stays relative to the base of its era:
 * the span of job ids made between two moves (createdBase); within MS_SPAN (6 days) of that base
 * it is kept to the millisecond, beyond it to the second, 17 years either way (encodeCreated). So
 * a job is exact to the millisecond while that matters (age in whole seconds right after a put,
 * TTRs, delays), and an old job's creation time needs no box or object of its own.
 */
export class TimeBase {
  /** The base of new times: whole epoch seconds, in ms. */
  ms: number;
  /** The first job id of each era, ascending, and the era's base (same index). */
  private readonly eraIds: number[] = [0];
  private readonly eraBases: number[];

  constructor(now: number) {
    this.ms = wholeSeconds(now);
    this.eraBases = [this.ms];
  }

  /** The base a creation time of job `id` is relative to. */
  createdBase(id: number): number {
    const ids = this.eraIds;
    let hi = ids.length - 1;
    if (id >= ids[hi]!) return this.eraBases[hi]!;
    let lo = 0; // ids[0] is 0: every id is in some era
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ids[mid]! <= id) lo = mid;
      else hi = mid - 1;
    }
    return this.eraBases[lo]!;
  }

  /** Starts a new era at `now` for jobs from id `firstId` on; returns the previous base. */
  advance(now: number, firstId: number): number {
    const from = this.ms;
    this.ms = wholeSeconds(now);
    this.eraIds.push(firstId);
    this.eraBases.push(this.ms);
    return from;
  }
}

/** How long the base stays: half of MS_SPAN, so that a job whose id was taken just before a move still has room. */
export const SWITCH_AFTER_MS = 2 ** 28;

/** Times within this many ms of their base are kept to the millisecond. */
const MS_SPAN = 2 ** 29;
/** Encoded times are within [-LIMIT, LIMIT): 31-bit integers. */
const LIMIT = 2 ** 30;
/** An encoded time that does not fit (over 17 years from the base): the caller keeps it elsewhere. */
export const FAR = -LIMIT;

/** Bases are whole seconds: whole numbers of milliseconds, like every time a job keeps. */
function wholeSeconds(t: number): number {
  return Math.floor(t / 1000) * 1000;
}

/**
 * A creation time `t` (epoch ms) relative to `base` as a 31-bit integer, or FAR. Beyond MS_SPAN
 * it is kept to the second, rounded towards the past (an old job's age is never understated).
 */
export function encodeCreated(t: number, base: number): number {
  const ms = Math.floor(t) - base;
  if (ms >= -MS_SPAN && ms < MS_SPAN) return ms | 0;
  if (ms >= MS_SPAN) {
    const v = MS_SPAN + Math.floor((ms - MS_SPAN) / 1000);
    return v < LIMIT ? v | 0 : FAR;
  }
  const v = -MS_SPAN - Math.ceil((-MS_SPAN - ms) / 1000);
  return v > FAR ? v | 0 : FAR;
}

/** The epoch ms that `v` (from encodeCreated, not FAR) stands for. */
export function decodeCreated(v: number, base: number): number {
  if (v >= -MS_SPAN && v < MS_SPAN) return base + v;
  if (v >= MS_SPAN) return base + MS_SPAN + (v - MS_SPAN) * 1000;
  return base - MS_SPAN - (-MS_SPAN - v) * 1000;
}
