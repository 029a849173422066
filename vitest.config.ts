import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['server/**/*.test.ts', 'shared/**/*.test.ts', 'ui/lib/**/*.test.ts', 'test/**/*.test.ts'],
    // A throwaway PostgreSQL for the cluster tests (inject('pgUrl')).
    globalSetup: ['test/support/postgres-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Server-spawning suites compete for two cores; keep the run predictable.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
