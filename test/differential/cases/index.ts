import type { Case } from '../types.js';
import { connectionCases } from './connection.js';
import { drainCases } from './drain.js';
import { framingCases } from './framing.js';
import { jobCases } from './jobs.js';
import { limitCases } from './limits.js';
import { peekCases } from './peek.js';
import { prefixCases } from './prefix.js';
import { putCases } from './put.js';
import { reserveCases } from './reserve.js';
import { statsCases } from './stats.js';
import { tubeCases } from './tubes.js';
import { unixCases } from './unix.js';

/** Every differential case, grouped by area. */
export const ALL_CASES: Case[] = [
  ...framingCases,
  ...prefixCases,
  ...putCases,
  ...limitCases,
  ...reserveCases,
  ...jobCases,
  ...peekCases,
  ...tubeCases,
  ...statsCases,
  ...connectionCases,
  ...drainCases,
  ...unixCases,
];
