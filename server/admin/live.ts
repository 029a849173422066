import type { Server as IoServer, Socket } from 'socket.io';
import type { AdminConfigDto, JobStateName, TubeDto } from '../../shared/dto.js';
import type { Ack, ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import type { Engine, Job, Tube } from '../engine/engine.js';
import type { ServerInfo } from '../server-info.js';
import { jobDto, statsDto, tubeDto } from './dto.js';
import type { StatsHistory } from './stats-history.js';

export type AdminIo = IoServer<ClientToServerEvents, ServerToClientEvents>;
type AdminSocket = Socket<ClientToServerEvents, ServerToClientEvents>;

/** How often dashboards are brought up to date. */
const BATCH_MS = 250;
/**
 * Views (tube:view and job:view counted together) one socket may hold. The dashboard views one
 * tube page and one job page at a time, so 1,000 is far beyond real use; each view costs a room
 * and, for a job, a mark the sweep compares four times a second, and one socket must not be able
 * to make that unbounded (200,000 views stalled the job port for seconds).
 */
export const MAX_VIEWS_PER_SOCKET = 1_000;
/**
 * Views all sockets together may hold: bounds the sweep and the rooms' memory however many
 * sockets a client opens (100 sockets at their own limit).
 */
export const MAX_VIEWS_PER_SERVER = 100_000;

/** How many views one socket, and all together, may hold (tests use small ones). */
export interface ViewLimits {
  perSocket: number;
  perServer: number;
}
const STATE_NAMES: readonly JobStateName[] = ['ready', 'reserved', 'delayed', 'buried'];

const tubeRoom = (name: string): string => `tube:${name}`;
const jobRoom = (id: number): string => `job:${id}`;

/** What dashboards were last told about a tube. */
interface TubeMark {
  /** The last TubeDto sent (null: none yet). */
  sent: TubeDto | null;
  stateChanges: number[];
  /** The sweep that last saw the tube among the engine's tubes. */
  sweep: number;
}

/** What one socket views. */
interface Viewing {
  tubes: Set<string>;
  jobs: Set<number>;
}

/**
 * Answers a request's acknowledgement. A client chooses what it sends in the ack's place: only a
 * function is an acknowledgement (socket.io makes one when the client asked for it); calling
 * anything else would throw out of the socket's handler and take the process down.
 */
function reply(ack: unknown, result: Parameters<Ack>[0]): void {
  if (typeof ack === 'function') (ack as Ack)(result);
}

/**
 * What dashboards were last told about a viewed job: the fields they show, and its body by
 * location, not by bytes. Plain fields compared in place, so a sweep over many viewed jobs
 * allocates nothing for the ones that did not change.
 */
interface JobMark {
  state: Job['state'];
  tubeName: string;
  priority: number;
  delayMs: number;
  ttrMs: number;
  deadlineAt: number;
  reserves: number;
  timeouts: number;
  releases: number;
  buries: number;
  kicks: number;
  slab: Job['slab'];
  bodyOffset: number;
  bodyLength: number;
}

/**
 * Pushes the engine's changes to dashboards. While at least one dashboard is connected, every
 * 250 ms a sweep compares each tube's counters (and each viewed job) with what dashboards were
 * last told and sends one message per kind for what differs. The engine's hot path does nothing
 * for dashboards beyond counting state changes per tube: no listener runs per job, so 100,000
 * operations a second cost the same with ten dashboards open as with none, and the sweep costs
 * O(tubes + viewed jobs) four times a second.
 */
export class LiveUpdates {
  private readonly tubeMarks = new Map<Tube, TubeMark>();
  private readonly jobMarks = new Map<number, JobMark | 'deleted'>();
  private sweepCount = 0;
  /** How many sockets view each tube / job. */
  private readonly tubeViewers = new Map<string, number>();
  private readonly jobViewers = new Map<number, number>();
  /** Views held by all sockets together (each socket's tube and job views). */
  private views = 0;
  private offDraining: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly io: AdminIo,
    private readonly engine: Engine,
    private readonly info: ServerInfo,
    private readonly config: AdminConfigDto,
    private readonly history: StatsHistory,
    private readonly limits: ViewLimits = { perSocket: MAX_VIEWS_PER_SOCKET, perServer: MAX_VIEWS_PER_SERVER },
  ) {
    io.on('connection', (socket) => this.onConnection(socket));
    history.onSample = (tick) => {
      if (this.io.engine.clientsCount > 0) this.io.emit('stats:ticked', tick);
    };
  }

  /** Views held by all sockets together. */
  get viewCount(): number {
    return this.views;
  }

  close(): void {
    this.history.onSample = null;
    this.stop();
  }

  private onConnection(socket: AdminSocket): void {
    if (this.timer === null) this.start();
    const now = this.engine.now();
    socket.emit('snapshot', {
      config: this.config,
      stats: statsDto(this.engine, this.info, now),
      tubes: this.engine.tubes().map((t) => tubeDto(t, now)),
      history: this.history.history(),
    });
    const viewing: Viewing = { tubes: new Set<string>(), jobs: new Set<number>() };
    socket.on('tube:view', (name, ack) => {
      if (typeof name !== 'string' || name.length > 200) return reply(ack, { ok: false, error: 'bad tube name' });
      if (!viewing.tubes.has(name)) {
        const refused = this.viewRefusal(viewing);
        if (refused !== null) return reply(ack, { ok: false, error: refused });
        viewing.tubes.add(name);
        this.views++;
        this.tubeViewers.set(name, (this.tubeViewers.get(name) ?? 0) + 1);
        void socket.join(tubeRoom(name));
      }
      reply(ack, { ok: true });
    });
    socket.on('tube:leave', (name) => {
      if (!viewing.tubes.delete(name)) return;
      this.views--;
      this.leave(this.tubeViewers, name);
      void socket.leave(tubeRoom(name));
    });
    socket.on('job:view', (id, ack) => {
      if (!Number.isSafeInteger(id) || id < 1) return reply(ack, { ok: false, error: 'bad job id' });
      if (!viewing.jobs.has(id)) {
        const refused = this.viewRefusal(viewing);
        if (refused !== null) return reply(ack, { ok: false, error: refused });
        viewing.jobs.add(id);
        this.views++;
        if (!this.jobViewers.has(id)) this.jobMarks.set(id, markOf(this.engine.job(id)));
        this.jobViewers.set(id, (this.jobViewers.get(id) ?? 0) + 1);
        void socket.join(jobRoom(id));
      }
      reply(ack, { ok: true });
    });
    socket.on('job:leave', (id) => {
      if (!viewing.jobs.delete(id)) return;
      this.views--;
      this.leaveJob(id);
      void socket.leave(jobRoom(id));
    });
    socket.on('disconnect', () => {
      this.views -= viewing.tubes.size + viewing.jobs.size;
      for (const name of viewing.tubes) this.leave(this.tubeViewers, name);
      for (const id of viewing.jobs) this.leaveJob(id);
      viewing.tubes.clear();
      viewing.jobs.clear();
      if (this.io.engine.clientsCount === 0) this.stop();
    });
  }

  /** Why one more view is refused (the socket's or the server's limit), or null when it is not. */
  private viewRefusal(viewing: Viewing): string | null {
    const { perSocket, perServer } = this.limits;
    if (viewing.tubes.size + viewing.jobs.size >= perSocket) {
      return `too many views on this connection (at most ${perSocket} tubes and jobs together): leave some first`;
    }
    if (this.views >= perServer) return `too many views on this server (at most ${perServer}): try again later`;
    return null;
  }

  private leave<K>(viewers: Map<K, number>, key: K): void {
    const n = (viewers.get(key) ?? 1) - 1;
    if (n <= 0) viewers.delete(key);
    else viewers.set(key, n);
  }

  private leaveJob(id: number): void {
    this.leave(this.jobViewers, id);
    if (!this.jobViewers.has(id)) this.jobMarks.delete(id);
  }

  /** First dashboard: what the snapshot shows is the baseline, and sweeps begin. */
  private start(): void {
    const now = this.engine.now();
    for (const tube of this.engine.tubes()) this.tubeMarks.set(tube, { sent: tubeDto(tube, now), stateChanges: [...tube.stateChanges], sweep: 0 });
    this.offDraining = this.engine.events.on('server:draining', () => this.io.emit('server:draining'));
    this.timer = setInterval(this.sweep, BATCH_MS);
    this.timer.unref();
  }

  /** No dashboard left: nothing runs for dashboards at all. */
  private stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.offDraining?.();
    this.offDraining = null;
    this.tubeMarks.clear();
  }

  private readonly sweep = (): void => {
    const sweep = ++this.sweepCount;
    const now = this.engine.now();
    const updated: TubeDto[] = [];
    for (const tube of this.engine.tubes()) {
      let mark = this.tubeMarks.get(tube);
      if (mark === undefined) {
        mark = { sent: null, stateChanges: [0, 0, 0, 0], sweep };
        this.tubeMarks.set(tube, mark);
      }
      mark.sweep = sweep;
      const dto = tubeDto(tube, now);
      if (mark.sent === null || !sameTube(dto, mark.sent)) {
        mark.sent = dto;
        updated.push(dto);
      }
      const changed = this.changedStates(tube, mark);
      if (changed.length > 0 && this.tubeViewers.has(tube.name)) {
        this.io.to(tubeRoom(tube.name)).emit('tube:jobs-changed', { tube: tube.name, states: changed });
      }
    }
    const removed: string[] = [];
    for (const [tube, mark] of this.tubeMarks) {
      if (mark.sweep === sweep) continue;
      this.tubeMarks.delete(tube);
      // A tube removed and created again under the same name is the live one: not removed.
      if (this.engine.tube(tube.name) === undefined) removed.push(tube.name);
    }
    if (updated.length > 0) this.io.emit('tubes:updated', updated);
    if (removed.length > 0) this.io.emit('tubes:removed', removed);
    for (const [id, was] of this.jobMarks) {
      const job = this.engine.job(id);
      if (job === undefined) {
        if (was === 'deleted') continue;
        this.io.to(jobRoom(id)).emit('job:deleted', id);
      } else if (was === 'deleted' || !sameJob(was, job)) {
        this.io.to(jobRoom(id)).emit('job:updated', jobDto(job, now));
      } else {
        continue;
      }
      this.jobMarks.set(id, markOf(job));
    }
  };

  /** The states whose job lists changed since the last sweep (and takes note of them). */
  private changedStates(tube: Tube, mark: TubeMark): JobStateName[] {
    const states: JobStateName[] = [];
    for (let i = 0; i < 4; i++) {
      if (tube.stateChanges[i] !== mark.stateChanges[i]) {
        mark.stateChanges[i] = tube.stateChanges[i]!;
        states.push(STATE_NAMES[i]!);
      }
    }
    return states;
  }
}

function markOf(job: Job | undefined): JobMark | 'deleted' {
  if (job === undefined) return 'deleted';
  return {
    state: job.state,
    tubeName: job.tube.name,
    priority: job.priority,
    delayMs: job.delayMs,
    ttrMs: job.ttrMs,
    deadlineAt: job.deadlineAt,
    reserves: job.reserves,
    timeouts: job.timeouts,
    releases: job.releases,
    buries: job.buries,
    kicks: job.kicks,
    slab: job.slab,
    bodyOffset: job.bodyOffset,
    bodyLength: job.bodyLength,
  };
}

/** True when nothing a dashboard shows of the job changed since `mark`. */
function sameJob(mark: JobMark, job: Job): boolean {
  return (
    mark.state === job.state &&
    mark.tubeName === job.tube.name &&
    mark.priority === job.priority &&
    mark.delayMs === job.delayMs &&
    mark.ttrMs === job.ttrMs &&
    mark.deadlineAt === job.deadlineAt &&
    mark.reserves === job.reserves &&
    mark.timeouts === job.timeouts &&
    mark.releases === job.releases &&
    mark.buries === job.buries &&
    mark.kicks === job.kicks &&
    mark.slab === job.slab &&
    mark.bodyOffset === job.bodyOffset &&
    mark.bodyLength === job.bodyLength
  );
}

/**
 * True when nothing a dashboard shows of the tube changed. The pause's time left is left out:
 * it moves every second while a tube is paused, and the dashboard counts it down itself.
 */
function sameTube(a: TubeDto, b: TubeDto): boolean {
  for (const key of Object.keys(a) as (keyof TubeDto)[]) {
    if (key !== 'pauseTimeLeftSeconds' && a[key] !== b[key]) return false;
  }
  return true;
}
