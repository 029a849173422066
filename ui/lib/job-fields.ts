import { MAX_U32, isValidTubeName } from '../../shared/limits.js';
import { formatBytes } from './format.js';

/** What the put and edit forms ask for, as the operator typed it (durations in seconds). */
export interface JobFieldValues {
  tube: string;
  priority: number;
  delaySeconds: number;
  ttrSeconds: number;
  /** Bytes of the body as it will be sent; negative when it is not valid base64; null when not edited. */
  bodyBytes: number | null;
  maxJobSize: number;
}

/** Priority, delay and TTR are u32 on the protocol and in the API (shared/limits.ts). */
export const isU32 = (value: number): boolean => Number.isInteger(value) && value >= 0 && value <= MAX_U32;

/**
 * What is wrong with the fields, in words for the operator; empty when the server will accept
 * them. The one copy of these checks for both forms (the API checks the same limits again).
 */
export function jobFieldProblems(v: JobFieldValues): string[] {
  const list: string[] = [];
  if (!isValidTubeName(v.tube.trim())) list.push('Enter a valid tube name (letters, digits and - + / ; . $ _ ( ), up to 200).');
  if (!isU32(v.priority)) list.push(`Priority must be a whole number from 0 to ${MAX_U32}.`);
  if (!isU32(v.delaySeconds)) list.push('Delay must be a whole number of seconds.');
  if (!isU32(v.ttrSeconds)) list.push('TTR must be a whole number of seconds.');
  if (v.bodyBytes !== null && v.bodyBytes < 0) list.push('The body is not valid base64.');
  else if (v.bodyBytes !== null && v.bodyBytes > v.maxJobSize) {
    list.push(`The body is larger than the server's ${formatBytes(v.maxJobSize)} limit.`);
  }
  return list;
}
