/** The alert conditions in words: what each watches and what its threshold means (server/alerts/conditions.ts). */

import type { AlertCondition } from '../../shared/dto.js';

export const CONDITIONS: Record<AlertCondition, { label: string; threshold: string | null; explain: string }> = {
  buried: {
    label: 'Buried jobs',
    threshold: 'More than this many buried',
    explain: 'Fires when a tube holds more buried jobs than the threshold (workers failing them, or the dead-letter rule).',
  },
  'oldest-ready': {
    label: 'Oldest ready job too old',
    threshold: 'Oldest ready job older than (seconds)',
    explain: 'Fires when a ready job has waited longer than the threshold: workers are missing, stuck or too slow.',
  },
  unwatched: {
    label: 'Ready jobs, no worker watching',
    threshold: null,
    explain: 'Fires when a tube holds ready jobs and no connected worker watches it.',
  },
  'backlog-rising': {
    label: 'Backlog growing',
    threshold: 'Ready jobs above their low point',
    explain:
      'Fires when the ready count has stayed at least the threshold above its lowest point: more comes in than workers take. It clears when the backlog drains back.',
  },
  'cap-saturated': {
    label: 'Concurrency cap full',
    threshold: null,
    explain:
      "Fires when a tube's policy caps how many of its jobs are reserved at once and that many are: reserves pass the tube by. Give it a duration (for) to hear only of a cap that stays full.",
  },
};
