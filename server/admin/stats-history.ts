import type { RatesDto, StatsTickDto } from '../../shared/dto.js';
import type { Operations, ServerCounts } from '../operations/operations.js';
import type { ServerInfo } from '../server-info.js';
import { statsDto } from './dto.js';

/** The counters the charts turn into rates: every reserve command together, every kick, timeouts. */
export function operationTotals(s: ServerCounts): RatesDto {
  const c = s.operations;
  return {
    put: c.put,
    reserve: c.reserve + c['reserve-with-timeout'] + c['reserve-job'],
    delete: c.delete,
    release: c.release,
    bury: c.bury,
    kick: c.kick + c['kick-job'],
    timeouts: s.jobTimeouts,
  };
}

/** 15 minutes of one-second samples. */
const KEEP = 15 * 60;

/**
 * Samples the stats once a second, whether or not a dashboard is open, so a chart opened now
 * shows the last 15 minutes. Rates are per second over the last interval.
 */
export class StatsHistory {
  /** Told of each sample the timer takes (the live updates pass it on to open dashboards). */
  onSample: ((tick: StatsTickDto) => void) | null = null;
  private readonly ticks: StatsTickDto[] = [];
  private last: { at: number; counts: RatesDto } | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ops: Operations,
    private readonly info: ServerInfo,
  ) {}

  /** Samples once a second until `stop`; the timer does not keep the process alive. */
  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.sample().then(
        (tick) => this.onSample?.(tick),
        () => undefined, // a store that cannot answer skips a sample
      );
    }, 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** Takes a sample now and returns it. */
  async sample(): Promise<StatsTickDto> {
    return this.record(await this.ops.serverCounts());
  }

  private record(s: ServerCounts): StatsTickDto {
    const at = this.ops.now();
    const counts = operationTotals(s);
    const rates = { put: 0, reserve: 0, delete: 0, release: 0, bury: 0, kick: 0, timeouts: 0 };
    if (this.last !== null && at > this.last.at) {
      const dt = (at - this.last.at) / 1000;
      for (const key of Object.keys(rates) as (keyof RatesDto)[]) {
        rates[key] = Math.max(0, Math.round((counts[key] - this.last.counts[key]) / dt));
      }
    }
    this.last = { at, counts };
    const tick: StatsTickDto = { at, stats: statsDto(s, this.info, at), rates };
    this.ticks.push(tick);
    if (this.ticks.length > KEEP) this.ticks.shift();
    return tick;
  }

  history(): StatsTickDto[] {
    return this.ticks.slice();
  }
}
