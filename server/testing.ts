/** Test support shared by in-process tests of the front doors (imported only by `*.test.ts`). */
import type { ServerInfo } from './server-info.js';

/** Process facts for a server built in a test, with no binlog. */
export const TEST_SERVER_INFO: ServerInfo = {
  version: 'test',
  instanceId: '0000000000000000',
  hostname: 'test',
  os: 'test',
  platform: 'test',
  pid: 1,
  binlog: () => ({ oldestIndex: 0, currentIndex: 0, recordsMigrated: 0, recordsWritten: 0, maxSize: 0 }),
};
