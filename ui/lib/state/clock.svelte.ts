/** A "now" for countdowns (pause left, a job's time left), twice a second; one timer for the whole app. */

export class Clock {
  now = $state(Date.now());
  private timer: ReturnType<typeof setInterval> | undefined;

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      this.now = Date.now();
    }, 500);
  }
}

export const clock = new Clock();

/** Seconds still left of `seconds` reported at `receivedAt` (epoch ms), never below zero. */
export function secondsLeft(seconds: number, receivedAt: number, now: number): number {
  return Math.max(0, seconds - Math.round(Math.max(0, now - receivedAt) / 1000));
}
