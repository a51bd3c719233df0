/**
 * `node bench/pg-round-trips.ts [--processes=1,3] [--root=<other checkout>] [--rounds=2] [--seconds=3] [--idle=3] [--warmup=0] [--ops=get,post]`:
 * what one request costs a server on PostgreSQL under load, with one process and with several on
 * one database: round trips and statements per GET revision and per POST deployment, the notices
 * the processes' listening connections receive per request, and the servers' CPU per request
 * (every process's threads, /proc schedstat), counted in the server processes
 * (bench/lib/count-pg-round-trips.mjs on node-postgres's `Client`), over a closed-loop run of 32
 * connections (split evenly over the processes, as the cluster scenario splits them) on the
 * embedded PostgreSQL (fsync on). Before the load, `--idle` seconds at rest: each process's
 * statements and CPU per second (the background loops). The servers run from source (the counting
 * hook needs the pg of node_modules); `--root`: another checkout's server too, each round running
 * every cluster in turn (its node_modules must resolve to this checkout's pg, e.g. a symbolic
 * link). Counts first: they hold on a loaded machine; the background sweeps' statements are
 * included (a few per hundred requests). The CPU figures move with the machine's load.
 * `--statements[=12]`: PostgreSQL itself counts too (`pg_stat_statements` and the WAL's statistics,
 * reset before each measure): per request, each statement's calls, planning and execution time,
 * buffers dirtied and WAL bytes (the most costly first), and the WAL records, bytes, writes and
 * flushes of the whole server, and its records by type (`pg_walinspect`: index inserts, row locks…). What PostgreSQL spends its CPU per request on, statement by statement.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { createTestDatabase, startTestPostgres } from '../test/helpers/postgres.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import { type Child, parentPid, ROOT, sleep, startChild, tempDir, threadsCpuMs, treeCpuMs } from './lib/processes.ts';
import { API_KEY, HELD_STILL_SERVER_ENV } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const roots = [ROOT, ...(arg('root') === undefined ? [] : [resolve(arg('root')!)])];
/** `--processes=1,3,3:DATABASE_POOL_SIZE=4`: the clusters, each a process count and settings of its own (`:NAME=value`…). */
const topologies = (arg('processes') ?? '1').split(',').map((spec) => {
  const [count, ...settings] = spec.split(':');
  return { count: Number(count), env: Object.fromEntries(settings.map((s) => [s.slice(0, s.indexOf('=')), s.slice(s.indexOf('=') + 1)])) };
});
const rounds = Number(arg('rounds') ?? 2);
const seconds = Number(arg('seconds') ?? 3);
const idleSeconds = Number(arg('idle') ?? 3);
/** `--warmup=<s>`: before the rounds, each process alone gets every measure's whole load for this long (its JIT as warm as one process's). */
const warmupSeconds = Number(arg('warmup') ?? 0);
const connections = 32;
/** `--cpu-prof=<dir>`: each process writes a CPU profile of each measure there (`<pid>-<n>.cpuprofile`, n counting its measures). */
const profileDir = arg('cpu-prof') === undefined ? undefined : resolve(arg('cpu-prof')!);
/**
 * `--perf=<dir>`: `perf record -e cpu-clock` of the cluster's processes during each measure, written
 * there (`<round>-<n>-<processes>-<op>.data`): where the CPU goes, kernel included (a sample is taken
 * only while a process runs, where `--cpu-prof` samples wall time and charges a preempted process's
 * wait to the function it was in). Servers started with `--perf-basic-prof` name their JIT frames.
 */
const perfDir = arg('perf') === undefined ? undefined : resolve(arg('perf')!);
const ops = (arg('ops') ?? 'get,post').split(',') as Array<'get' | 'post'>;
const hook = join(import.meta.dirname, 'lib/count-pg-round-trips.mjs');
const statementsShown = arg('statements') === undefined ? (process.argv.includes('--statements') ? 12 : 0) : Number(arg('statements'));
const headers = { 'x-api-key': API_KEY };

type Counts = { roundTrips: number; statements: number; responses: number; notices: number };
type Server = { child: Child; countsFile: string };
/** One root's servers on one database: one process, or several (started together, as an orchestrator starts them). */
type Cluster = { name: string; database: string; servers: Server[]; revisionPaths: string[]; integrationId: string };

const postgres = await startTestPostgres({
  durable: true,
  settings: statementsShown > 0 ? { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track_planning': 'on' } : {},
});
/** `--statements`: an administrative session reading PostgreSQL's own statistics. */
const stats = statementsShown > 0 ? new pg.Client({ connectionString: postgres.adminUrl }) : undefined;
if (stats) {
  await stats.connect();
  await stats.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await stats.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
}
/** Where the WAL was when the statistics were last reset: the WAL written since, by record type (`pg_walinspect`). */
let walStart = '';
const resetStatistics = async () => {
  if (!stats) return;
  await stats.query("SELECT pg_stat_statements_reset(), pg_stat_reset_shared('wal'), pg_stat_reset_shared('io')");
  walStart = (await stats.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn() AS lsn')).rows[0]!.lsn;
};
/**
 * `--statements`: what the cluster's busy backends wait on, by name (pg_stat_activity every 20 ms
 * while the load runs): which LWLock (WAL insertion, WAL write, a buffer's content, multixacts…).
 */
const sampleWaits = (cluster: Cluster) => {
  const seen = new Map<string, number>();
  let samples = 0;
  let sampling = stats !== undefined;
  const done = (async () => {
    while (sampling) {
      const rows = await stats!.query<{ wait: string; n: number }>(
        `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait, count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid() GROUP BY 1`,
        [cluster.database],
      );
      samples += 1;
      for (const { wait, n } of rows.rows) seen.set(wait, (seen.get(wait) ?? 0) + n);
      await sleep(20);
    }
  })();
  return {
    stop: async () => {
      sampling = false;
      await done;
      const busy = [...seen.values()].reduce((n, v) => n + v, 0);
      const shares = [...seen].sort((a, b) => b[1] - a[1]).slice(0, 8);
      return `busy backends ${(busy / Math.max(1, samples)).toFixed(1)} on average (${samples} samples): ${shares.map(([w, n]) => `${w} ${Math.round((100 * n) / Math.max(1, busy))}%`).join(', ')}`;
    },
  };
};
/** What PostgreSQL counted for `cluster`'s database since the reset, per request (`--statements`). */
const statisticsReport = async (cluster: Cluster, responses: number): Promise<string> => {
  if (!stats) return '';
  const per = (n: unknown) => (Number(n) / responses).toFixed(2);
  const perMs = (n: unknown) => ((Number(n) / responses) * 1000).toFixed(0);
  const statements = await stats.query(
    `SELECT calls, total_plan_time, total_exec_time, rows, shared_blks_hit + shared_blks_read AS blocks, shared_blks_dirtied AS dirtied, wal_records, wal_bytes,
        left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS text
      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
      ORDER BY total_plan_time + total_exec_time DESC LIMIT $2`,
    [cluster.database, statementsShown],
  );
  const all = await stats.query(
    `SELECT sum(calls) AS calls, sum(total_plan_time) AS plan, sum(total_exec_time) AS exec FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
    [cluster.database],
  );
  const wal = (await stats.query('SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full FROM pg_stat_wal')).rows[0];
  const io = (await stats.query("SELECT sum(writes) AS writes, sum(fsyncs) AS fsyncs FROM pg_stat_io WHERE object = 'wal'")).rows[0];
  const records = await stats.query(
    `SELECT "resource_manager/record_type" AS type, count, record_size + fpi_size AS bytes
      FROM pg_get_wal_stats($1, pg_current_wal_insert_lsn(), true) WHERE count > 0 ORDER BY count DESC LIMIT 12`,
    [walStart],
  );
  const a = all.rows[0];
  return [
    `  PostgreSQL per request: ${per(a.calls)} statements, ${perMs(a.plan)} µs planning, ${perMs(a.exec)} µs executing (wall time, preemption included); ` +
      `WAL ${per(wal.wal_records)} records (${per(wal.wal_fpi)} full pages), ${per(wal.wal_bytes)} bytes, ${per(io.writes)} writes, ${per(io.fsyncs)} flushes`,
    `  WAL records per request, by type: ${records.rows.map((r) => `${r.type} ${per(r.count)} (${per(r.bytes)} B)`).join(', ')}`,
    '  calls | plan µs | exec µs | rows | blocks | dirtied | WAL records | WAL bytes | statement (per request)',
    ...statements.rows.map(
      (r) =>
        `  ${per(r.calls)} | ${perMs(r.total_plan_time)} | ${perMs(r.total_exec_time)} | ${per(r.rows)} | ${per(r.blocks)} | ${per(r.dirtied)} | ${per(r.wal_records)} | ${per(r.wal_bytes)} | ${r.text}`,
    ),
  ].join('\n');
};
/** PostgreSQL's CPU (the postmaster and its backends, ended ones included): one cluster runs at a time. */
const postmaster = await (async () => {
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  try {
    return parentPid((await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  } finally {
    await admin.end();
  }
})();
const clusters: Cluster[] = [];
try {
  for (const root of roots) {
    for (const { count, env } of topologies) {
      const databaseUrl = await createTestDatabase(postgres.adminUrl);
      const servers = await Promise.all(
        Array.from({ length: count }, async () => {
          const countsFile = join(tempDir('cp-pg-round-trips-'), 'counts.json');
          const child = await startChild(
            join(root, 'server/main.ts'),
            {
              DATABASE_URL: databaseUrl,
              ...HELD_STILL_SERVER_ENV,
              PG_ROUND_TRIPS_FILE: countsFile,
              ...env,
              ...(profileDir ? { PG_CPU_PROFILE_DIR: profileDir } : {}),
            },
            ['--import', hook, ...(perfDir ? ['--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(perfDir, 'v8-%p.log')}`] : [])],
          );
          return { child, countsFile };
        }),
      );
      const settings = Object.entries(env)
        .map(([k, v]) => ` ${k}=${v}`)
        .join('');
      const cluster: Cluster = {
        name: `${root} ${count} process${count > 1 ? 'es' : ''}${settings}`,
        database: new URL(databaseUrl).pathname.slice(1),
        servers,
        revisionPaths: [],
        integrationId: '',
      };
      clusters.push(cluster);
      const api = apiClient(servers[0]!.child.url, API_KEY);
      cluster.integrationId = (await workspaceFixtures(api)).integrationId;
      for (let i = 0; i < 50; i += 1) {
        const created = await api.post('/v2/deployments', githubBody(`rt-warm-${i}`, cluster.integrationId));
        cluster.revisionPaths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
      }
    }
  }
  /** One server's counts since the last call (the hook writes them on SIGUSR2). */
  const serverCounts = async (server: Server): Promise<Counts> => {
    rmSync(server.countsFile, { force: true });
    process.kill(server.child.pid, 'SIGUSR2');
    for (let tries = 0; tries < 50; tries += 1) {
      await sleep(100);
      try {
        return JSON.parse(readFileSync(server.countsFile, 'utf8')) as Counts;
      } catch {
        // Not written yet.
      }
    }
    throw new Error(`no counts from ${server.child.url}`);
  };
  const counts = (cluster: Cluster) => Promise.all(cluster.servers.map(serverCounts));
  const cpu = (cluster: Cluster) => cluster.servers.map((s) => threadsCpuMs(s.child.pid));
  /** The main threads' context switches so far: voluntary (it slept: one per wake-up of its event loop) and not (it was preempted). */
  const switches = (cluster: Cluster) =>
    cluster.servers.map((s) => {
      const status = readFileSync(`/proc/${s.child.pid}/status`, 'utf8');
      const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
      return [field('voluntary_ctxt_switches'), field('nonvoluntary_ctxt_switches')] as const;
    });
  const sum = (values: number[]) => values.reduce((n, v) => n + v, 0);
  let created = 0;
  const requests = (cluster: Cluster, op: 'get' | 'post'): LoadRequest[] =>
    op === 'get'
      ? cluster.revisionPaths.map((path) => ({ method: 'GET', path, headers }))
      : [{ method: 'POST', path: '/v2/deployments', headers, body: () => JSON.stringify(githubBody(`rt-${(created += 1)}`, cluster.integrationId)) }];
  if (warmupSeconds > 0)
    for (const cluster of clusters)
      for (const server of cluster.servers)
        for (const op of ops) await runLoad(server.child.url, { connections, seconds: warmupSeconds, requests: requests(cluster, op) });
  for (let round = 0; round < rounds; round += 1) {
    for (const cluster of round % 2 === 0 ? clusters : [...clusters].reverse()) {
      // At rest: what the background loops send and spend, per process.
      await counts(cluster);
      const idleCpu = cpu(cluster);
      await sleep(idleSeconds * 1000);
      const idle = await counts(cluster);
      const idleSpent = cpu(cluster).map((ms, i) => ms - idleCpu[i]!);
      console.log(
        `round ${round + 1} ${cluster.name} at rest: per process ${idle.map((c) => (c.statements / idleSeconds).toFixed(1)).join(' / ')} statements/s, ` +
          `${idleSpent.map((ms) => (ms / idleSeconds).toFixed(1)).join(' / ')} ms CPU/s`,
      );
      for (const op of ops) {
        await counts(cluster);
        await resetStatistics();
        const before = cpu(cluster);
        const postgresBefore = treeCpuMs(postmaster);
        const switchesBefore = switches(cluster);
        const n = cluster.servers.length;
        const share = (i: number) => Math.floor(connections / n) + (i < connections % n ? 1 : 0);
        const perf = perfDir
          ? spawn(
              'perf',
              [
                'record',
                '-q',
                '-e',
                'cpu-clock',
                '-F',
                '999',
                '-p',
                cluster.servers.map((s) => s.child.pid).join(','),
                '-o',
                join(perfDir, `${round + 1}-${clusters.indexOf(cluster) + 1}-${n}-${op}.data`),
              ],
              { stdio: 'ignore' },
            )
          : undefined;
        const waits = sampleWaits(cluster);
        const runs = await Promise.all(
          cluster.servers.map((server, i) => runLoad(server.child.url, { connections: share(i), seconds, requests: requests(cluster, op) })),
        );
        const waited = await waits.stop();
        // The requests still in flight when the load stopped end, and are counted with what they sent.
        await sleep(1000);
        if (perf) await new Promise((done) => perf.once('exit', done).kill('SIGINT'));
        const spent = cpu(cluster).map((ms, i) => ms - before[i]!);
        const postgresSpent = treeCpuMs(postmaster) - postgresBefore;
        const switched = switches(cluster).map(([v, n], i) => [v - switchesBefore[i]![0], n - switchesBefore[i]![1]] as const);
        const each = await counts(cluster);
        const responses = sum(each.map((c) => c.responses));
        const per = (key: keyof Counts) => (sum(each.map((c) => c[key])) / responses).toFixed(2);
        console.log(
          `round ${round + 1} ${cluster.name} ${op.toUpperCase()}${profileDir ? ` (profiles: ${cluster.servers.map((s) => s.child.pid).join(', ')})` : ''}: ${responses} responses (${sum(runs.map((r) => r.failures))} failed), ` +
            `${per('roundTrips')} round trips, ${per('statements')} statements and ${per('notices')} notices received per request; ` +
            `CPU per request: ${(sum(spent) / responses).toFixed(3)} ms in the server (per process: ${spent.map((ms, i) => (ms / Math.max(1, each[i]!.responses)).toFixed(3)).join(' / ')}), ${(postgresSpent / responses).toFixed(3)} ms in PostgreSQL; ` +
            `${(sum(switched.map(([v]) => v)) / responses).toFixed(2)} wake-ups and ${(sum(switched.map(([, n]) => n)) / responses).toFixed(2)} preemptions of the main threads per request`,
        );
        if (stats) console.log(`${await statisticsReport(cluster, responses)}\n  ${waited}`);
      }
    }
  }
} finally {
  for (const cluster of clusters) for (const server of cluster.servers) await server.child.stop();
  await stats?.end();
  await postgres.stop();
}
