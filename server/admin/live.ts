import type { Server as IoServer, Socket } from 'socket.io';
import type { AdminConfigDto, JobState, TubeDto } from '../../shared/dto.js';
import type { Ack, ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import type { JobSnapshot, JobView, Operations, TubeCounts } from '../operations/operations.js';
import type { ServerInfo } from '../server-info.js';
import { connectionDto, jobDto, statsDto, tubeDto } from './dto.js';
import type { GearmanView } from '../gearman/view.js';
import type { StatsHistory } from './stats-history.js';

export type AdminIo = IoServer<ClientToServerEvents, ServerToClientEvents>;
type AdminSocket = Socket<ClientToServerEvents, ServerToClientEvents>;

/** How often dashboards are brought up to date. */
const BATCH_MS = 250;
const SWEEPS_PER_SECOND = 1000 / BATCH_MS;
/** The socket.io room of dashboards looking at the connections list, and how many connections it is sent. */
const CONNECTIONS_ROOM = 'connections';
const CONNECTIONS_SENT = 1000;
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
const STATE_NAMES: readonly JobState[] = ['ready', 'reserved', 'delayed', 'buried'];

const tubeRoom = (name: string): string => `tube:${name}`;
const jobRoom = (id: number): string => `job:${id}`;

/** What dashboards were last told about a tube. */
interface TubeMark {
  /** Which tube of that name (a tube removed and made again is another one). */
  serial: number;
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
 * What dashboards were last told about a viewed job: a copy of its view, whose body is known by
 * its stamp, not by bytes. Compared field by field with a reused view, so a sweep over many
 * viewed jobs allocates nothing for the ones that did not change.
 */
type JobMark = JobView;

/**
 * Pushes the engine's changes to dashboards. While at least one dashboard is connected, every
 * 250 ms a sweep compares each tube's counters (and each viewed job) with what dashboards were
 * last told and sends one message per kind for what differs. The engine's hot path does nothing
 * for dashboards beyond counting state changes per tube: no listener runs per job, so 100,000
 * operations a second cost the same with ten dashboards open as with none, and the sweep costs
 * O(tubes + viewed jobs) four times a second.
 */
export class LiveUpdates {
  private readonly tubeMarks = new Map<string, TubeMark>();
  private readonly jobMarks = new Map<number, JobMark | 'deleted'>();
  private sweepCount = 0;
  /** How many sockets view each tube / job. */
  private readonly tubeViewers = new Map<string, number>();
  private readonly jobViewers = new Map<number, number>();
  /** Views held by all sockets together (each socket's tube and job views). */
  private views = 0;
  private offDraining: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** The last Gearman snapshot sent, as JSON. */
  private gearmanSent = '';
  /** A sweep whose reads the store answers later is still running: the next one waits. */
  private sweeping = false;

  constructor(
    private readonly io: AdminIo,
    private readonly ops: Operations,
    private readonly info: ServerInfo,
    private readonly config: AdminConfigDto,
    private readonly history: StatsHistory,
    private readonly limits: ViewLimits = { perSocket: MAX_VIEWS_PER_SOCKET, perServer: MAX_VIEWS_PER_SERVER },
    /** The Gearman side, pushed as `gearman:updated` when it changes (null without a Gearman port). */
    private readonly gearman: GearmanView | null = null,
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
    this.sendSnapshot(socket).catch(() => socket.disconnect());
    const viewing: Viewing = { tubes: new Set<string>(), jobs: new Set<number>() };
    socket.on('tube:view', (name, ack) => {
      if (typeof name !== 'string' || name.length > 200) return reply(ack, { ok: false, error: 'bad tube name' });
      this.startView(viewing, viewing.tubes, name, ack, () => {
        this.tubeViewers.set(name, (this.tubeViewers.get(name) ?? 0) + 1);
        void socket.join(tubeRoom(name));
      });
    });
    socket.on('tube:leave', (name) => {
      if (!viewing.tubes.delete(name)) return;
      this.views--;
      this.leave(this.tubeViewers, name);
      void socket.leave(tubeRoom(name));
    });
    socket.on('job:view', (id, ack) => {
      if (!Number.isSafeInteger(id) || id < 1) return reply(ack, { ok: false, error: 'bad job id' });
      this.startView(viewing, viewing.jobs, id, ack, () => {
        if (!this.jobViewers.has(id)) this.markJob(id);
        this.jobViewers.set(id, (this.jobViewers.get(id) ?? 0) + 1);
        void socket.join(jobRoom(id));
      });
    });
    socket.on('job:leave', (id) => {
      if (!viewing.jobs.delete(id)) return;
      this.views--;
      this.leaveJob(id);
      void socket.leave(jobRoom(id));
    });
    socket.on('connections:view', (ack) => {
      void socket.join(CONNECTIONS_ROOM);
      this.sendConnections(socket);
      reply(ack, { ok: true });
    });
    socket.on('connections:leave', () => void socket.leave(CONNECTIONS_ROOM));
    socket.on('disconnect', () => {
      this.views -= viewing.tubes.size + viewing.jobs.size;
      for (const name of viewing.tubes) this.leave(this.tubeViewers, name);
      for (const id of viewing.jobs) this.leaveJob(id);
      viewing.tubes.clear();
      viewing.jobs.clear();
      if (this.io.engine.clientsCount === 0) this.stop();
    });
  }

  /** A new dashboard's first message: the stats, every tube and the history; then the Gearman side. */
  private async sendSnapshot(socket: AdminSocket): Promise<void> {
    const [counts, tubes] = await Promise.all([this.ops.serverCounts(), this.ops.tubes()]);
    const now = this.ops.now();
    socket.emit('snapshot', {
      config: this.config,
      stats: statsDto(counts, this.info, now),
      tubes: tubes.map((tube) => tubeDto(tube, now)),
      history: this.history.history(),
    });
    if (this.gearman !== null) socket.emit('gearman:updated', await this.gearman.snapshot());
  }

  /** Why one more view is refused (the socket's or the server's limit), or null when it is not. */
  /**
   * A socket starts viewing `key` (a tube or a job), unless it already does or it is over the
   * view limits; `watch` counts it among the key's viewers and joins the key's room.
   */
  private startView<K>(viewing: Viewing, keys: Set<K>, key: K, ack: unknown, watch: () => void): void {
    if (!keys.has(key)) {
      const refused = this.viewRefusal(viewing);
      if (refused !== null) return reply(ack, { ok: false, error: refused });
      keys.add(key);
      this.views++;
      watch();
    }
    reply(ack, { ok: true });
  }

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

  /** What a new viewer of job `id` is compared against from the next sweep on. */
  private markJob(id: number): void {
    const mark = async (): Promise<void> => {
      await this.ops.visitJobs([id], (_, view) => this.jobMarks.set(id, view === undefined ? 'deleted' : { ...view }));
    };
    mark().catch(() => this.jobMarks.set(id, 'deleted'));
  }

  /** First dashboard: what the snapshot shows is the baseline, and sweeps begin. */
  private start(): void {
    const baseline = async (): Promise<void> => {
      const tubes = await this.ops.tubes();
      const now = this.ops.now();
      for (const tube of tubes) {
        this.tubeMarks.set(tube.name, { serial: tube.serial, sent: tubeDto(tube, now), stateChanges: [...tube.stateChanges], sweep: 0 });
      }
    };
    baseline().catch(() => undefined); // the first sweep sends everything then
    this.offDraining = this.ops.onDraining(() => this.io.emit('server:draining'));
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
    if (this.sweeping) return;
    this.sweeping = true;
    // A store that cannot answer now is asked again next time.
    this.sweepAll()
      .catch(() => undefined)
      .finally(() => (this.sweeping = false));
  };

  private async sweepAll(): Promise<void> {
    this.sweepTubes(await this.ops.tubes());
    await this.sweepJobs();
    await this.sweepGearman();
    await this.sweepConnections();
  }

  private sweepTubes(tubes: readonly TubeCounts[]): void {
    const sweep = ++this.sweepCount;
    const now = this.ops.now();
    const updated: TubeDto[] = [];
    for (const tube of tubes) {
      let mark = this.tubeMarks.get(tube.name);
      if (mark === undefined || mark.serial !== tube.serial) {
        // A new tube, or one removed and made again since the last sweep: everything is news.
        mark = { serial: tube.serial, sent: null, stateChanges: [0, 0, 0, 0], sweep };
        this.tubeMarks.set(tube.name, mark);
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
    for (const [name, mark] of this.tubeMarks) {
      if (mark.sweep === sweep) continue;
      this.tubeMarks.delete(name);
      removed.push(name);
    }
    if (updated.length > 0) this.io.emit('tubes:updated', updated);
    if (removed.length > 0) this.io.emit('tubes:removed', removed);
  }

  /**
   * Once a second, while anyone looks at the connections list: ages and idle times move every
   * second, so it is sent whole (the first CONNECTIONS_SENT by id) rather than compared.
   */
  private async sweepConnections(): Promise<void> {
    if (this.sweepCount % SWEEPS_PER_SECOND !== 0 || (this.io.sockets.adapter.rooms.get(CONNECTIONS_ROOM)?.size ?? 0) === 0) return;
    await this.sendConnections(this.io.to(CONNECTIONS_ROOM));
  }

  private async sendConnections(to: { emit: AdminSocket['emit'] }): Promise<void> {
    const sessions = await this.ops.sessions();
    const now = this.ops.now();
    const first = [...sessions].sort((a, b) => a.id - b.id).slice(0, CONNECTIONS_SENT);
    to.emit('connections:updated', { connections: first.map((s) => connectionDto(s, now)), total: sessions.length });
  }

  /** Sends the Gearman functions and workers when anything in them changed. */
  private async sweepGearman(): Promise<void> {
    if (this.gearman === null) return;
    const snapshot = await this.gearman.snapshot();
    // A few functions and connections: comparing their JSON is simpler than field by field.
    const text = JSON.stringify(snapshot);
    if (text === this.gearmanSent) return;
    this.gearmanSent = text;
    this.io.emit('gearman:updated', snapshot);
  }

  /** Tells viewers of each job that changed; reads a job's full snapshot only when it did. */
  private async sweepJobs(): Promise<void> {
    const changed: number[] = [];
    await this.ops.visitJobs(this.jobMarks.keys(), (id, view) => {
      const was = this.jobMarks.get(id);
      if (view === undefined) {
        if (was === 'deleted') return;
        this.jobMarks.set(id, 'deleted');
        this.io.to(jobRoom(id)).emit('job:deleted', id);
      } else if (was === undefined || was === 'deleted' || !sameJob(was, view)) {
        this.jobMarks.set(id, { ...view });
        changed.push(id);
      }
    });
    // Each changed job in turn (thousands may have changed).
    for (const id of changed) this.emitJob(id, await this.ops.job(id));
  }

  private emitJob(id: number, job: JobSnapshot | undefined): void {
    if (job !== undefined) this.io.to(jobRoom(id)).emit('job:updated', jobDto(job, this.ops.now()));
  }

  /** The states whose job lists changed since the last sweep (and takes note of them). */
  private changedStates(tube: TubeCounts, mark: TubeMark): JobState[] {
    const states: JobState[] = [];
    for (let i = 0; i < 4; i++) {
      if (tube.stateChanges[i] !== mark.stateChanges[i]) {
        mark.stateChanges[i] = tube.stateChanges[i]!;
        states.push(STATE_NAMES[i]!);
      }
    }
    return states;
  }
}

/** True when nothing a dashboard shows of the job changed since `mark`. */
function sameJob(mark: JobMark, job: JobView): boolean {
  return (
    mark.state === job.state &&
    mark.tube === job.tube &&
    mark.priority === job.priority &&
    mark.delayMs === job.delayMs &&
    mark.ttrMs === job.ttrMs &&
    mark.deadlineAt === job.deadlineAt &&
    mark.reserves === job.reserves &&
    mark.timeouts === job.timeouts &&
    mark.releases === job.releases &&
    mark.buries === job.buries &&
    mark.kicks === job.kicks &&
    mark.strikes === job.strikes &&
    mark.buryCause === job.buryCause &&
    mark.bodyStamp === job.bodyStamp &&
    mark.bodyLength === job.bodyLength
  );
}

/**
 * True when nothing a dashboard shows of the tube changed. The pause's time left and the next
 * ready job's age are left out: they move every second, and the dashboard counts them itself
 * (from when it received the tube); a new head of the queue comes with changed counts.
 */
function sameTube(a: TubeDto, b: TubeDto): boolean {
  for (const key of Object.keys(a) as (keyof TubeDto)[]) {
    if (key !== 'pauseTimeLeftSeconds' && key !== 'nextReadyAgeSeconds' && a[key] !== b[key]) return false;
  }
  return true;
}
