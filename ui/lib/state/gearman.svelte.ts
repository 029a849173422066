/** The Gearman functions and workers, as the server last pushed them (`gearman:updated`). */

import type { GearmanSnapshotDto } from '../../../shared/dto.js';

class GearmanState {
  /** Null until the first push (or when the server has no Gearman port). */
  snapshot = $state.raw<GearmanSnapshotDto | null>(null);

  apply(snapshot: GearmanSnapshotDto): void {
    this.snapshot = snapshot;
  }
}

export const gearman = new GearmanState();
