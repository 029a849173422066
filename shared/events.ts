import type { ConnectionDto, GearmanSnapshotDto, JobDto, JobState, SnapshotDto, StatsTickDto, TubeDto } from './dto.js';

/** Acknowledgement of a client request: ok, or why not. */
export type Ack = (result: { ok: true } | { ok: false; error: string }) => void;

/** Server -> dashboard. Past tense; batched and coalesced, at most a few per second. */
export interface ServerToClientEvents {
  /** On every (re)connect: everything needed to draw the overview and the tube list. */
  snapshot: (snapshot: SnapshotDto) => void;
  /** Once a second. */
  'stats:ticked': (tick: StatsTickDto) => void;
  /** Tubes whose counts changed since the last batch (created ones included). */
  'tubes:updated': (tubes: TubeDto[]) => void;
  'tubes:removed': (names: string[]) => void;
  /** To viewers of a tube: which of its states gained or lost jobs since the last batch. */
  'tube:jobs-changed': (change: { tube: string; states: JobState[] }) => void;
  /** To viewers of a job: its new stats (and body when it was edited). */
  'job:updated': (job: JobDto) => void;
  'job:deleted': (id: number) => void;
  'server:draining': () => void;
  /** To viewers of the connections list, once a second: the first connections by id, and how many there are. */
  'connections:updated': (update: { connections: ConnectionDto[]; total: number }) => void;
  /** The Gearman functions and workers, when they changed since the last batch (and on connect). */
  'gearman:updated': (snapshot: GearmanSnapshotDto) => void;
}

/** Dashboard -> server: what it is looking at (socket.io rooms). */
export interface ClientToServerEvents {
  'tube:view': (name: string, ack: Ack) => void;
  'tube:leave': (name: string) => void;
  'job:view': (id: number, ack: Ack) => void;
  'job:leave': (id: number) => void;
  'connections:view': (ack: Ack) => void;
  'connections:leave': () => void;
}
