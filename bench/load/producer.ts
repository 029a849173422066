import type { LoadConnection, RoleHandler, SetupStep } from './connection.js';
import type { Refillable, RoleContext } from './context.js';
import type { FillerSpec, ProducerSpec } from './plan.js';
import { InvalidReplyError, commandLine, isInserted, lineEquals, nowUs, putCommand, replyLine, showReply, tubeName, writeStamp } from './wire.js';

/**
 * Pipelined puts: keeps `depth` puts in flight, one write per batch, every reply checked to be
 * exactly `INSERTED <digits>` (and `USING <tube>` when rotating over tubes). A filler is a
 * producer with a quota of jobs.
 *
 * Refills wait until a quarter of the depth is free: a server that answers each put in its own
 * segment would otherwise get one put per write back, and both sides would pay a syscall per
 * command instead of per batch.
 *
 * The bytes of consecutive puts are laid out once in a ring (one unit per tube, plus `depth`
 * units again so any batch is one contiguous slice), so a batch without stamps is a subarray and
 * costs no copy at all.
 *
 * In a paced window the producer sends its share of the pace by the clock instead: whenever it
 * runs (on each reply, and on each turn of the worker's event loop) it sends the puts that have come due
 * since the pace was set, however few, still bounded by its depth and the flow window. A server
 * that falls behind thus gets no more than `depth` puts per connection in flight, and the
 * achieved rate shows it.
 */
export class Producer implements RoleHandler, Refillable {
  private readonly ring: Buffer;
  private readonly unitLen: number;
  /** Offset of the body inside a unit, for stamps. */
  private readonly bodyOffset: number;
  /** Units in the rotation (one per tube). */
  private readonly units: number;
  private readonly usingReplies: Buffer[] | null;
  private readonly depth: number;
  /** The smallest batch worth a write (a quarter of the depth). */
  private readonly batch: number;
  private readonly stamp: boolean;
  private readonly flowControl: boolean;
  private next = 0;
  private expectUnit = 0;
  private expectUsing: boolean;
  private inflight = 0;
  private remaining: number;
  private insertedInChunk = 0;
  private started = false;
  private readonly pacer = new Pacer();

  constructor(
    private readonly conn: LoadConnection,
    private readonly ctx: RoleContext,
    spec: ProducerSpec | FillerSpec,
  ) {
    const tubes = spec.role === 'producer' ? spec.tubes : 1;
    this.depth = spec.depth;
    this.batch = Math.max(1, spec.depth >> 2);
    this.stamp = spec.role === 'producer' && spec.stamp;
    this.flowControl = spec.role === 'producer' && spec.flowControl;
    this.remaining = spec.role === 'filler' ? spec.jobs : Infinity;
    this.units = tubes;
    const put = putCommand(spec.bodySize);
    const rotate = tubes > 1;
    const unit = (i: number): Buffer => (rotate ? Buffer.concat([commandLine(`use ${tubeName(i % tubes, tubes)}`), put.bytes]) : put.bytes);
    this.unitLen = unit(0).length;
    this.bodyOffset = this.unitLen - put.bytes.length + put.bodyOffset;
    const ringUnits = tubes + spec.depth;
    this.ring = Buffer.allocUnsafe(ringUnits * this.unitLen);
    for (let i = 0; i < ringUnits; i++) unit(i).copy(this.ring, i * this.unitLen);
    this.usingReplies = rotate ? Array.from({ length: tubes }, (_, i) => replyLine(`USING ${tubeName(i, tubes)}`)) : null;
    this.expectUsing = rotate;
  }

  /** `use bench` once when all puts go to one tube. */
  static setup(spec: ProducerSpec | FillerSpec): SetupStep {
    if (spec.role === 'producer' && spec.tubes > 1) return { commands: [], replies: [] };
    return { commands: [commandLine(`use ${tubeName(0, 1)}`)], replies: [replyLine(`USING ${tubeName(0, 1)}`)] };
  }

  start(): void {
    this.started = true;
    this.ctx.onTick(this);
    this.fill();
  }

  onReply(buf: Buffer, lineStart: number, lineEnd: number): void {
    if (this.expectUsing) {
      const want = this.usingReplies![this.expectUnit]!;
      if (!lineEquals(buf, lineStart, lineEnd, want)) {
        throw new InvalidReplyError(`use: got ${showReply(buf, lineStart, lineEnd)}, expected ${JSON.stringify(want.toString('latin1'))}`);
      }
      this.expectUsing = false;
      return;
    }
    if (!isInserted(buf, lineStart, lineEnd)) throw new InvalidReplyError(`put: got ${showReply(buf, lineStart, lineEnd)}, expected INSERTED <id>`);
    this.insertedInChunk++;
    this.inflight--;
    this.expectUnit = this.expectUnit + 1 === this.units ? 0 : this.expectUnit + 1;
    this.expectUsing = this.usingReplies !== null;
  }

  afterChunk(): void {
    if (this.insertedInChunk > 0) {
      this.ctx.state.add(this.ctx.worker, 'inserted', this.insertedInChunk);
      this.insertedInChunk = 0;
    }
    this.fill();
  }

  /** Sends as many puts as depth, quota, the pace and the flow window allow, in one write. */
  fill(): void {
    if (!this.started || !this.ctx.sending()) return;
    let k = Math.min(this.depth - this.inflight, this.remaining);
    // Unpaced, the smallest write worth making is a batch; paced, whatever has come due.
    let least = Math.min(this.batch, this.remaining);
    const share = this.ctx.paceShare();
    if (share > 0) {
      k = Math.min(k, this.pacer.due(share, this.ctx.state.paceEpoch()));
      least = 1;
    }
    if (k <= 0 || k < least) return;
    if (this.flowControl) {
      // Wait for room for a whole batch, not for whatever the last delete freed: resuming with
      // one or two puts per write would cost the generator a syscall per job.
      const room = this.ctx.flowWindow - this.ctx.state.inSystem();
      if (room < least) {
        this.ctx.pause(this);
        return;
      }
      k = Math.min(k, room);
      this.ctx.state.addInSystem(k);
    }
    // Counted for every producer: a drain waits until consumers have reserved them all.
    this.ctx.state.addWaiting(k);
    if (share > 0) this.pacer.sent(k);
    const from = this.next * this.unitLen;
    let batch = this.ring.subarray(from, from + k * this.unitLen);
    if (this.stamp) {
      // A copy per batch (not per put): the ring stays shared by batches still being written.
      batch = Buffer.from(batch);
      const us = nowUs();
      for (let i = 0; i < k; i++) writeStamp(batch, i * this.unitLen + this.bodyOffset, us);
    }
    this.conn.write(batch);
    this.inflight += k;
    this.remaining -= k;
    this.next = (this.next + k) % this.units;
  }
}

/**
 * The clock of a paced producer: puts due at `perSec` since the pace was last set, minus those
 * sent. A new pace epoch restarts the clock, so a pause (a drain, a change of pace) is never
 * made up for with a burst.
 */
class Pacer {
  private epoch = -1;
  private startMs = 0;
  private sentSinceStart = 0;

  /** Puts due now (0 or more) at `perSec` jobs/s. */
  due(perSec: number, epoch: number): number {
    const now = performance.now();
    if (epoch !== this.epoch) {
      this.epoch = epoch;
      this.startMs = now;
      this.sentSinceStart = 0;
    }
    return Math.floor((perSec * (now - this.startMs)) / 1000) - this.sentSinceStart;
  }

  /** `k` puts went out. */
  sent(k: number): void {
    this.sentSinceStart += k;
  }
}
