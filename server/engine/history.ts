/**
 * What happened to jobs, newest last, in one ring shared by all jobs: put, reserve, release,
 * bury, timeout, kick, edit, move, delete. Why one ring and not a list per job: a job then costs
 * no memory at all for its history, and the whole history costs a fixed amount (about 40 bytes an
 * event: typed arrays for the numbers, one shared reference per event for the connection's address
 * and one for a note). The oldest events are overwritten first, so a long-lived job keeps its
 * recent story. Reading one job's events scans the ring: about a millisecond for 100,000 events,
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

/** One event as it is read back (the API's shape). */
export type HistoryEvent = JobEventDto;

/** Events of one job a read answers at most (the newest). */
export const MAX_EVENTS_READ = 1000;

/** Default ring size: `--history-events`. */
export const DEFAULT_HISTORY_EVENTS = 100_000;

export class JobHistory {
  private readonly ids: Float64Array;
  private readonly times: Float64Array;
  private readonly connections: Uint32Array;
  private readonly kinds: Uint8Array;
  private readonly peers: string[];
  private readonly notes: string[];
  /** One shared reference per event (most are null): who in the dashboard made it. */
  private readonly actors: (HistoryActor | null)[];
  /** Where the next event goes; events ever recorded is `written`. */
  private next = 0;
  private written = 0;

  constructor(readonly capacity: number) {
    this.ids = new Float64Array(capacity);
    this.times = new Float64Array(capacity);
    this.connections = new Uint32Array(capacity);
    this.kinds = new Uint8Array(capacity);
    this.peers = new Array<string>(capacity).fill('');
    this.notes = new Array<string>(capacity).fill('');
    this.actors = new Array<HistoryActor | null>(capacity).fill(null);
  }

  /** Events recorded since start (the ring holds the last `capacity` of them). */
  get recorded(): number {
    return this.written;
  }

  record(id: number, at: number, kind: HistoryKind, connection: number, peer: string, note = '', actor: HistoryActor | null = null): void {
    if (this.capacity === 0) return;
    const i = this.next;
    this.ids[i] = id;
    this.times[i] = at;
    this.kinds[i] = kindCode(kind);
    this.connections[i] = connection;
    this.peers[i] = peer;
    this.notes[i] = note;
    this.actors[i] = actor;
    this.next = i + 1 === this.capacity ? 0 : i + 1;
    this.written++;
  }

  /** Job `id`'s last `limit` events still in the ring, oldest first (a busy job may have thousands). */
  of(id: number, limit = MAX_EVENTS_READ): HistoryEvent[] {
    const out: HistoryEvent[] = [];
    const held = Math.min(this.written, this.capacity);
    let i = (this.next - held + this.capacity) % this.capacity;
    for (let n = 0; n < held; n++) {
      if (this.ids[i] === id) {
        out.push({
          at: this.times[i]!,
          kind: HISTORY_KINDS[this.kinds[i]!]!,
          connection: this.connections[i]!,
          peer: this.peers[i]!,
          note: this.notes[i]!,
          actor: this.actors[i] ?? null,
        });
      }
      i = i + 1 === this.capacity ? 0 : i + 1;
    }
    return out.length > limit ? out.slice(-limit) : out;
  }
}
