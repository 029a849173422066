import type { AdminChanges, JobNews, JobReads, Sessions, StoreInfo } from '../operations/operations.js';

/**
 * What the Gearman layer (its sessions, registry, dashboard view, text admin and door) uses of
 * a store: its clients, reads, the news of a job for waiting clients, and two changes (`cancel`
 * and `drop function` delete jobs). Any store's realm for Gearman provides it.
 */
export type GearmanStore = StoreInfo & Pick<Sessions, 'connect'> & JobReads & JobNews & Pick<AdminChanges, 'delete' | 'clear'>;
