import { mayIgnore } from '../common/rules.js';
import { fail, ok, type Result } from '../common/result.js';
import type { MemoryBudget } from './budget.js';
import type { Session, Tube } from './records.js';
import type { TubeRegistry } from './tube-registry.js';
import type { WaitingSessions } from './waiting.js';

/**
 * The tubes each session uses and watches: use, watch and ignore keep the tubes' counts, the
 * waiting sessions' lists and a round-robin session's rotation in step, make a tube when one is
 * named (if it fits the record budget) and drop one nothing refers to any more.
 */
export class WatchLists {
  constructor(
    private readonly tubes: TubeRegistry,
    private readonly waiting: WaitingSessions,
    private readonly budget: MemoryBudget,
  ) {}

  /** Makes `name` the session's tube; fails with OUT_OF_MEMORY when a new tube would not fit. */
  use(session: Session, name: string): Result<Tube> {
    if (!this.hasRoomForTube(name)) return fail('OUT_OF_MEMORY');
    const tube = this.tubes.findOrCreate(name);
    const old = session.used;
    old.using--;
    session.used = tube;
    tube.using++;
    this.tubes.removeIfUnused(old);
    return ok(tube);
  }

  /** Adds a tube to the watch list; returns the number of watched tubes. Fails like `use`. */
  watch(session: Session, name: string): Result<number> {
    if (!this.hasRoomForTube(name)) return fail('OUT_OF_MEMORY');
    const tube = this.tubes.findOrCreate(name);
    if (session.watched.add(tube)) {
      tube.watching++;
      session.rotation?.add(tube);
      this.waiting.watched(session, tube);
    }
    return ok(session.watched.size);
  }

  /**
   * True when tube `name` exists or one more tube fits the record budget. protocol: beanstalkd
   * answers use and watch with OUT_OF_MEMORY when it cannot make the tube.
   */
  hasRoomForTube(name: string): boolean {
    return this.tubes.has(name) || this.budget.hasRoomForTube();
  }

  /** Removes a tube from the watch list; the last watched tube cannot be ignored. */
  ignore(session: Session, name: string): Result<number> {
    const tube = this.tubes.get(name);
    if (tube === undefined || !session.watched.has(tube)) return ok(session.watched.size);
    if (!mayIgnore(session.watched.size, session.mayWatchNothing)) return fail('NOT_IGNORED');
    session.watched.delete(tube);
    session.rotation?.delete(tube);
    tube.watching--;
    this.waiting.ignored(session, tube);
    this.tubes.removeIfUnused(tube);
    return ok(session.watched.size);
  }
}
