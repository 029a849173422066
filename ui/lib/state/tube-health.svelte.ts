/**
 * What GET /api/tube-health says about each tube (oldest ready job, reservations near their TTR,
 * rising backlog): fetched every few seconds while a page that shows it is open. The server
 * finds it by walking every job, so it is polled, not pushed with each change.
 */

import type { TubeHealthDto } from '../../../shared/dto.js';
import { api } from '../api.js';
import { poll } from '../poll.js';

const EVERY_MS = 5000;

class TubeHealthState {
  byTube = $state(new Map<string, TubeHealthDto>());
  /** When the last answer arrived (epoch ms; 0: none yet). */
  receivedAt = $state(0);
  private users = 0;
  private stop: (() => void) | null = null;

  /** Polls while at least one page uses it; returns the release function (an $effect's cleanup). */
  use(): () => void {
    if (this.users++ === 0) {
      this.stop = poll(async (signal) => {
        const list = await api.tubeHealth(signal);
        this.byTube = new Map(list.map((h) => [h.tube, h]));
        this.receivedAt = Date.now();
      }, EVERY_MS);
    }
    return () => {
      if (--this.users > 0) return;
      this.stop?.();
      this.stop = null;
    };
  }

  /** The oldest ready job's age in seconds as of `now` (counted up since the answer); null before the first answer. */
  oldestReadyAge(tube: string, ready: number, now: number): number | null {
    if (this.receivedAt === 0) return null;
    const age = ready > 0 ? (this.byTube.get(tube)?.oldestReadyAgeSeconds ?? 0) : 0;
    return age === 0 ? 0 : age + Math.max(0, (now - this.receivedAt) / 1000);
  }
}

export const tubeHealth = new TubeHealthState();
