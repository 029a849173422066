import { hasBeanstalkd, type ServerKind } from './servers.js';

/**
 * Which real servers the integration suites run against.
 *
 * `BEANPOLE_TEST_SERVERS` (comma-separated, e.g. `beanstalkd` or `beanstalkd,beanpole`) overrides
 * both lists below; it is how a suite is pointed at the reference server to validate the suite
 * itself.
 */
function fromEnv(): ServerKind[] | null {
  const raw = process.env.BEANPOLE_TEST_SERVERS;
  if (raw === undefined || raw.trim() === '') return null;
  const kinds = raw.split(',').map((s) => s.trim());
  for (const k of kinds) {
    if (k !== 'beanpole' && k !== 'beanstalkd') throw new Error(`BEANPOLE_TEST_SERVERS: unknown server ${k}`);
  }
  return kinds as ServerKind[];
}

/** Differential suites: the reference beanstalkd (when installed) and Beanpole. */
export function differentialKinds(): ServerKind[] {
  const env = fromEnv();
  if (env !== null) return env.filter((k) => k === 'beanpole' || hasBeanstalkd());
  return hasBeanstalkd() ? ['beanstalkd', 'beanpole'] : ['beanpole'];
}

/** Suites about Beanpole's own guarantees (robustness, latency): Beanpole unless overridden. */
export function targetKinds(): ServerKind[] {
  return fromEnv() ?? ['beanpole'];
}
