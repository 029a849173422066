import type { TubeSettings, TubeSettingsView } from './operations.js';

/** A tube's settings as the dashboard shows them: its own where it has them, else the server's. */
export function tubeSettingsView(tube: string, own: TubeSettings | null, defaultDeadLetterAfter: number): TubeSettingsView {
  return { tube, deadLetterAfter: own?.deadLetterAfter ?? defaultDeadLetterAfter, own, serverDefault: { deadLetterAfter: defaultDeadLetterAfter } };
}
