import { IndexedHeap } from './heap.js';
import type { Job, Session, Tube } from './records.js';
import { readyLess } from './ready-queue.js';
import type { ServerStats } from './stats.js';

/**
 * A session watching more tubes than this is "wide": while it blocks in reserve it is not added
 * to each watched tube's waiting list (and taken off them all when it wakes), which cost a worker
 * watching 10,000 tubes 20,000 list operations per job. Each tube lists its wide watchers
 * instead (changed only by watch and ignore), and a job made ready there goes to one of them that
 * waits. Narrow sessions keep beanstalkd's exact waiting order; the threshold leaves every
 * ordinary client narrow.
 */
export const WIDE_SESSION_TUBES = 64;

/** What the waiting sessions need of the engine. */
export interface WaitingHost {
  now(): number;
  /** Recomputes when the engine must next look at `session` (its timeout, its TTRs). */
  schedule(session: Session): void;
  /** Reserves `job`, the best ready job of its tube, for `session`, which waited for it. */
  hand(session: Session, job: Job, now: number): void;
}

/**
 * The sessions blocked in reserve (or asleep until a job is ready) and how each ready job finds
 * one: narrow sessions wait in each watched tube's waiting list, in beanstalkd's order, and tubes
 * that have both waiters and ready jobs sit in a heap keyed by their best job; wide sessions are
 * listed by their tubes once and served from the tubes where jobs became ready (wideNews).
 */
export class WaitingSessions {
  private readonly awaitedTubes = new IndexedHeap<Tube>(
    (a, b) => readyLess(a.ready.peek()!, b.ready.peek()!),
    (t, i) => (t.awaitedIndex = i),
  );
  /**
   * Tubes where jobs became ready (or a pause ended) while wide sessions waited, not yet looked
   * at for them (each tube once: Tube.wideNewsQueued), and a spare list to swap in.
   */
  private wideNews: Tube[] = [];
  private spareWideNews: Tube[] | null = [];
  /** Wide sessions blocked in reserve: while there are none, a job made ready costs them nothing. */
  private wideWaiting = 0;
  /** A wide session becomes narrow again at this many watched tubes (not at wideAbove, so that one watch and ignore after another do not convert it each time). */
  private readonly narrowAtMost: number;

  constructor(
    private readonly stats: ServerStats,
    private readonly host: WaitingHost,
    /** Watched tubes beyond which a session is wide. */
    private readonly wideAbove = WIDE_SESSION_TUBES,
  ) {
    this.narrowAtMost = Math.floor(wideAbove / 2);
  }

  /** `session` watches `tube` now (watch): it waits there too if it waits. */
  watched(session: Session, tube: Tube): void {
    if (!session.wide && session.watched.size > this.wideAbove) {
      this.widen(session);
    } else if (session.wide) {
      tube.wideWatchers.add(session);
      if (session.waiting && tube.ready.size > 0) this.noteWideNews(tube);
    } else if (session.waiting) {
      // A session can change its watch list while it waits only to be woken (a Gearman worker
      // asleep registers another function); a blocked reserve reads no commands.
      tube.waiting.add(session);
      this.refreshAwaited(tube);
    }
    if (session.waiting) this.processQueue();
  }

  /** `session` no longer watches `tube` (ignore). */
  ignored(session: Session, tube: Tube): void {
    if (session.wide) {
      tube.wideWatchers.delete(session);
      if (session.watched.size <= this.narrowAtMost) this.narrow(session);
    } else if (session.waiting) {
      tube.waiting.delete(session);
      this.refreshAwaited(tube);
    }
  }

  /** Tests: what disagrees in the count of wide waiters and the news list (empty when consistent). */
  problems(sessions: Iterable<Session>, tubes: readonly Tube[]): string[] {
    const problems: string[] = [];
    let wide = 0;
    for (const session of sessions) if (session.waiting && session.wide) wide++;
    if (wide !== this.wideWaiting) problems.push(`wideWaiting ${this.wideWaiting}, counted ${wide}`);
    if (this.wideNews.length > 0) problems.push(`${this.wideNews.length} tubes' news left unserved`);
    for (const tube of tubes) if (tube.wideNewsQueued) problems.push(`tube ${tube.name} still marked as news`);
    return problems;
  }

  /** Keeps `tube`'s place in the heap of tubes that can hand a job to a waiting session. */
  refreshAwaited(tube: Tube): void {
    const eligible = tube.waiting.size > 0 && tube.ready.size > 0 && !tube.closed;
    if (eligible) {
      if (tube.awaitedIndex < 0) this.awaitedTubes.push(tube);
      else this.awaitedTubes.update(tube.awaitedIndex);
    } else if (tube.awaitedIndex >= 0) {
      this.awaitedTubes.removeAt(tube.awaitedIndex);
    }
  }

  /** Hands every job that a waiting session can take to one, best job first. */
  processQueue(): void {
    // Runs after every put and release: nothing to do, and no clock read, while nobody waits.
    if (this.awaitedTubes.size === 0 && this.wideNews.length === 0) return;
    const now = this.host.now();
    for (let tube = this.awaitedTubes.peek(); tube !== undefined; tube = this.awaitedTubes.peek()) {
      this.serveWaiter(tube.waiting.take()!, tube, now);
    }
    while (this.wideNews.length > 0) this.serveWideWaiters(now);
  }

  /** Jobs are ready in `tube`: wide sessions waiting on it are to be served (processQueue). */
  noteWideNews(tube: Tube): void {
    if (this.wideWaiting === 0 || tube.wideWatchers.size === 0 || tube.wideNewsQueued) return;
    tube.wideNewsQueued = true;
    this.wideNews.push(tube);
  }

  /**
   * Hands the jobs made ready in tubes that wide sessions watch (wideNews) to those of them that
   * wait, the best job first as processQueue does; each tube's wide watchers take turns.
   */
  private serveWideWaiters(now: number): void {
    const tubes = this.wideNews;
    // The spare list is not lent out while this runs: a delegate that puts a job (and so runs
    // processQueue again) gets a list of its own.
    this.wideNews = this.spareWideNews ?? [];
    this.spareWideNews = null;
    for (const tube of tubes) tube.wideNewsQueued = false;
    for (;;) {
      let best: Tube | undefined;
      let at = -1;
      for (let i = 0; i < tubes.length; i++) {
        const tube = tubes[i]!;
        const head = tube.ready.peek();
        if (head === undefined || tube.closed) {
          tubes[i--] = tubes[tubes.length - 1]!;
          tubes.pop();
        } else if (best === undefined || readyLess(head, best.ready.peek()!)) {
          best = tube;
          at = i;
        }
      }
      if (best === undefined) {
        this.spareWideNews ??= tubes;
        return;
      }
      const session = this.nextWideWaiter(best);
      if (session === undefined) {
        tubes[at] = tubes[tubes.length - 1]!;
        tubes.pop();
        continue;
      }
      this.serveWaiter(session, best, now);
    }
  }

  /**
   * A waiting session's turn at `tube`: a sleeper is woken (the job stays ready for whoever asks
   * first; each sleeper is woken once), a blocked reserve gets the tube's best job.
   */
  private serveWaiter(session: Session, tube: Tube, now: number): void {
    const wakeOnly = session.wakeOnly;
    this.stopWaiting(session);
    if (wakeOnly) return session.delegate.woken();
    this.host.hand(session, tube.ready.peek()!, now);
  }


  /** The next of `tube`'s wide watchers that waits, round-robin; O(its wide watchers), never O(tubes). */
  private nextWideWaiter(tube: Tube): Session | undefined {
    const watchers = tube.wideWatchers.values();
    for (let k = 0; k < watchers.length; k++) {
      const i = (tube.wideCursor + k) % watchers.length;
      if (watchers[i]!.waiting) {
        tube.wideCursor = i + 1;
        return watchers[i];
      }
    }
    return undefined;
  }

  /** The session now watches more than wideAbove tubes: from here on each tube lists it as a wide watcher. */
  widen(session: Session): void {
    if (session.waiting) {
      this.leaveWaitingLists(session);
      this.wideWaiting++;
    }
    session.wide = true;
    for (const tube of session.watched.values()) {
      tube.wideWatchers.add(session);
      if (session.waiting && tube.ready.size > 0) this.noteWideNews(tube);
    }
  }

  /** The session watches few tubes again: it waits in each tube's waiting list, in beanstalkd's order. */
  narrow(session: Session): void {
    for (const tube of session.watched.values()) tube.wideWatchers.delete(session);
    session.wide = false;
    if (session.waiting) {
      this.wideWaiting--;
      this.joinWaitingLists(session);
      this.processQueue();
    }
  }

  startWaiting(session: Session, waitUntil: number): void {
    session.waiting = true;
    session.waitUntil = waitUntil;
    this.stats.waiting++;
    // A wide session's tubes already list it (widen): waiting is its flag and a count.
    if (session.wide) this.wideWaiting++;
    else this.joinWaitingLists(session);
    this.host.schedule(session);
    this.processQueue();
  }

  stopWaiting(session: Session): void {
    session.waiting = false;
    session.wakeOnly = false;
    this.stats.waiting--;
    if (session.wide) this.wideWaiting--;
    else this.leaveWaitingLists(session);
  }

  private joinWaitingLists(session: Session): void {
    for (const tube of session.watched.values()) {
      tube.waiting.add(session);
      if (tube.waiting.size === 1) this.refreshAwaited(tube);
    }
  }

  private leaveWaitingLists(session: Session): void {
    for (const tube of session.watched.values()) {
      tube.waiting.delete(session);
      if (tube.waiting.size === 0) this.refreshAwaited(tube);
    }
  }
}
