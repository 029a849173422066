import { OrderedSet } from '../common/ordered-set.js';
import { fail, ok, type Result } from '../common/result.js';
import type { EngineEvents } from './events.js';
import { IndexedHeap } from './heap.js';
import type { TubeSettings } from './journal.js';
import type { PolicyGates } from './policy-gates.js';
import type { TubePolicy } from '../../shared/policy.js';
import type { TimeBase } from './time-base.js';
import { Tube } from './records.js';
import type { WaitingSessions } from './waiting.js';

/**
 * The tubes by name and in list-tubes order (creation order with swap-remove, as beanstalkd),
 * their own settings and policies (which outlive a tube: it comes and goes with its jobs and
 * clients), and their pauses, in a heap by unpause time. A tube exists while something uses, watches or holds
 * it; the default tube always.
 */
export class TubeRegistry {
  private readonly byName = new Map<string, Tube>();
  private readonly order = new OrderedSet<Tube>();
  /** Tubes' own settings, by name. */
  private readonly settings = new Map<string, TubeSettings>();
  /** Tubes' policies, by name (their live state is each tube's gate). */
  private readonly policies = new Map<string, TubePolicy>();
  private readonly paused = new IndexedHeap<Tube>(
    (a, b) => a.unpauseAt < b.unpauseAt,
    (t, i) => (t.pauseIndex = i),
  );
  private defaultTube: Tube | null = null;

  constructor(
    private readonly timeBase: TimeBase,
    private readonly events: EngineEvents,
    private readonly waiting: WaitingSessions,
    private readonly gates: PolicyGates,
    /** The server-wide dead-letter limit (0: off), for tubes without their own. */
    readonly defaultDeadLetterAfter: number,
  ) {}

  get(name: string): Tube | undefined {
    return this.byName.get(name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  get size(): number {
    return this.byName.size;
  }

  /** All tubes in list-tubes order. */
  list(): readonly Tube[] {
    return this.order.values();
  }

  /** The tube named `name`, created if needed. The caller has validated the name. */
  findOrCreate(name: string): Tube {
    let tube = this.byName.get(name);
    if (tube === undefined) {
      tube = new Tube(name, this.timeBase);
      tube.deadLetterAfter = this.settings.get(name)?.deadLetterAfter ?? this.defaultDeadLetterAfter;
      const policy = this.policies.get(name);
      if (policy !== undefined) this.gates.apply(tube, policy);
      this.byName.set(name, tube);
      this.order.add(tube);
      this.events.emit('tube:created', { tube });
    }
    return tube;
  }

  /** Makes the default tube, which is never removed. */
  createDefault(name: string): Tube {
    this.defaultTube = this.findOrCreate(name);
    return this.defaultTube;
  }

  /** Removes `tube` if nothing uses, watches or holds it. */
  removeIfUnused(tube: Tube): void {
    if (tube.using > 0 || tube.watching > 0 || tube.jobCount > 0 || tube === this.defaultTube) return;
    this.byName.delete(tube.name);
    tube.removed = true;
    this.order.delete(tube);
    if (tube.pauseIndex >= 0) this.paused.removeAt(tube.pauseIndex);
    this.gates.forget(tube);
    this.events.emit('tube:removed', { tube });
  }

  /** A tube's own settings, or null when the server's defaults apply. The tube need not exist. */
  ownSettings(name: string): TubeSettings | null {
    return this.settings.get(name) ?? null;
  }

  /** Sets (null: clears) a tube's own settings; they apply from its next release or timeout. */
  applySettings(name: string, settings: TubeSettings | null): void {
    if (settings === null) this.settings.delete(name);
    else this.settings.set(name, { ...settings });
    const tube = this.byName.get(name);
    if (tube !== undefined) tube.deadLetterAfter = settings?.deadLetterAfter ?? this.defaultDeadLetterAfter;
  }

  /** A tube's policy, or null when it has none. The tube need not exist. */
  policy(name: string): TubePolicy | null {
    return this.policies.get(name) ?? null;
  }

  /** Sets (null: clears) a tube's policy; it applies at once (a lower cap takes no job back). */
  applyPolicy(name: string, policy: TubePolicy | null): void {
    if (policy === null) this.policies.delete(name);
    else this.policies.set(name, policy);
    const tube = this.byName.get(name);
    if (tube !== undefined) this.gates.apply(tube, policy);
  }

  /** Pauses reservations from a tube for `delayMs` from `now` (0: for an instant, which wakes waiters). */
  pause(name: string, delayMs: number, now: number): Result<Tube> {
    const tube = this.byName.get(name);
    if (tube === undefined) return fail('NOT_FOUND');
    // protocol: a pause of 0 lasts one nanosecond, so waiting clients wake when it ends.
    tube.pauseMs = delayMs === 0 ? 1e-6 : delayMs;
    tube.unpauseAt = now + delayMs;
    tube.cmdPause++;
    if (tube.pauseIndex < 0) this.paused.push(tube);
    else this.paused.update(tube.pauseIndex);
    this.waiting.refreshAwaited(tube);
    this.events.emit('tube:paused', { tube });
    return ok(tube);
  }

  /** When the next pause ends (epoch ms), or undefined when no tube is paused. */
  nextUnpauseAt(): number | undefined {
    return this.paused.peek()?.unpauseAt;
  }

  /**
   * Ends up to `budget` pauses that have run out by `now`, then serves waiters once, so they
   * get the best job across every tube that opened (beanstalkd's process_queue unpauses all
   * expired tubes before it picks a job). Returns how many pauses ended.
   */
  endPauses(now: number, budget: number): number {
    let n = 0;
    for (let tube = this.paused.peek(); tube !== undefined && tube.unpauseAt <= now && n < budget; tube = this.paused.peek()) {
      this.unpause(tube);
      n++;
    }
    if (n > 0) this.waiting.processQueue();
    return n;
  }

  private unpause(tube: Tube): void {
    tube.pauseMs = 0;
    if (tube.pauseIndex >= 0) this.paused.removeAt(tube.pauseIndex);
    this.events.emit('tube:paused', { tube });
    this.waiting.refreshAwaited(tube);
    if (tube.ready.size > 0) this.waiting.noteWideNews(tube);
  }
}
