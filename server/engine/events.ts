import type { Job, JobState, Tube } from './records.js';

/** What the engine tells observers (the dashboard). Listeners must not call back into the engine. */
export interface EngineEventMap {
  /** A job entered `to` from `from` (null: it was just put). */
  'job:changed': { job: Job; from: JobState | null; to: JobState };
  'job:deleted': { job: Job; from: JobState };
  /** The job left tube `from` for its current tube (an edit); `state` is the state it left in. */
  'job:moved': { job: Job; from: Tube; state: JobState };
  'tube:created': { tube: Tube };
  'tube:removed': { tube: Tube };
  'tube:paused': { tube: Tube };
  'server:draining': Record<string, never>;
}

type Listener<T> = (payload: T) => void;

/** A minimal typed emitter: the hot path pays one length check when nobody listens. */
export class EngineEvents {
  private readonly listeners: { [K in keyof EngineEventMap]?: Listener<EngineEventMap[K]>[] } = {};
  /**
   * Listeners of all events together: `has` answers from it alone while nobody listens (a
   * server without a dashboard), with no keyed load by the event's name, which is megamorphic.
   */
  private total = 0;

  on<K extends keyof EngineEventMap>(event: K, fn: Listener<EngineEventMap[K]>): () => void {
    const list = (this.listeners[event] ??= []) as Listener<EngineEventMap[K]>[];
    list.push(fn);
    this.total++;
    return () => {
      const i = list.indexOf(fn);
      if (i < 0) return;
      list.splice(i, 1);
      this.total--;
    };
  }

  has(event: keyof EngineEventMap): boolean {
    if (this.total === 0) return false;
    const list = this.listeners[event];
    return list !== undefined && list.length > 0;
  }

  emit<K extends keyof EngineEventMap>(event: K, payload: EngineEventMap[K]): void {
    const list = this.listeners[event] as Listener<EngineEventMap[K]>[] | undefined;
    if (list === undefined) return;
    for (const fn of list) fn(payload);
  }
}
