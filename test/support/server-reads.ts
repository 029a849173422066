import { readFileSync } from 'node:fs';

/**
 * Tells when a server process has read the bytes a test sent it, from the kernel's count of bytes
 * the process has read (`rchar` in /proc/<pid>/io; socket reads count, and a server idling on its
 * sockets reads nothing else). Servers handle what they read in the same turn of their event loop,
 * so once the count is reached the bytes have had their effect, even bytes that get no reply (a
 * put header uses up a job id silently).
 *
 * Without it, bytes sent on one connection and then, a moment later, a command on another
 * connection may be handled in either order: epoll does not promise the order in which two
 * sockets that became readable together are served (Node reversed them in about a quarter of the
 * tries here; beanstalkd now and then).
 *
 * Where /proc/<pid>/io cannot be read (not Linux), `settle` returns at once.
 */
export class ReadMeter {
  private base: number | null;
  private expected = 0;

  constructor(private readonly pid: number | undefined) {
    this.base = this.rchar();
  }

  private rchar(): number | null {
    if (this.pid === undefined) return null;
    try {
      const m = /\nrchar: (\d+)|^rchar: (\d+)/.exec(readFileSync(`/proc/${this.pid}/io`, 'latin1'));
      return m === null ? null : Number(m[1] ?? m[2]);
    } catch {
      return null;
    }
  }

  /** Counts bytes sent that the server will read. */
  expect(bytes: number): void {
    this.expected += bytes;
  }

  /** Waits until the server has read everything expected; false on timeout. */
  async settle(timeoutMs: number): Promise<boolean> {
    if (this.base === null) return true;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = this.rchar();
      if (now === null || now - this.base >= this.expected) return true;
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  /**
   * Takes what the server has read so far as everything expected: after it closed a connection,
   * whether it read the bytes that followed `quit` is not known.
   */
  rebase(): void {
    const now = this.rchar();
    if (now !== null) this.base = now - this.expected;
  }
}
