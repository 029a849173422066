/**
 * What happened to jobs, newest last, in one ring shared by all jobs: put, reserve, release,
 * bury, timeout, kick, edit, move, delete. Why one ring and not a list per job: a job then costs
 * no memory at all for its history, and the whole history costs a fixed amount (about 32 bytes an
 * event: its numbers side by side in one typed array, one shared reference for the connection's
 * address; the rare notes and dashboard actors kept by slot on the side). Every job writes three
 * events, so what an event touches matters: a ring of 100,000 events in seven arrays streamed
 * through seven sets of cache lines and cost the Gearman round trip 7% (against 1,000 events);
 * one record per event keeps that to the least. The oldest events are overwritten first, so a
 * long-lived job keeps its recent story. Reading one job's events scans the ring: about a millisecond for 100,000 events,
 * paid by the dashboard's job page only.
 */

import { HISTORY_KINDS, type HistoryActor, type HistoryKind, type JobEventDto } from '../../shared/history.js';

export { HISTORY_KINDS, type HistoryKind };

const PUT = HISTORY_KINDS.indexOf('put');
const RESERVE = HISTORY_KINDS.indexOf('reserve');
const DELETE = HISTORY_KINDS.indexOf('delete');

/**
 * A kind's code in the ring. Compared, not looked up in an object keyed by the names (a keyed
 * load by a varying string is megamorphic), the three of every job's life first.
 */
function kindCode(kind: HistoryKind): number {
  return kind === 'put' ? PUT : kind === 'reserve' ? RESERVE : kind === 'delete' ? DELETE : HISTORY_KINDS.indexOf(kind);
}

/** Numbers per event in the ring's record array. */
const FIELDS = 3;

/** One event as it is read back (the API's shape). */
export type HistoryEvent = JobEventDto;

/** Events of one job a read answers at most (the newest). */
export const MAX_EVENTS_READ = 1000;

/** Default ring size: `--history-events`. */
export const DEFAULT_HISTORY_EVENTS = 100_000;

export class JobHistory {
  /** Per event, FIELDS numbers: the job id, the time, and the connection id * 256 + the kind's code. */
  private readonly records: Float64Array;
  private readonly peers: string[];
  /** Notes by slot: most events have none. */
  private readonly notes = new Map<number, string>();
  /** Who in the dashboard made an event, by slot: most events come from a connection. */
  private readonly actors = new Map<number, HistoryActor>();
  /** Where the next event goes; events ever recorded is `written`. */
  private next = 0;
  private written = 0;

  constructor(readonly capacity: number) {
    this.records = new Float64Array(capacity * FIELDS);
    this.peers = new Array<string>(capacity).fill('');
  }

  /** Events recorded since start (the ring holds the last `capacity` of them). */
  get recorded(): number {
    return this.written;
  }

  record(id: number, at: number, kind: HistoryKind, connection: number, peer: string, note = '', actor: HistoryActor | null = null): void {
    if (this.capacity === 0) return;
    const i = this.next;
    const r = i * FIELDS;
    this.records[r] = id;
    this.records[r + 1] = at;
    this.records[r + 2] = connection * 256 + kindCode(kind);
    this.peers[i] = peer;
    // The slot's old note and actor go with the event it held.
    if (note !== '') this.notes.set(i, note);
    else if (this.notes.size > 0) this.notes.delete(i);
    if (actor !== null) this.actors.set(i, actor);
    else if (this.actors.size > 0) this.actors.delete(i);
    this.next = i + 1 === this.capacity ? 0 : i + 1;
    this.written++;
  }

  /** Job `id`'s last `limit` events still in the ring, oldest first (a busy job may have thousands). */
  of(id: number, limit = MAX_EVENTS_READ): HistoryEvent[] {
    const out: HistoryEvent[] = [];
    const held = Math.min(this.written, this.capacity);
    let i = (this.next - held + this.capacity) % this.capacity;
    for (let n = 0; n < held; n++) {
      const r = i * FIELDS;
      if (this.records[r] === id) {
        const who = this.records[r + 2]!;
        out.push({
          at: this.records[r + 1]!,
          kind: HISTORY_KINDS[who % 256]!,
          connection: Math.floor(who / 256),
          peer: this.peers[i]!,
          note: this.notes.get(i) ?? '',
          actor: this.actors.get(i) ?? null,
        });
      }
      i = i + 1 === this.capacity ? 0 : i + 1;
    }
    return out.length > limit ? out.slice(-limit) : out;
  }
}
