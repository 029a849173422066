/** A one-shot timer the schedules, alerts and webhooks use, so tests can drive them with fake time. */
export interface Timer {
  /** Calls `fn` after `ms`; the answer cancels it. */
  after(ms: number, fn: () => void): () => void;
}

/** Node's timers. Unref'd: pending automation work never keeps a stopping process alive. */
export const realTimer: Timer = {
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return () => clearTimeout(t);
  },
};
