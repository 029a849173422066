/**
 * The whole epoch millisecond that an engine's jobs keep their times relative to (Job), so that
 * those times are small integers V8 stores inline rather than 16-byte boxed numbers. The engine
 * moves it forward (Engine.keepTimesSmall) before new times outgrow the room a job's fields have
 * (30 bits: 12 days either side), and every job's times move with it. Shared by the engine's
 * tubes, through which a job reaches it.
 */
export class TimeBase {
  constructor(public ms: number) {}
}

/** How far the clock may run ahead of the base before the base moves: 6 days, half the room. */
export const TIME_BASE_SPAN_MS = 2 ** 29;
