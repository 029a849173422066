/** Test support shared by in-process tests of the front doors (imported only by `*.test.ts`). */
import type { ClientDelegate } from './operations/operations.js';
import type { ServerInfo } from './server-info.js';

/** A client delegate that ignores what it is told (a test that reads replies from return values). */
export const QUIET_DELEGATE: ClientDelegate = {
  reserved: () => undefined,
  timedOut: () => undefined,
  deadlineSoon: () => undefined,
  woken: () => undefined,
  disconnect: () => undefined,
};

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
