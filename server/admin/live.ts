import type { Server as IoServer, Socket } from 'socket.io';
import type { AdminConfigDto, JobStateName } from '../../shared/dto.js';
import type { ClientToServerEvents, ServerToClientEvents } from '../../shared/events.js';
import type { Engine, Job, Tube } from '../engine/engine.js';
import type { JobState } from '../engine/job.js';
import type { ServerInfo } from '../server-info.js';
import { jobDto, statsDto, tubeDto } from './dto.js';
import type { StatsHistory } from './stats-history.js';

export type AdminIo = IoServer<ClientToServerEvents, ServerToClientEvents>;
type AdminSocket = Socket<ClientToServerEvents, ServerToClientEvents>;

/** Live changes are gathered and sent at most this often. */
const BATCH_MS = 250;

const tubeRoom = (name: string): string => `tube:${name}`;
const jobRoom = (id: number): string => `job:${id}`;

/**
 * Pushes the engine's changes to dashboards. Engine events only mark what changed (a set add);
 * every 250 ms the marks become one message per kind, so 100,000 operations a second cost the
 * browser a few messages and the engine next to nothing. With no dashboard connected the
 * engine has no listeners at all.
 */
export class LiveUpdates {
  private readonly dirtyTubes = new Set<Tube>();
  private readonly removedTubes = new Set<string>();
  /** Viewed tubes: which states changed. */
  private readonly tubeStates = new Map<string, Set<JobStateName>>();
  private readonly dirtyJobs = new Set<Job>();
  private readonly deletedJobs = new Set<number>();
  /** How many sockets view each tube / job. */
  private readonly tubeViewers = new Map<string, number>();
  private readonly jobViewers = new Map<number, number>();
  private unsubscribe: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;
  private statsTimer: NodeJS.Timeout;

  constructor(
    private readonly io: AdminIo,
    private readonly engine: Engine,
    private readonly info: ServerInfo,
    private readonly config: AdminConfigDto,
    private readonly history: StatsHistory,
  ) {
    io.on('connection', (socket) => this.onConnection(socket));
    this.statsTimer = setInterval(() => {
      const tick = this.history.sample();
      if (this.io.engine.clientsCount > 0) this.io.emit('stats:ticked', tick);
    }, 1000);
    this.statsTimer.unref();
  }

  close(): void {
    clearInterval(this.statsTimer);
    if (this.timer !== null) clearInterval(this.timer);
    for (const off of this.unsubscribe) off();
    this.unsubscribe = [];
  }

  private onConnection(socket: AdminSocket): void {
    if (this.unsubscribe.length === 0) this.subscribe();
    const now = this.engine.now();
    socket.emit('snapshot', {
      config: this.config,
      stats: statsDto(this.engine, this.info, now),
      tubes: this.engine.tubes().map((t) => tubeDto(t, now)),
      history: this.history.history(),
    });
    const viewing = { tubes: new Set<string>(), jobs: new Set<number>() };
    socket.on('tube:view', (name, ack) => {
      if (typeof name !== 'string' || name.length > 200) return ack?.({ ok: false, error: 'bad tube name' });
      if (!viewing.tubes.has(name)) {
        viewing.tubes.add(name);
        this.tubeViewers.set(name, (this.tubeViewers.get(name) ?? 0) + 1);
        void socket.join(tubeRoom(name));
      }
      ack?.({ ok: true });
    });
    socket.on('tube:leave', (name) => {
      if (!viewing.tubes.delete(name)) return;
      this.leave(this.tubeViewers, name);
      void socket.leave(tubeRoom(name));
    });
    socket.on('job:view', (id, ack) => {
      if (!Number.isSafeInteger(id) || id < 1) return ack?.({ ok: false, error: 'bad job id' });
      if (!viewing.jobs.has(id)) {
        viewing.jobs.add(id);
        this.jobViewers.set(id, (this.jobViewers.get(id) ?? 0) + 1);
        void socket.join(jobRoom(id));
      }
      ack?.({ ok: true });
    });
    socket.on('job:leave', (id) => {
      if (!viewing.jobs.delete(id)) return;
      this.leave(this.jobViewers, id);
      void socket.leave(jobRoom(id));
    });
    socket.on('disconnect', () => {
      for (const name of viewing.tubes) this.leave(this.tubeViewers, name);
      for (const id of viewing.jobs) this.leave(this.jobViewers, id);
      if (this.io.engine.clientsCount === 0) {
        for (const off of this.unsubscribe) off();
        this.unsubscribe = [];
      }
    });
  }

  private leave<K>(viewers: Map<K, number>, key: K): void {
    const n = (viewers.get(key) ?? 1) - 1;
    if (n <= 0) viewers.delete(key);
    else viewers.set(key, n);
  }

  private subscribe(): void {
    const ev = this.engine.events;
    const tubeChanged = (tube: Tube, from: JobState | null, to: JobState | null): void => {
      this.dirtyTubes.add(tube);
      if (this.tubeViewers.has(tube.name)) {
        let states = this.tubeStates.get(tube.name);
        if (states === undefined) this.tubeStates.set(tube.name, (states = new Set()));
        if (from !== null) states.add(from);
        if (to !== null) states.add(to);
      }
    };
    const jobMoved = (job: Job, from: JobState | null, to: JobState | null): void => {
      tubeChanged(job.tube, from, to);
      if (this.jobViewers.has(job.id)) {
        if (to === null) this.deletedJobs.add(job.id);
        else this.dirtyJobs.add(job);
      }
      this.arm();
    };
    this.unsubscribe = [
      ev.on('job:changed', ({ job, from, to }) => jobMoved(job, from, to)),
      ev.on('job:deleted', ({ job, from }) => jobMoved(job, from, null)),
      // An edit that changed the tube: the tube it left changed too.
      ev.on('job:moved', ({ from, state }) => {
        tubeChanged(from, state, null);
        this.arm();
      }),
      ev.on('tube:created', ({ tube }) => {
        this.removedTubes.delete(tube.name);
        this.dirtyTubes.add(tube);
        this.arm();
      }),
      ev.on('tube:paused', ({ tube }) => {
        this.dirtyTubes.add(tube);
        this.arm();
      }),
      ev.on('tube:removed', ({ tube }) => {
        this.dirtyTubes.delete(tube);
        this.removedTubes.add(tube.name);
        this.arm();
      }),
      ev.on('server:draining', () => this.io.emit('server:draining')),
    ];
  }

  private arm(): void {
    if (this.timer === null) this.timer = setTimeout(this.flush, BATCH_MS);
  }

  private readonly flush = (): void => {
    this.timer = null;
    const now = this.engine.now();
    if (this.dirtyTubes.size > 0) {
      // A tube object that was removed and created again under the same name is the live one.
      const tubes = [...this.dirtyTubes].filter((t) => this.engine.tube(t.name) === t).map((t) => tubeDto(t, now));
      this.dirtyTubes.clear();
      if (tubes.length > 0) this.io.emit('tubes:updated', tubes);
    }
    if (this.removedTubes.size > 0) {
      const names = [...this.removedTubes].filter((n) => this.engine.tube(n) === undefined);
      this.removedTubes.clear();
      if (names.length > 0) this.io.emit('tubes:removed', names);
    }
    for (const [tube, states] of this.tubeStates) this.io.to(tubeRoom(tube)).emit('tube:jobs-changed', { tube, states: [...states] });
    this.tubeStates.clear();
    for (const job of this.dirtyJobs) {
      if (this.engine.job(job.id) === job) this.io.to(jobRoom(job.id)).emit('job:updated', jobDto(job, now));
    }
    this.dirtyJobs.clear();
    for (const id of this.deletedJobs) if (this.engine.job(id) === undefined) this.io.to(jobRoom(id)).emit('job:deleted', id);
    this.deletedJobs.clear();
  };
}
