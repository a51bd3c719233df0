import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // End-to-end tests start real servers as child processes; give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One real PostgreSQL for the run (embedded, or TEST_DATABASE_URL); each test file makes its own database on it.
    globalSetup: ['test/setup/postgres-global.ts'],
  },
});
