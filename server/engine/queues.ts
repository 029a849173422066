import { URGENT_BELOW } from '../../shared/limits.js';
import { OrderedSet } from '../common/ordered-set.js';
import type { EngineEvents } from './events.js';
import { IndexedHeap } from './heap.js';
import {
  deadlineLess,
  type Job,
  type JobState,
  type Session,
  type Tube,
  setJobState,
  setJobDeadlineAt,
  jobPriority,
  countBury,
  jobState,
} from './records.js';
import { readyLess } from './ready-queue.js';
import type { Rotation } from './rotation.js';
import type { ServerStats } from './stats.js';
import type { WaitingSessions } from './waiting.js';

/**
 * Where each job that no worker holds waits, by state: a tube's ready heap, its delayed heap
 * and its buried list, with the server-wide counts and the indexes across tubes (tubes with
 * ready jobs, tubes with delayed ones by their soonest). Every move between states goes through
 * here, so the counts, the tubes' change marks and the `job:changed` event never disagree; a job
 * made ready is offered to the waiting sessions.
 */
export class JobQueues {
  /**
   * Tubes holding delayed jobs, soonest first job first: the next delayed job due anywhere is
   * the first of the first tube. A heap of tubes rather than of every delayed job, so that a job
   * needs no second heap position (8 bytes per job) and the heap grows with tubes, not jobs.
   */
  readonly delayingTubes = new IndexedHeap<Tube>(
    (a, b) => deadlineLess(a.delayed.peek()!, b.delayed.peek()!),
    (t, i) => (t.delayingIndex = i),
  );
  /** Tubes with ready jobs (paused or not): a reserve looks at these or at its watched tubes, whichever are fewer. */
  readonly readyTubes = new OrderedSet<Tube>();
  /** The last buried job's place in burial order (a moved or restored job keeps its own). */
  private lastBuriedSeq = 0;

  constructor(
    private readonly stats: ServerStats,
    private readonly events: EngineEvents,
    private readonly waiting: WaitingSessions,
  ) {}

  /** The delayed job due first, in any tube. */
  firstDelayed(): Job | undefined {
    return this.delayingTubes.peek()?.delayed.peek();
  }

  enqueueReady(job: Job, from: JobState | null): void {
    const tube = job.tube;
    setJobState(job, 'ready');
    setJobDeadlineAt(job, 0);
    tube.ready.push(job);
    if (tube.ready.size === 1) this.readyTubes.add(tube);
    this.waiting.noteWideNews(tube);
    this.stats.ready++;
    if (jobPriority(job) < URGENT_BELOW) {
      tube.urgent++;
      this.stats.urgent++;
    }
    this.changed(job, from);
    if (tube.ready.peek() === job) this.waiting.refreshAwaited(tube);
    this.waiting.processQueue();
  }

  enqueueDelayed(job: Job, from: JobState | null, deadlineAt: number): void {
    setJobState(job, 'delayed');
    setJobDeadlineAt(job, deadlineAt);
    const tube = job.tube;
    tube.delayed.push(job);
    if (tube.delayingIndex < 0) this.delayingTubes.push(tube);
    else if (tube.delayed.peek() === job) this.delayingTubes.update(tube.delayingIndex);
    this.stats.delayed++;
    this.changed(job, from);
  }

  /** Buries `job` (taken out of its place already) last in its tube's buried list. */
  bury(job: Job, from: JobState, cause: number): void {
    setJobState(job, 'buried');
    setJobDeadlineAt(job, 0);
    countBury(job, cause, this.nextBuriedSeq());
    job.tube.buried.push(job);
    this.stats.buried++;
    this.changed(job, from);
  }

  /** Takes a ready job out of its tube's heap (it is about to be reserved, or moved). */
  removeReady(job: Job): void {
    const tube = job.tube;
    tube.ready.remove(job);
    if (tube.ready.size === 0) this.readyTubes.delete(tube);
    this.stats.ready--;
    if (jobPriority(job) < URGENT_BELOW) {
      tube.urgent--;
      this.stats.urgent--;
    }
    this.waiting.refreshAwaited(tube);
  }

  /** The next place in burial order. */
  nextBuriedSeq(): number {
    return ++this.lastBuriedSeq;
  }

  /** Recovery: a restored buried job's place; later burials come after it. */
  sawBuriedSeq(seq: number): void {
    if (seq > this.lastBuriedSeq) this.lastBuriedSeq = seq;
  }

  /** Takes a ready, delayed or buried job out of its tube's structures. */
  detach(job: Job): void {
    switch (jobState(job)) {
      case 'ready':
        this.removeReady(job);
        break;
      case 'delayed': {
        const tube = job.tube;
        const first = tube.delayed.peek() === job;
        tube.delayed.removeAt(job.heapIndex);
        if (tube.delayed.size === 0) this.delayingTubes.removeAt(tube.delayingIndex);
        else if (first) this.delayingTubes.update(tube.delayingIndex);
        this.stats.delayed--;
        break;
      }
      case 'buried':
        job.tube.buried.remove(job);
        this.stats.buried--;
        break;
      case 'reserved':
        throw new Error(`detach: job ${job.id} is reserved`);
    }
  }

  changed(job: Job, from: JobState | null): void {
    if (from !== null) job.tube.touchState(from);
    job.tube.touchState(jobState(job));
    if (this.events.has('job:changed')) this.events.emit('job:changed', { job, from, to: jobState(job) });
  }

  /**
   * The best ready job (priority, then id) in the tubes `session` watches, closed tubes (paused,
   * or held back by their policy) left out unless `paused`. It walks whichever is shorter, the
   * session's watched tubes or the tubes that have ready jobs, so a worker watching 10,000 tubes
   * pays for the few that hold jobs.
   */
  bestReady(session: Session, paused: boolean): Job | undefined {
    if (this.stats.ready === 0) return undefined;
    if (session.rotation !== null) return this.firstReadyInTurn(session.rotation, paused);
    const viaReady = this.readyTubes.size < session.watched.size;
    const tubes = viaReady ? this.readyTubes.values() : session.watched.values();
    let best: Job | undefined;
    for (let i = 0; i < tubes.length; i++) {
      const tube = tubes[i]!;
      const head = tube.ready.peek();
      if (head === undefined || (best !== undefined && !readyLess(head, best)) || (!paused && tube.closed)) continue;
      if (viaReady && !session.watched.has(tube)) continue;
      best = head;
    }
    return best;
  }

  /** Round robin: the best job of the first tube in the rotation that has one. */
  private firstReadyInTurn(rotation: Rotation<Tube>, paused: boolean): Job | undefined {
    for (const tube of rotation.order()) {
      const head = tube.ready.peek();
      if (head !== undefined && (paused || !tube.closed)) return head;
    }
    return undefined;
  }


  /** For invariant checks: whether the heap of delaying tubes holds exactly the tubes with delayed jobs, and the soonest first. */
  delayIndexProblems(tubes: readonly Tube[]): string[] {
    const problems: string[] = [];
    const delaying = tubes.filter((t) => t.delayed.size > 0);
    if (delaying.length !== this.delayingTubes.size || delaying.some((t) => t.delayingIndex < 0)) {
      problems.push(`delayingTubes has ${this.delayingTubes.size} tubes, ${delaying.length} have delayed jobs`);
    }
    const first = this.firstDelayed();
    for (const tube of delaying) {
      if (first !== undefined && deadlineLess(tube.delayed.peek()!, first)) problems.push(`tube ${tube.name} has a delayed job due before the first`);
    }
    return problems;
  }
}
