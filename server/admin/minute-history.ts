import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { MinuteSampleDto, RatesDto, TubeMinuteDto } from '../../shared/dto.js';
import type { Operations } from '../operations/operations.js';
import { operationTotals } from './stats-history.js';

/** Minutes kept for the whole server (7 days) and for each tube (24 hours). */
export const SERVER_MINUTES = 7 * 24 * 60;
export const TUBE_MINUTES = 24 * 60;
/** Tubes sampled each minute: the busiest, so 10,000 idle tubes cost nothing. */
const TUBES_PER_MINUTE = 200;

interface Counters extends RatesDto {
  tubes: Map<string, { totalJobs: number; deletes: number }>;
}

/**
 * The dashboard's long charts: one sample a minute of the server's rates and counts (7 days) and
 * of each busy tube's counts and in / out rates (24 hours). With -b they are appended to
 * `DIR/stats-history/*.jsonl` and read back at start, so a restart keeps them; a file is
 * rewritten without its expired lines once it holds twice what is kept, so the space stays
 * bounded (a few MB). Writing is best effort: a full disk loses history, never jobs.
 */
export class MinuteHistory {
  private readonly server: MinuteSampleDto[] = [];
  private readonly tubes = new Map<string, TubeMinuteDto[]>();
  private last: { at: number; counters: Counters } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private serverLines = 0;
  private tubeLines = 0;

  constructor(
    private readonly ops: Operations,
    private readonly dir: string | null,
    private readonly log: Logger,
  ) {
    if (dir !== null) this.restore();
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.sample(this.ops.now()).catch(() => undefined); // a store that cannot answer skips a minute
    }, 60_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** The server's samples of the last `minutes`, oldest first. */
  serverHistory(minutes = SERVER_MINUTES): MinuteSampleDto[] {
    return this.server.slice(-minutes);
  }

  /** A tube's samples, oldest first: all of them, or the last `minutes`. */
  tubeHistory(name: string, minutes = TUBE_MINUTES): TubeMinuteDto[] {
    return this.tubes.get(name)?.slice(-minutes) ?? [];
  }

  /** Takes a minute's sample at `now` (the timer calls it; tests call it with their own times). */
  async sample(now: number): Promise<void> {
    const [s, tubes] = await Promise.all([this.ops.serverCounts(), this.ops.tubes()]);
    const counters: Counters = {
      ...operationTotals(s),
      tubes: new Map(tubes.map((t) => [t.name, { totalJobs: t.totalJobs, deletes: t.deletes }])),
    };
    const prev = this.last;
    this.last = { at: now, counters };
    if (prev === null || now <= prev.at) return;
    const perSecond = (a: number, b: number): number => Math.max(0, Math.round(((a - b) * 1000) / (now - prev.at)));
    const sample: MinuteSampleDto = {
      at: now,
      put: perSecond(counters.put, prev.counters.put),
      reserve: perSecond(counters.reserve, prev.counters.reserve),
      delete: perSecond(counters.delete, prev.counters.delete),
      bury: perSecond(counters.bury, prev.counters.bury),
      timeouts: perSecond(counters.timeouts, prev.counters.timeouts),
      ready: s.ready,
      reserved: s.reserved,
      delayed: s.delayed,
      buried: s.buried,
    };
    this.push(this.server, sample, SERVER_MINUTES);
    const busy = tubes
      .map((t) => {
        const before = prev.counters.tubes.get(t.name);
        // A tube made during the minute counts from zero (a tube's counters start with it).
        const inPerMin = Math.max(0, t.totalJobs - (before?.totalJobs ?? 0));
        const outPerMin = Math.max(0, t.deletes - (before?.deletes ?? 0));
        return { name: t.name, row: { at: now, ready: t.ready, buried: t.buried, in: inPerMin, out: outPerMin } };
      })
      // Tubes with jobs or traffic, and those already charted (their lines go on, at zero).
      .filter(({ name, row }) => row.ready + row.buried + row.in + row.out > 0 || this.tubes.has(name))
      .sort((a, b) => b.row.in + b.row.out - (a.row.in + a.row.out) || b.row.ready + b.row.buried - (a.row.ready + a.row.buried))
      .slice(0, TUBES_PER_MINUTE);
    const cutoff = now - TUBE_MINUTES * 60_000;
    for (const { name, row } of busy) {
      let list = this.tubes.get(name);
      if (list === undefined) this.tubes.set(name, (list = []));
      this.push(list, row, TUBE_MINUTES);
    }
    for (const [name, list] of this.tubes) if ((list.at(-1)?.at ?? 0) < cutoff) this.tubes.delete(name);
    this.persist(sample, busy);
  }

  private push<T>(list: T[], item: T, keep: number): void {
    list.push(item);
    if (list.length > keep) list.splice(0, list.length - keep);
  }

  private files(): { server: string; tubes: string } {
    return { server: path.join(this.dir!, 'server.jsonl'), tubes: path.join(this.dir!, 'tubes.jsonl') };
  }

  private persist(sample: MinuteSampleDto, busy: { name: string; row: TubeMinuteDto }[]): void {
    if (this.dir === null) return;
    try {
      mkdirSync(this.dir, { recursive: true });
      const f = this.files();
      appendFileSync(f.server, `${JSON.stringify(sample)}\n`);
      appendFileSync(f.tubes, `${JSON.stringify({ at: sample.at, tubes: Object.fromEntries(busy.map((b) => [b.name, b.row])) })}\n`);
      if (++this.serverLines > 2 * SERVER_MINUTES) this.serverLines = rewrite(f.server, this.server.map((s) => JSON.stringify(s)));
      if (++this.tubeLines > 2 * TUBE_MINUTES) this.tubeLines = rewrite(f.tubes, this.tubeRecords());
    } catch (err) {
      this.log.warn({ err: (err as Error).message, dir: this.dir }, 'stats history: cannot write (the charts keep what is in memory)');
    }
  }

  /** The per-tube samples regrouped by minute, as tubes.jsonl holds them. */
  private tubeRecords(): string[] {
    const byMinute = new Map<number, Record<string, TubeMinuteDto>>();
    for (const [name, list] of this.tubes) {
      for (const row of list) {
        let m = byMinute.get(row.at);
        if (m === undefined) byMinute.set(row.at, (m = {}));
        m[name] = row;
      }
    }
    return [...byMinute.entries()].sort((a, b) => a[0] - b[0]).map(([at, tubes]) => JSON.stringify({ at, tubes }));
  }

  /** Reads back what an earlier run wrote; a damaged line is skipped (a torn last line after a crash). */
  private restore(): void {
    const f = this.files();
    for (const line of readLines(f.server)) {
      const s = line as MinuteSampleDto;
      if (typeof s.at === 'number') this.push(this.server, s, SERVER_MINUTES);
      this.serverLines++;
    }
    for (const line of readLines(f.tubes)) {
      const rec = line as { at?: number; tubes?: Record<string, TubeMinuteDto> };
      if (typeof rec.at !== 'number' || rec.tubes === undefined) continue;
      this.tubeLines++;
      for (const [name, row] of Object.entries(rec.tubes)) {
        let list = this.tubes.get(name);
        if (list === undefined) this.tubes.set(name, (list = []));
        this.push(list, row, TUBE_MINUTES);
      }
    }
  }
}

function readLines(file: string): unknown[] {
  if (!existsSync(file)) return [];
  const out: unknown[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a torn line: skipped
    }
  }
  return out;
}

/** Replaces `file` with `lines` (written beside it, then renamed); returns how many there are. */
function rewrite(file: string, lines: string[]): number {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, lines.length === 0 ? '' : `${lines.join('\n')}\n`);
  renameSync(tmp, file);
  return lines.length;
}
