import path from 'node:path';
import { z } from 'zod';
import { NUMBERED_ITEM, numberedFileFields, readJsonAs, writeJsonAtomically } from '../common/json-file.js';
import { ALERT_CONDITIONS } from '../../shared/dto.js';
import type { AlertRulesState } from './memory-alert-store.js';

/** DIR/alerts.json with -b. Version 1: change FILE_VERSION (and read the old one) when the shape changes. */
export const ALERTS_FILE = 'alerts.json';
const FILE_VERSION = 1;

const fileSchema = z.object({
  ...numberedFileFields(FILE_VERSION),
  rules: z.array(
    z.object({
      ...NUMBERED_ITEM,
      condition: z.enum(ALERT_CONDITIONS),
      threshold: z.number(),
      forMs: z.number(),
      tubes: z.string(),
      webhookUrl: z.string(),
      format: z.enum(['json', 'slack']),
      minIntervalMs: z.number(),
      enabled: z.boolean(),
      createdAt: z.number(),
    }),
  ),
});

/** The saved rules in `dir`, or null. Throws when the file is damaged. */
export function loadAlertRules(dir: string): AlertRulesState | null {
  const data = readJsonAs(path.join(dir, ALERTS_FILE), fileSchema, 'an alerts file');
  return data === null ? null : { nextId: data.nextId, rules: data.rules };
}

export function saveAlertRules(dir: string, state: AlertRulesState): void {
  writeJsonAtomically(path.join(dir, ALERTS_FILE), { version: FILE_VERSION, ...state });
}
