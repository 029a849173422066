import type pg from 'pg';
import { run } from './pool.js';
import type { ClusterSql } from './sql.js';

/**
 * The cluster's budget for job bodies (--max-job-bytes), across every node and both realms.
 * Each node counts its own puts and deletes and writes the difference to its own row once a
 * second (no statement on the hot path waits for it), then reads the cluster's total. A put is
 * checked against that total plus what this node put since: other nodes' puts of the last second
 * can go over by that much. A node that dies loses at most its last second of counting.
 */
export class BodyBudget {
  private clusterBytes = 0;
  private bytesSinceRead = 0;
  /** This node's bytes not yet written to its row. */
  private bytesUnwritten = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly sql: ClusterSql,
    private readonly nodeId: () => number,
    /** null: no budget but the disk. */
    private readonly maxJobBytes: number | null,
  ) {}

  /** True when a body of `bytes` would take the cluster over the budget. */
  over(bytes: number): boolean {
    const max = this.maxJobBytes;
    return max !== null && this.clusterBytes + this.bytesSinceRead + bytes > max;
  }

  /** Bodies of `bytes` were committed (a put) or removed (negative: a delete). */
  added(bytes: number): void {
    this.bytesUnwritten += bytes;
    if (bytes > 0) this.bytesSinceRead += bytes;
  }

  /** Writes this node's bytes since it last did and reads the cluster's total (once a second). */
  async sync(): Promise<void> {
    const delta = this.bytesUnwritten;
    if (delta !== 0) {
      this.bytesUnwritten = 0;
      try {
        await run(this.pool, this.sql.addBytes, [this.nodeId(), delta]);
      } catch (err) {
        this.bytesUnwritten += delta;
        throw err;
      }
    }
    if (this.maxJobBytes === null) return;
    const [row] = await run<{ bytes: number }>(this.pool, this.sql.clusterBytes, []);
    this.clusterBytes = row!.bytes;
    this.bytesSinceRead = 0;
  }
}
