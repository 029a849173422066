/** What the server pushes: config, stats, the tube list and the throughput history. */

import { forgetTube, observeTube } from './tube-rates.js';
import { roleAllows, type Role } from '../../../shared/roles.js';
import type {
  AdminConfigDto,
  SignedInDto,
  ServerStatsDto,
  SnapshotDto,
  StatsTickDto,
  TubeDto,
} from '../../../shared/dto.js';
import type { LinkStatus } from '../socket.js';

/** The chart keeps this much history (the server sends up to 15 minutes in the snapshot). */
export const HISTORY_SECONDS = 15 * 60;

export const THROUGHPUT_SERIES = ['put', 'reserve', 'delete', 'timeouts'] as const;
export type ThroughputSeries = (typeof THROUGHPUT_SERIES)[number];

/**
 * Per-second rates for the chart, as plain arrays (uPlot's data layout, times in epoch seconds).
 * Not deeply reactive: `version` changes on every change, and the chart redraws from the arrays.
 */
export class Throughput {
  version = $state(0);
  times: number[] = [];
  readonly values: Record<ThroughputSeries, number[]> = { put: [], reserve: [], delete: [], timeouts: [] };

  reset(ticks: readonly StatsTickDto[]): void {
    this.times = [];
    for (const series of THROUGHPUT_SERIES) this.values[series] = [];
    for (const tick of ticks) this.append(tick);
    this.trim();
    this.version++;
  }

  push(tick: StatsTickDto): void {
    const last = this.times[this.times.length - 1];
    if (last !== undefined && tick.at / 1000 <= last) return; // duplicate after a snapshot
    this.append(tick);
    this.trim();
    this.version++;
  }

  private append(tick: StatsTickDto): void {
    this.times.push(tick.at / 1000);
    for (const series of THROUGHPUT_SERIES) this.values[series].push(tick.rates[series]);
  }

  private trim(): void {
    const last = this.times[this.times.length - 1];
    if (last === undefined) return;
    let drop = 0;
    while (drop < this.times.length && (this.times[drop] ?? 0) < last - HISTORY_SECONDS) drop++;
    if (drop === 0) return;
    this.times.splice(0, drop);
    for (const series of THROUGHPUT_SERIES) this.values[series].splice(0, drop);
  }
}

export class ServerState {
  config = $state.raw<AdminConfigDto | null>(null);
  stats = $state.raw<ServerStatsDto | null>(null);
  /** Every tube by name; replaced as a whole on each change (10,000 entries copy in well under a ms). */
  tubes = $state.raw<ReadonlyMap<string, TubeDto>>(new Map());
  /** When each tube's DTO arrived (epoch ms), to count pause time down between updates. */
  tubesReceivedAt = $state.raw<ReadonlyMap<string, number>>(new Map());
  /** A snapshot has arrived since the page loaded. */
  ready = $state(false);
  link = $state<LinkStatus>('connecting');
  linkDetail = $state('');
  drainingAnnounced = $state(false);
  readonly throughput = new Throughput();

  /** Who is signed in and what they may do here (GET /api/me); null until known. */
  me = $state.raw<SignedInDto | null>(null);

  /**
   * True when the signed-in user may do what `role` may. Until the server has said who that is,
   * controls that change anything stay hidden; the server refuses them anyway.
   */
  may(role: Role): boolean {
    return this.me !== null && roleAllows(this.me.role, role);
  }

  get draining(): boolean {
    return this.drainingAnnounced || this.stats?.draining === true;
  }

  applyConfig(config: AdminConfigDto): void {
    this.config = config;
  }

  applySnapshot(snapshot: SnapshotDto): void {
    const now = Date.now();
    this.config = snapshot.config;
    this.stats = snapshot.stats;
    this.tubes = new Map(snapshot.tubes.map((tube) => [tube.name, tube]));
    for (const tube of snapshot.tubes) observeTube(tube, now);
    this.tubesReceivedAt = new Map(snapshot.tubes.map((tube) => [tube.name, now]));
    this.throughput.reset(snapshot.history);
    this.drainingAnnounced = snapshot.stats.draining === true;
    this.ready = true;
  }

  applyTick(tick: StatsTickDto): void {
    this.stats = tick.stats;
    this.throughput.push(tick);
  }

  applyTubes(changed: readonly TubeDto[]): void {
    if (changed.length === 0) return;
    const now = Date.now();
    const tubes = new Map(this.tubes);
    const receivedAt = new Map(this.tubesReceivedAt);
    for (const tube of changed) {
      tubes.set(tube.name, tube);
      receivedAt.set(tube.name, now);
      observeTube(tube, now);
    }
    this.tubes = tubes;
    this.tubesReceivedAt = receivedAt;
  }

  /** One tube fetched by REST (a tube page opened before the snapshot, or a tube not yet listed). */
  applyTube(tube: TubeDto): void {
    this.applyTubes([tube]);
  }

  removeTubes(names: readonly string[]): void {
    if (names.length === 0) return;
    const tubes = new Map(this.tubes);
    const receivedAt = new Map(this.tubesReceivedAt);
    for (const name of names) {
      tubes.delete(name);
      receivedAt.delete(name);
      forgetTube(name);
    }
    this.tubes = tubes;
    this.tubesReceivedAt = receivedAt;
  }

  setLink(status: LinkStatus, detail: string): void {
    this.link = status;
    this.linkDetail = detail;
  }
}

export const server = new ServerState();
