import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { DEFAULT_GEARMAN_MAX_SIZE } from '../../shared/limits.js';
import type { ServerOptions } from '../cli.js';
import { systemClock } from '../engine/clock.js';
import { Engine } from '../engine/engine.js';
import { immediateDurability, nullJournal } from '../engine/journal.js';
import { JOB_RECORD_HEAP_BYTES } from '../engine/record-costs.js';
import { GEARMAN_JOB_RECORD_BYTES, MAX_UNIQUE_BYTES } from '../gearman/limits.js';
import { LocalGearmanRegistry } from '../gearman/registry.js';
import { machineFacts, memoryBudget } from '../memory-budget.js';
import { MemoryOperations } from '../operations/memory-operations.js';
import { MemoryAuditLog } from '../common/audit-entries.js';
import { FileAuditLog } from '../persistence/audit-file.js';
import { Binlog } from '../persistence/binlog.js';
import { BINLOG_EXIT_CODE, BinlogDirError, openBinlog, type OpenedBinlog } from '../persistence/open-binlog.js';
import { fileOwner, withUserIds } from '../privileges.js';
import { Scheduler } from '../scheduler.js';
import { noBinlogStats, processInfo } from '../server-info.js';
import { TurnClock } from '../turn-clock.js';
import { localAutomationStores, type AutomationStores } from '../automation/automation.js';
import { StartupError, type Backend, type BackendContext } from './backend.js';

/** Where Gearman's binlog lives inside `-b DIR`. */
const GEARMAN_BINLOG_DIR = 'gearman';

/**
 * The jobs in this process: an engine per protocol (beanstalkd's, and Gearman's with ids, tubes
 * and stats of its own) under one memory budget, each with its scheduler and, with `-b DIR`, its
 * binlog (Gearman's in DIR/gearman: the same format, group commit and crash guarantees).
 */
export async function openMemoryBackend({ options, log, user }: BackendContext): Promise<Backend> {
  const binlogDir = options.binlogDir;
  const owner = fileOwner(user);
  const binlog = binlogDir === null ? null : createBinlog(options, binlogDir, log, owner);
  const gearmanDir = binlogDir === null || options.gearman === null ? null : path.join(binlogDir, GEARMAN_BINLOG_DIR);
  const gearmanBinlog = gearmanDir === null ? null : createBinlog(options, gearmanDir, log, owner);
  const budget = memoryBudget(options.maxJobBytes, machineFacts());
  const engine = new Engine({
    clock: systemClock,
    ...budget,
    maxJobSize: options.maxJobSize,
    deadLetterAfter: options.deadLetterAfter,
    historyEvents: options.historyEvents,
    journal: binlog ?? nullJournal,
  });
  // Gearman has its own size limit, --gearman-max-size, on a job's data; a body keeps the unique
  // id in front (gearman/job-body.ts). Its engine reads the clock once per turn of the event loop.
  const gearmanEngine = new Engine({
    clock: new TurnClock(),
    ...budget,
    maxJobSize: (options.gearman?.maxSize ?? DEFAULT_GEARMAN_MAX_SIZE) + MAX_UNIQUE_BYTES + 1,
    dropAfterFailures: options.gearman?.jobRetries ?? 0,
    jobRecordBytes: GEARMAN_JOB_RECORD_BYTES,
    historyEvents: options.historyEvents,
    journal: gearmanBinlog ?? nullJournal,
  });
  engine.shareBudgetWith(gearmanEngine);
  // With -u, the directory is opened as USER: a directory USER cannot write stops the start here
  // (as beanstalkd refuses to start), and every file the binlog creates belongs to USER.
  const open = (): OpenedBinlog[] => [
    openPersistence(binlogDir!, binlog!, engine, log),
    ...(gearmanDir === null ? [] : [openPersistence(makeDirectory(gearmanDir), gearmanBinlog!, gearmanEngine, log)]),
  ];
  const persisted = binlog === null ? [] : user === null ? open() : withUserIds(user, open);
  const scheduler = new Scheduler(engine);
  const gearmanScheduler = new Scheduler(gearmanEngine);
  // Restored delayed jobs may already be due (downtime counts): serve them before anyone asks.
  scheduler.poke();
  gearmanScheduler.poke();
  const beanstalk = new MemoryOperations({ engine, durability: binlog ?? immediateDurability, onActivity: scheduler.poke });
  const gearmanOps = new MemoryOperations({
    engine: gearmanEngine,
    durability: gearmanBinlog ?? immediateDurability,
    onActivity: gearmanScheduler.poke,
  });
  let gearman: Backend['gearman'] = null;
  if (options.gearman !== null) {
    const registry = new LocalGearmanRegistry(gearmanOps, os.hostname());
    // Unique ids of restored jobs coalesce again.
    await registry.restore();
    gearman = { ops: gearmanOps, registry };
  }
  const jobs = Math.floor(budget.maxRecordHeapBytes / JOB_RECORD_HEAP_BYTES);
  log.info({ ...budget }, `memory budget: ${jobs} jobs on the heap, ${budget.maxJobBytes} bytes of bodies`);
  const noBinlog = noBinlogStats(options.binlogSize);
  return {
    beanstalk,
    gearman,
    info: processInfo(() => binlog?.stats() ?? noBinlog),
    dashboard: {
      binlog: binlog !== null,
      historyDir: binlogDir === null ? null : path.join(binlogDir, 'stats-history'),
      cluster: null,
      // With -b, DIR/audit.log (bounded, rotated); else the newest entries in memory.
      audit: binlogDir === null ? new MemoryAuditLog() : new FileAuditLog(binlogDir, log),
    },
    automation: automationStores(binlogDir, log),
    label: {},
    setDraining() {
      engine.setDraining();
      gearmanEngine.setDraining();
    },
    heldJobs: () => engine.stats.reserved + gearmanEngine.stats.reserved,
    stop() {
      scheduler.stop();
      gearmanScheduler.stop();
      // A failure here is logged, never thrown: the process still exits, and recovery copes.
      for (const [i, journal] of [binlog, gearmanBinlog].entries()) {
        if (journal === null || persisted[i] === undefined) continue;
        bestEffort(log, 'binlog: closing failed', () => journal.close());
        bestEffort(log, 'binlog: releasing the directory lock failed', () => persisted[i]!.lock.release());
      }
    },
    close: () => Promise.resolve(),
  };
}

/** Schedules and alert rules in memory, saved in -b DIR; a damaged file stops the start as a damaged binlog would. */
function automationStores(dir: string | null, log: Logger): AutomationStores {
  try {
    return localAutomationStores(dir, log);
  } catch (err) {
    throw new StartupError(`schedules or alert rules cannot be read: ${(err as Error).message}`, BINLOG_EXIT_CODE);
  }
}

function bestEffort(log: Logger, what: string, step: () => void): void {
  try {
    step();
  } catch (err) {
    log.error({ err: (err as Error).message }, what);
  }
}

function createBinlog(options: ServerOptions, dir: string, log: Logger, owner: { uid: number; gid: number } | null): Binlog {
  return new Binlog({
    dir,
    owner,
    segmentBytes: options.binlogSize,
    fsyncMs: options.fsyncMs,
    log,
    onFatal: (err) => {
      // Replies for the changes not yet written are still held: exiting acknowledges nothing
      // that is not on disk, and a restart replays exactly what is.
      log.fatal({ dir, err: err.message }, 'binlog: write failed on claimed space; stopping so no unwritten change is acknowledged');
      process.exit(1);
    },
  });
}

/** Creates `dir` if it is missing (as USER with -u); fails like an unusable -b directory when it cannot. */
function makeDirectory(dir: string): string {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new StartupError(`binlog directory is not usable: cannot create ${dir}: ${(err as Error).message}`, BINLOG_EXIT_CODE);
  }
  return dir;
}

/** -b DIR: lock and replay the binlog, or fail like beanstalkd when the directory is unusable. */
function openPersistence(dir: string, binlog: Binlog, engine: Engine, log: Logger): OpenedBinlog {
  try {
    const opened = openBinlog(dir, binlog, engine, log);
    log.info(
      {
        dir,
        jobs: opened.jobs,
        records: opened.recovery.records,
        segments: opened.recovery.segments.length,
        problems: opened.recovery.problems.length,
        ms: Math.round(opened.replayMs),
      },
      `binlog: recovered ${opened.jobs} jobs in ${Math.round(opened.replayMs)} ms`,
    );
    return opened;
  } catch (err) {
    // One line that says what to fix; a stack trace would only bury it.
    if (err instanceof BinlogDirError) throw new StartupError(`binlog directory is not usable: ${err.message}`, BINLOG_EXIT_CODE);
    throw err;
  }
}
