import type { JobState } from '../../shared/dto.js';
import type { JobCounts } from './job-counts.js';

/**
 * What every description of a job says, whether the binlog's (JobImage, engine/records.ts) or a
 * store's (JobView, operations/operations.ts). Times are epoch ms; durations ms. What
 * `deadlineAt` holds in a state other than delayed is said by each description.
 */
export interface JobBasics extends JobCounts {
  id: number;
  tube: string;
  state: JobState;
  priority: number;
  delayMs: number;
  ttrMs: number;
  createdAt: number;
  deadlineAt: number;
}
