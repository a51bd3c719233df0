import { configDefaults, defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/setup/slow-first-sequencer.ts';

/**
 * What also runs against PostgreSQL: the API, webhook, OAuth, client and compatibility
 * suites, and the concurrency tests whose races PostgreSQL runs for real (SQLite has one writer).
 */
const POSTGRES_SUITES = ['test/unit', 'test/e2e', 'test/webhooks', 'test/oauth', 'test/clients', 'test/compat', 'test/keyless-ci'].map(
  (dir) => `${dir}/**/*.test.ts`,
);
const POSTGRES_EXTRA = [
  'test/fault/concurrent-patches.test.ts',
  'test/agents/protocol.test.ts',
  'test/agents/verify-key.test.ts',
  'test/k8s/k8s-deployments-api.test.ts',
  'test/k8s/k8s-agent-e2e.test.ts',
  'test/k8s/k8s-spec-rules-api.test.ts',
  'test/hardening/nul-characters.test.ts',
  'test/hardening/listener-token-revoke.test.ts',
  'test/hardening/upload-quota-race.test.ts',
  'test/hardening/log-caps.test.ts',
  'test/github/setup-flow.test.ts',
  'test/github/status-outbox.test.ts',
  'test/github/previews.test.ts',
  'test/github/manifest-flow.test.ts',
  'test/console/sessions.test.ts',
  'test/console/live.test.ts',
];
/**
 * Three server processes on one database: PostgreSQL only, because several processes on
 * one SQLite file are not supported (SQLite is the one-process embedded default).
 */
const CLUSTER_SUITES = ['test/cluster/**/*.test.ts'];
/**
 * Files that run with no other file beside them, after all the others (one worker: vitest's
 * sequential group). port-race squats every odd port of the loopback's ephemeral range while it
 * runs: a file beside it whose server came back on a port it had released (claim-loop restarts
 * its server on the same port), or that waited for a refused connection, met a squatter instead.
 */
const ALONE_SUITES = ['test/agents/port-race.test.ts'];

const TEST_TIMEOUT_MS = 60_000;
const CPU_LOG = 'test/setup/cpu-log.ts';
const SERVER_BUNDLE = 'test/setup/server-bundle-global.ts';

export default defineConfig({
  test: {
    // End-to-end tests start real servers as child processes; give them room on a 2-core machine.
    testTimeout: TEST_TIMEOUT_MS,
    hookTimeout: TEST_TIMEOUT_MS,
    pool: 'forks',
    // Each worker runs its files one after the other in one process, not one new process a file: a
    // file's start (a fork, vitest's worker, the helpers' and server modules' import) was ~0.6 s of
    // CPU, as much as the work of most files (38 unit files: 46 → 23 s of CPU). No test file mocks
    // modules, stubs globals or leaves fake timers; one that needs the modules' first evaluation
    // resets them (lazy-schemas); the projects keep separate workers (backends).
    isolate: false,
    // Most files wait on child processes (servers, agents, builds, PostgreSQL), not the CPU: three
    // at a time on a 2-core machine, where vitest's default (cores - 1) ran them one by one (24 min).
    // What three at once starved, a sandboxed `npm ci` downloading through pasta, is limited across
    // processes instead (test/helpers/install-slots.ts: two installs at a time, whatever the
    // workers); four, with other work on the machine, made the agents' restart tests miss their marks.
    // Three by default since the idle machine's fresh-clone `.ci/run` took 8 min 53 s with three
    // against 11 min 20 s with two, both passing (docs/decisions/test-suite-time.md); TEST_WORKERS=2
    // on a machine busy with other work.
    maxWorkers: Number(process.env.TEST_WORKERS ?? 3),
    sequence: { sequencer: SlowFirstSequencer },
    // One real PostgreSQL per project run (embedded, or TEST_DATABASE_URL); each test file makes its own database on it.
    // The server bundle the test servers run, built once a run from the working tree.
    globalSetup: ['test/setup/postgres-global.ts', SERVER_BUNDLE],
    // Each file's CPU and wall time, with TEST_CPU_LOG=<file> (nothing without it).
    setupFiles: [CPU_LOG],
    projects: [
      // Everything on SQLite (the default backend); the store conformance suite runs both backends itself.
      {
        extends: true,
        test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...CLUSTER_SUITES, ...ALONE_SUITES] },
      },
      // On SQLite too, alone. Not `extends`: it needs no PostgreSQL (the global setup would start a third one).
      {
        test: {
          name: 'sqlite-alone',
          include: ALONE_SUITES,
          maxWorkers: 1,
          pool: 'forks',
          globalSetup: [SERVER_BUNDLE],
          setupFiles: [CPU_LOG],
          testTimeout: TEST_TIMEOUT_MS,
          hookTimeout: TEST_TIMEOUT_MS,
        },
      },
      // The same API, webhook and OAuth suites with every app and server process on PostgreSQL.
      { extends: true, test: { name: 'postgres', include: [...POSTGRES_SUITES, ...POSTGRES_EXTRA, ...CLUSTER_SUITES], env: { TEST_BACKEND: 'postgres' } } },
    ],
  },
});
