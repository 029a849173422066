import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import os from 'node:os';
import { USAGE, USAGE_EXIT_CODE, parseCommandLine, type ServerOptions } from './cli.js';
import { systemClock } from './engine/clock.js';
import { Engine } from './engine/engine.js';
import { createLogger, type Logger } from './logger.js';
import { BeanstalkServer } from './protocol/beanstalk/server.js';
import type { ServerInfo } from './protocol/beanstalk/yaml.js';
import { Scheduler } from './scheduler.js';
import { VERSION } from './version.js';

/** Composition root: options -> engine -> scheduler -> listeners -> signals. */
async function main(argv: string[]): Promise<void> {
  const cli = parseCommandLine(argv);
  if (cli.kind === 'help') {
    process.stderr.write(USAGE);
    process.exit(0);
  }
  if (cli.kind === 'version') {
    process.stdout.write(`beanpole ${VERSION}\n`);
    process.exit(0);
  }
  if (cli.kind === 'usage-error') {
    process.stderr.write(`beanpole: ${cli.message}\n${USAGE}`);
    process.exit(USAGE_EXIT_CODE);
  }
  const { options, warnings } = cli;
  const log = createLogger(options.verbosity);
  for (const w of warnings) log.warn(w);

  const engine = new Engine({ clock: systemClock, maxJobBytes: options.maxJobBytes });
  const scheduler = new Scheduler(engine);
  const info: ServerInfo = {
    version: VERSION,
    instanceId: randomBytes(8).toString('hex'),
    hostname: os.hostname(),
    os: os.version(),
    platform: os.machine(),
    pid: process.pid,
    maxJobSize: options.maxJobSize,
    binlog: () => ({ oldestIndex: 0, currentIndex: 0, recordsMigrated: 0, recordsWritten: 0, maxSize: options.binlogSize }),
  };
  const beanstalk = new BeanstalkServer({ engine, info, log, onActivity: scheduler.poke });
  // Handlers go in before listening: Node's default SIGUSR1 action would open the inspector.
  process.on('SIGPIPE', () => undefined);
  process.on('SIGUSR1', () => {
    log.info('SIGUSR1: entering drain mode; puts now get DRAINING');
    engine.setDraining();
  });
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    scheduler.stop();
    void beanstalk.close().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    const where = await beanstalk.listen(options.listen, options.port);
    log.info({ address: where, version: VERSION }, `beanstalkd protocol listening on ${where}`);
  } catch (err) {
    log.fatal({ err }, 'cannot listen');
    process.exit(111);
  }
  checkBinlogDir(options, log);
  if (options.user !== null) becomeUser(options.user, log);
}

function checkBinlogDir(options: ServerOptions, log: Logger): void {
  if (options.binlogDir === null) return;
  try {
    if (!statSync(options.binlogDir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    log.fatal({ dir: options.binlogDir, err: (err as Error).message }, 'binlog directory is not usable');
    process.exit(10);
  }
  log.warn({ dir: options.binlogDir }, 'this build keeps jobs in memory only: the binlog is not written yet');
}

/** -u USER: drop privileges after binding, with beanstalkd's exit codes. */
function becomeUser(user: string, log: Logger): void {
  let gid: number;
  try {
    gid = Number(execFileSync('id', ['-g', user], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim());
  } catch {
    log.fatal({ user }, 'getpwnam failed');
    process.exit(32);
  }
  try {
    process.setgid!(gid);
  } catch (err) {
    log.fatal({ err }, 'setgid failed');
    process.exit(33);
  }
  try {
    process.setuid!(user);
  } catch (err) {
    log.fatal({ err }, 'setuid failed');
    process.exit(34);
  }
}

void main(process.argv.slice(2));
