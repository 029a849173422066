import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['server/**/*.test.ts', 'shared/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Server-spawning suites compete for two cores; keep the run predictable.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
