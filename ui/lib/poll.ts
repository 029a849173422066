/**
 * For what no live event carries (other servers, the minute history): `load` now and every
 * `everyMs` while the page is visible, each with its own abort signal (the previous load is
 * aborted). Returns the stop function, for an $effect's cleanup.
 */
export function poll(load: (signal: AbortSignal) => Promise<void>, everyMs: number): () => void {
  let abort: AbortController | null = null;
  const run = (): void => {
    abort?.abort();
    const controller = new AbortController();
    abort = controller;
    load(controller.signal).catch(() => undefined);
  };
  run();
  const timer = setInterval(() => {
    if (document.visibilityState === 'visible') run();
  }, everyMs);
  return () => {
    clearInterval(timer);
    abort?.abort();
  };
}
