/**
 * What every door's push parser shares: chunks in with `write`, parsed one frame at a time by
 * the door's `step`, held while paused (a blocked reserve, an operation in flight, the output
 * limit), and never re-entered from a callback that resumes it.
 */
/** The line-end bytes both wire formats look for. */
export const CR = 13;
export const LF = 10;

export abstract class PushParser {
  /** Chunks not parsed yet (while paused), and the read offset into the first. */
  private readonly queue: Buffer[] = [];
  private queueOffset = 0;
  /** Bytes in `queue` not parsed yet. */
  protected queuedBytes = 0;
  private isPaused = false;
  private running = false;

  get paused(): boolean {
    return this.isPaused;
  }

  /**
   * `transient`: the chunk's memory is reused once this call returns (a shared read buffer).
   * Frames handed out during the call may point into it, as their contract allows; the part
   * left unparsed (a paused parser) is copied before returning.
   */
  write(chunk: Buffer, transient = false): void {
    if (chunk.length === 0 || this.discarding()) return;
    this.queue.push(chunk);
    this.queuedBytes += chunk.length;
    this.run();
    if (transient) this.keepUnparsed(chunk);
  }

  private keepUnparsed(chunk: Buffer): void {
    const queue = this.queue;
    // Usually gone, or first (paused inside it); behind earlier chunks while paused, or ahead of
    // chunks a callback wrote meanwhile.
    const at = queue.indexOf(chunk);
    if (at < 0) return;
    if (at === 0) {
      queue[0] = Buffer.from(chunk.subarray(this.queueOffset));
      this.queueOffset = 0;
    } else {
      queue[at] = Buffer.from(chunk);
    }
  }

  /** Stops handing out frames after the current callback; `resume` continues. */
  pause(): void {
    this.isPaused = true;
  }

  resume(): void {
    this.isPaused = false;
    this.run();
  }

  /** Parses one frame (or part of one) from chunk[offset..]; returns the new offset. */
  protected abstract step(chunk: Buffer, offset: number): number;

  /** True once the input can only be thrown away (a protocol error ended parsing). */
  protected discarding(): boolean {
    return false;
  }

  private run(): void {
    if (this.running) return; // a callback called resume(): the outer loop carries on
    this.running = true;
    try {
      while (!this.isPaused && this.queue.length > 0) {
        if (this.discarding()) {
          this.queue.length = 0;
          this.queuedBytes = 0;
          this.queueOffset = 0;
          break;
        }
        const chunk = this.queue[0]!;
        const start = this.queueOffset;
        const end = this.step(chunk, start);
        this.queuedBytes -= end - start;
        if (end >= chunk.length) {
          this.queue.shift();
          this.queueOffset = 0;
        } else {
          this.queueOffset = end;
        }
      }
    } finally {
      this.running = false;
    }
  }
}
