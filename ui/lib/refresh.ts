/** Re-reads one tube after a change made from this page (a live update may come later, or not at all). */

import { ApiError, api } from './api.js';
import { server } from './state/server.svelte.js';

export async function refreshTube(name: string): Promise<void> {
  try {
    server.applyTube(await api.tube(name));
  } catch (error) {
    // Gone: an empty tube nobody uses is dropped by the server.
    if (error instanceof ApiError && error.status === 404) server.removeTubes([name]);
  }
}
