import type { HistoryActor } from '../../shared/history.js';
import { fail, ok, type Result } from '../common/result.js';
import type { EngineEvents } from './events.js';
import type { JobHistory } from './history.js';
import type { Job, Tube } from './records.js';
import type { JobTable } from './job-table.js';
import type { Journal } from './journal.js';
import type { JobQueues } from './queues.js';
import { editedFields, type JobEdit, type KickKind } from './requests.js';
import type { ServerStats } from './stats.js';
import type { TubeRegistry } from './tube-registry.js';
import { jobState, setJobPriority, setJobTtrMs, setJobDelayMs, reburied, jobDeadlineAt, countKick } from './records.js';
import { bodyLengthOf } from './body-store.js';

/** What an edit needs of the engine beyond its parts: its limits, its journal and its clock. */
export interface EditHost {
  readonly maxJobSize: number;
  hasRoomFor(bytes: number): boolean;
  journalOf(job: Job): Journal;
  now(): number;
}

/**
 * An operator's changes to jobs no worker holds, keeping each job's id and counters: the
 * dashboard's edits and moves, and kicks (beanstalkd's kick and kick-job, the dashboard's).
 */
export class JobEditor {
  constructor(
    private readonly host: EditHost,
    private readonly jobs: JobTable,
    private readonly tubes: TubeRegistry,
    private readonly queues: JobQueues,
    private readonly history: JobHistory,
    private readonly events: EngineEvents,
    private readonly stats: ServerStats,
  ) {}

  /**
   * Changes a job in place, keeping its id and counters: body, priority, TTR, delay, tube. A
   * buried job stays buried (a move puts it last in the new tube's buried list). Fails with
   * NOT_FOUND, JOB_RESERVED (a worker holds it), OUT_OF_MEMORY (the body budget, or no binlog
   * room) and changes nothing then.
   */
  edit(id: number, edit: JobEdit, actor: HistoryActor | null): Result<Job> {
    const job = this.jobs.get(id);
    if (job === undefined) return fail('NOT_FOUND');
    if (jobState(job) === 'reserved') return fail('JOB_RESERVED');
    const oldBodyBytes = bodyLengthOf(job);
    const bodyLength = edit.body?.length ?? oldBodyBytes;
    // Only a new body is held to -z: a job kept from a run with a larger -z can still be edited.
    if (edit.body !== undefined && edit.body.length > this.host.maxJobSize) return fail('JOB_TOO_BIG');
    if (bodyLength > oldBodyBytes && !this.host.hasRoomFor(bodyLength - oldBodyBytes)) return fail('OUT_OF_MEMORY');
    const tubeName = edit.tube ?? job.tube.name;
    if (!this.host.journalOf(job).canRewrite(tubeName.length, bodyLength)) return fail('OUT_OF_MEMORY');
    const oldTubeBytes = job.tube.name.length;
    const from = jobState(job);
    const oldTube = job.tube;
    const moving = tubeName !== oldTube.name;
    const requeue = from !== 'buried' || moving;
    if (requeue) this.queues.detach(job);
    if (edit.body !== undefined) {
      this.jobs.bodies.release(job);
      this.jobs.bodies.place(job, edit.body);
    }
    if (edit.priority !== undefined) setJobPriority(job, edit.priority);
    if (edit.ttrMs !== undefined) setJobTtrMs(job, edit.ttrMs);
    if (edit.delayMs !== undefined) setJobDelayMs(job, edit.delayMs);
    // total-jobs stays with the tube the job was put into: it counts puts, not residents.
    if (moving) job.tube = this.tubes.findOrCreate(tubeName);
    // Recorded before the job is queued again: a waiting worker may reserve it at once.
    const now = this.host.now();
    const changed = editedFields(edit, moving);
    if (changed !== '') this.history.record(id, now, 'edit', 0, '', changed, actor);
    if (moving) this.history.record(id, now, 'move', 0, '', oldTube.name, actor);
    if (from === 'buried') {
      if (moving) {
        reburied(job, this.queues.nextBuriedSeq());
        job.tube.buried.push(job);
        this.stats.buried++;
      }
      this.queues.changed(job, from);
    } else if (edit.delayMs !== undefined ? edit.delayMs > 0 : from === 'delayed') {
      const deadline = edit.delayMs !== undefined ? this.host.now() + edit.delayMs : jobDeadlineAt(job);
      this.queues.enqueueDelayed(job, from, deadline);
    } else {
      this.queues.enqueueReady(job, from);
    }
    if (moving) {
      oldTube.touchState(from);
      if (this.events.has('job:moved')) this.events.emit('job:moved', { job, from: oldTube, state: from });
      this.tubes.removeIfUnused(oldTube);
    }
    this.host.journalOf(job).rewrite(job, oldTubeBytes, oldBodyBytes);
    return ok(job);
  }

  /**
   * Kicks up to `max` jobs of `kind` from `tube` to ready and returns how many moved. Front doors
   * call it in bounded slices so a huge kick never stalls other clients. Stops early when the
   * journal cannot record more.
   */
  kickSome(tube: Tube, kind: KickKind, max: number, actor: HistoryActor | null): number {
    let n = 0;
    while (n < max) {
      const job = kind === 'buried' ? tube.firstBuried() : tube.delayed.peek();
      if (job === undefined || !this.host.journalOf(job).canUpdate(1)) break;
      this.kickOne(job, actor);
      n++;
    }
    return n;
  }

  /** Kicks one buried or delayed job: NOT_FOUND for any other. */
  kickJob(id: number, actor: HistoryActor | null): Result<Job> {
    const job = this.jobs.get(id);
    if (job === undefined || (jobState(job) !== 'buried' && jobState(job) !== 'delayed')) return fail('NOT_FOUND');
    if (!this.host.journalOf(job).canUpdate(1)) return fail('INTERNAL_ERROR');
    this.kickOne(job, actor);
    return ok(job);
  }

  private kickOne(job: Job, actor: HistoryActor | null): void {
    const from = jobState(job);
    this.queues.detach(job);
    countKick(job);
    this.history.record(job.id, this.host.now(), 'kick', 0, '', '', actor);
    this.queues.enqueueReady(job, from);
    this.host.journalOf(job).update(job);
  }
}
