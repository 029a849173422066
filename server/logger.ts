import { pino, type Logger } from 'pino';

/** Structured logs on stderr; -V shows connection events, -VV everything. */
export function createLogger(verbosity: number): Logger {
  const level = verbosity >= 2 ? 'trace' : verbosity === 1 ? 'debug' : 'info';
  return pino({ name: 'beanpole', level, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: true }));
}

export type { Logger };
