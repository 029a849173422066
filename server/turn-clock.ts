import { systemClock, type Clock } from './engine/clock.js';

/**
 * A clock read once per turn of the event loop: the first reading in a turn is kept until the
 * turn's microtasks run, so every operation of one batch of input shares it. The Gearman engine
 * runs on it: a worker's pipelined WORK_COMPLETE and GRAB_JOB, a producer's 64 submits, each read
 * the time, and a reading costs about 40 ns on this kind of machine, as much as a small operation.
 * Gearman shows no times finer than its CAN_DO_TIMEOUT (ms) and SUBMIT_JOB_EPOCH (s) deadlines,
 * which a turn (well under a millisecond) cannot move. beanstalkd's engine keeps the exact clock:
 * its `time-left` and `age` follow the nanosecond clock beanstalkd reads for every command.
 */
export class TurnClock implements Clock {
  private at = -1;
  private readonly forget = (): void => {
    this.at = -1;
  };

  constructor(private readonly source: Clock = systemClock) {}

  now(): number {
    if (this.at < 0) {
      this.at = this.source.now();
      queueMicrotask(this.forget);
    }
    return this.at;
  }
}
