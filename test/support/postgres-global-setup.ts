/**
 * Vitest global setup: one throwaway PostgreSQL for the whole run (bench/throwaway-postgres.ts),
 * handed to the test files as `inject('pgUrl')`; each test makes its own database in it. With
 * BEANPOLE_TEST_PG_URL set, that server is used instead. Without PostgreSQL installed, pgUrl is
 * null and the cluster tests say so and skip (CI installs it).
 */
import type { TestProject } from 'vitest/node';
import { postgresBinDir, startThrowawayPostgres, type ThrowawayPostgres } from '../../bench/throwaway-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string | null;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env.BEANPOLE_TEST_PG_URL;
  if (given !== undefined && given !== '') {
    project.provide('pgUrl', given);
    return undefined;
  }
  if (postgresBinDir() === null) {
    project.provide('pgUrl', null);
    return undefined;
  }
  // Durability is not what these tests check (the crash tests kill Beanpole, not PostgreSQL).
  const server: ThrowawayPostgres = await startThrowawayPostgres({ settings: { fsync: 'off', full_page_writes: 'off' } });
  project.provide('pgUrl', server.url);
  return () => server.stop();
}
