import type { TubeHealthDto, TubeMinuteDto } from '../../shared/dto.js';
import type { Operations, TubeAges } from '../operations/operations.js';
import { readyAges } from '../operations/ready-ages.js';

/**
 * What the overview's attention list needs beyond a tube's counts, found by walking every job:
 * the oldest ready job of each tube (the queue head is the most urgent, not the oldest), and the
 * reserved jobs close to their TTR (workers about to lose them), by operations/ready-ages.ts. One
 * walk runs at a time, and its answer serves every request for HEALTH_MAX_AGE_MS.
 */

export const HEALTH_MAX_AGE_MS = 2000;
/** A reservation with less than this share of its TTR left is "close to its TTR". */
const NEAR_TTR_SHARE = 0.2;
/** Ready jobs gained over the last minutes before the backlog counts as rising. */
export const RISE_MIN_JOBS = 100;
const RISE_MINUTES = 5;

type Tally = TubeAges;

export class TubeHealth {
  private last: { at: number; tubes: Map<string, Tally> } | null = null;
  private walking: Promise<Map<string, Tally>> | null = null;

  constructor(
    private readonly ops: Operations,
    /** A tube's last `minutes` minute samples, oldest first. */
    private readonly minutesOf: (tube: string, minutes: number) => TubeMinuteDto[],
  ) {}

  /** Every tube with something to say, as of a walk at most HEALTH_MAX_AGE_MS old. */
  async report(): Promise<TubeHealthDto[]> {
    const now = this.ops.now();
    let tallies: Map<string, Tally>;
    if (this.last !== null && now - this.last.at < HEALTH_MAX_AGE_MS) tallies = this.last.tubes;
    else {
      this.walking ??= this.walk().finally(() => (this.walking = null));
      tallies = await this.walking;
    }
    const at = this.ops.now();
    const out: TubeHealthDto[] = [];
    for (const tube of await this.ops.tubes()) {
      const tally = tallies.get(tube.name);
      const rise = backlogRise(tube.ready, this.minutesOf(tube.name, RISE_MINUTES + 1), at);
      if (tally === undefined && rise === 0) continue;
      out.push({
        tube: tube.name,
        oldestReadyAgeSeconds:
          tally === undefined || tally.oldestReadyCreatedAt === Infinity ? 0 : Math.max(0, Math.floor((at - tally.oldestReadyCreatedAt) / 1000)),
        reservedNearTtr: tally?.nearTtr ?? 0,
        backlogRise: rise,
      });
    }
    return out;
  }

  private async walk(): Promise<Map<string, Tally>> {
    const startedAt = this.ops.now();
    const tubes = await readyAges(this.ops, NEAR_TTR_SHARE);
    this.last = { at: startedAt, tubes };
    return tubes;
  }
}

/**
 * Ready jobs gained over the last RISE_MINUTES minutes, when the backlog grew in each of them
 * (more in than out) by RISE_MIN_JOBS at least; 0 otherwise.
 */
export function backlogRise(readyNow: number, minutes: readonly TubeMinuteDto[], now: number): number {
  const recent = minutes.filter((m) => now - m.at <= (RISE_MINUTES + 1) * 60_000);
  if (recent.length < 3) return 0;
  if (!recent.every((m) => m.in > m.out)) return 0;
  const gained = readyNow - recent[0]!.ready;
  return gained >= RISE_MIN_JOBS && readyNow > recent[recent.length - 1]!.ready ? gained : 0;
}
