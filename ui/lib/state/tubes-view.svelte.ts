/** The tube table's filter and sort (kept while moving between pages). */

import type { TubeDto } from '../../../shared/dto.js';
import { tubeHealth } from './tube-health.svelte.js';
import { tubeRate } from './tube-rates.js';

export type TubeColumn =
  | 'name'
  | 'urgent'
  | 'ready'
  | 'reserved'
  | 'delayed'
  | 'buried'
  | 'waiting'
  | 'watching'
  | 'using'
  | 'pause'
  | 'inRate'
  | 'outRate'
  | 'waited'
  | 'oldest'
  | 'total';

export interface TubeColumnInfo {
  key: TubeColumn;
  label: string;
  /** The test id of the count cell (`count-<id>`); the name column has none. */
  countId: string | null;
  value: (tube: TubeDto) => number;
}

export const TUBE_COLUMNS: readonly TubeColumnInfo[] = [
  { key: 'name', label: 'Tube', countId: null, value: () => 0 },
  { key: 'urgent', label: 'Urgent', countId: 'urgent', value: (t) => t.urgent },
  { key: 'ready', label: 'Ready', countId: 'ready', value: (t) => t.ready },
  { key: 'reserved', label: 'Reserved', countId: 'reserved', value: (t) => t.reserved },
  { key: 'delayed', label: 'Delayed', countId: 'delayed', value: (t) => t.delayed },
  { key: 'buried', label: 'Buried', countId: 'buried', value: (t) => t.buried },
  { key: 'waiting', label: 'Waiting', countId: 'waiting', value: (t) => t.waiting },
  { key: 'watching', label: 'Watching', countId: 'watching', value: (t) => t.watching },
  { key: 'using', label: 'Using', countId: 'using', value: (t) => t.using },
  { key: 'pause', label: 'Pause left', countId: 'pause', value: (t) => t.pauseTimeLeftSeconds },
  { key: 'inRate', label: 'In/s', countId: 'in-rate', value: (t) => tubeRate(t.name, 'in', Date.now()) },
  { key: 'outRate', label: 'Out/s', countId: 'out-rate', value: (t) => tubeRate(t.name, 'out', Date.now()) },
  { key: 'waited', label: 'Next waited', countId: 'waited', value: (t) => (t.ready > 0 ? t.nextReadyAgeSeconds : 0) },
  { key: 'oldest', label: 'Oldest ready', countId: 'oldest', value: (t) => tubeHealth.oldestReadyAge(t.name, t.ready, Date.now()) ?? 0 },
  { key: 'total', label: 'Total since start', countId: 'total', value: (t) => t.totalJobs },
];

export type SortDirection = 'asc' | 'desc';

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

/** Filters by a case-insensitive substring of the name, then sorts (ties by name). */
export function filterAndSort(
  tubes: Iterable<TubeDto>,
  filter: string,
  column: TubeColumn,
  direction: SortDirection,
): TubeDto[] {
  const needle = filter.trim().toLowerCase();
  const rows: TubeDto[] = [];
  for (const tube of tubes) if (needle === '' || tube.name.toLowerCase().includes(needle)) rows.push(tube);
  const info = TUBE_COLUMNS.find((c) => c.key === column) ?? TUBE_COLUMNS[0]!;
  const sign = direction === 'asc' ? 1 : -1;
  rows.sort((a, b) => {
    const byValue = column === 'name' ? 0 : info.value(a) - info.value(b);
    return byValue !== 0 ? byValue * sign : collator.compare(a.name, b.name) * (column === 'name' ? sign : 1);
  });
  return rows;
}

export class TubesView {
  filter = $state('');
  column = $state<TubeColumn>('name');
  direction = $state<SortDirection>('asc');

  /** Sorts by this column; a second click on the same column flips the direction. */
  sortBy(column: TubeColumn): void {
    if (this.column === column) {
      this.direction = this.direction === 'asc' ? 'desc' : 'asc';
    } else {
      this.column = column;
      this.direction = column === 'name' ? 'asc' : 'desc';
    }
  }
}

export const tubesView = new TubesView();
