import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { createTestDatabase, startTestPostgres, type TestPostgres } from '../../test/helpers/postgres.ts';
import { type LoadOptions, type LoadRequest, type LoadResult, runLoad } from '../lib/load.ts';
import { machineJitter, nativeLoadgen, nativeLoadgenMissing, runPaced } from '../lib/native.ts';
import { type PacedResult, runPacedInChild } from '../lib/paced.ts';
import { type Child, cpuMs, sleep, startChild } from '../lib/processes.ts';
import { API_KEY, type Settings, startControlPlane } from '../lib/settings.ts';
import { sameBytes, sameRowsPerCreate, startSqliteBaseline } from '../lib/sqlite-baseline.ts';
import { loadRow, type Row, verdict } from '../lib/table.ts';

let uniqueCounter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid.toString(36)}-${((uniqueCounter += 1)).toString(36)}`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

type Key =
  | 'fixed'
  | 'sqliteGet'
  | 'getRevision'
  | 'getDeployment'
  | 'sqliteCreate'
  | 'sqliteCreateGrouped'
  | 'sqliteCreateRows'
  | 'post'
  | 'patch'
  | 'pgGetRevision'
  | 'pgGetDeployment'
  | 'pgPost'
  | 'pgPatch';
/** `on`: the process answering (its URL; its CPU time, which the paced GET revision rows report). */
type Scenario = { key: Key; on: Child; requests: LoadRequest[] };

/** The hot paths' targets, judged on ratios taken in one run (see bench/README.md). */
export const HOT_TARGETS = { getRevisionRatio: 0.65, getRevisionOpenP99Ms: 2, postRatio: 0.75 } as const;

/**
 * The request paths: both baselines and the real server run at the same time (idle processes cost
 * nothing), and each round measures every scenario once, one after the other, so a baseline and
 * the figure compared with it are taken seconds apart. Ratios are the median of the per-round
 * ratios, which holds on a machine whose load changes from minute to minute.
 *
 * The SQLite baseline opens a copy of the server's own database, made once the server has created
 * its deployments, and runs the store's statements on the same rows: the GET answers the same
 * bytes (checked below before anything is measured) and the POST writes the same three rows in one
 * transaction. The open-loop rows are paced (bench/lib/paced.ts), not autocannon's overallRate.
 */
export async function hotPaths(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const children: Child[] = [];
  let postgres: TestPostgres | undefined;
  try {
    const fixed = await startChild('bench/baselines/http-fixed.mjs', {});
    children.push(fixed);
    const server = await startControlPlane(settings);
    children.push(server);

    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const deployments: Array<{ id: string; revisionId: string }> = [];
    let tenantId = '';
    for (let i = 0; i < 100; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(unique('hot'), fx.integrationId));
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      deployments.push({ id: created.body.id, revisionId: created.body.latest_revision_id });
      tenantId = created.body.tenant_id;
    }
    // The revisions take their first step right after each answer; let them settle before the copy.
    await sleep(500);
    const startBaseline = async (name: string, groupCommit: boolean, sameRows = false) => {
      const child = await startSqliteBaseline({
        serverDatabasePath: server.databasePath,
        tenantId,
        synchronous: settings.synchronous,
        groupCommit,
        sameRows,
        name,
      });
      children.push(child);
      return child;
    };
    const sqlite = await startBaseline('baseline.db', false);
    // The same, its creates committed in groups as the server's SQLite store commits them; a copy
    // of its own, so that the two baselines never wait for each other's writes.
    const sqliteGrouped = await startBaseline('baseline-grouped.db', true);
    // The same, grouped, writing every row the server's create writes (its audit entry, the sandbox's
    // first step and log line): the row-for-row ratio beside the old one (hot-paths-round-5-create.md).
    const sqliteRows = await startBaseline('baseline-rows.db', true, true);

    const headers = { 'x-api-key': API_KEY };
    const revisionPath = (d: { id: string; revisionId: string }) => `/v2/deployments/${d.id}/revisions/${d.revisionId}`;
    await sameBytes(server.url, sqlite.url, revisionPath(deployments[0]!), headers);

    const createBody = () => JSON.stringify(githubBody(unique('post'), fx.integrationId));
    // The same bodies as data, for the paced generator's own process: `{{unique}}` made unique per request.
    const createTemplate = JSON.stringify(githubBody('post-{{unique}}', fx.integrationId));
    const post: LoadRequest = { method: 'POST', path: '/v2/deployments', headers: { ...headers, 'content-type': 'application/json' }, body: createBody };
    log(`hot paths: ${await sameRowsPerCreate({ url: server.url, databasePath: server.databasePath, post }, { ...sqliteRows, post })}`);
    const scenarios: Scenario[] = [
      { key: 'fixed', on: fixed, requests: [{ method: 'GET', path: '/' }] },
      { key: 'sqliteGet', on: sqlite, requests: deployments.map((d) => ({ method: 'GET' as const, path: revisionPath(d) })) },
      { key: 'getRevision', on: server, requests: deployments.map((d) => ({ method: 'GET' as const, path: revisionPath(d), headers })) },
      { key: 'getDeployment', on: server, requests: deployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}`, headers })) },
      { key: 'sqliteCreate', on: sqlite, requests: [{ method: 'POST', path: '/v2/deployments', body: createBody, bodyTemplate: createTemplate }] },
      {
        key: 'sqliteCreateGrouped',
        on: sqliteGrouped,
        requests: [{ method: 'POST', path: '/v2/deployments', body: createBody, bodyTemplate: createTemplate }],
      },
      {
        key: 'sqliteCreateRows',
        on: sqliteRows,
        requests: [{ method: 'POST', path: '/v2/deployments', body: createBody, bodyTemplate: createTemplate }],
      },
      { key: 'post', on: server, requests: [{ method: 'POST', path: '/v2/deployments', headers, body: createBody, bodyTemplate: createTemplate }] },
      {
        key: 'patch',
        on: server,
        requests: deployments.map((d) => ({
          method: 'PATCH' as const,
          path: `/v2/deployments/${d.id}`,
          headers,
          body: () => JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: unique('sk') }] }),
          bodyTemplate: JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-{{unique}}' }] }),
        })),
      },
    ];

    // --backend=postgres: the same API scenarios on a server whose store is PostgreSQL, measured in
    // the same rounds; figures beside the SQLite server's (the baselines, and so the targets, are SQLite's).
    if (settings.postgres) {
      // fsync on, as SQLite's synchronous=FULL: an acknowledged create is on disk either way.
      postgres = await startTestPostgres({ durable: true, url: process.env.BENCH_DATABASE_URL });
      const pgServer = await startControlPlane(settings, { databaseUrl: await createTestDatabase(postgres.adminUrl) });
      children.push(pgServer);
      const pgApi = apiClient(pgServer.url, API_KEY);
      const pgFx = await workspaceFixtures(pgApi);
      const pgDeployments: Array<{ id: string; revisionId: string }> = [];
      for (let i = 0; i < 100; i += 1) {
        const created = await pgApi.post('/v2/deployments', githubBody(unique('hot-pg'), pgFx.integrationId));
        if (created.status !== 201) throw new Error(`create on PostgreSQL: ${created.status} ${JSON.stringify(created.body)}`);
        pgDeployments.push({ id: created.body.id, revisionId: created.body.latest_revision_id });
      }
      const pgCreateBody = () => JSON.stringify(githubBody(unique('post-pg'), pgFx.integrationId));
      const pgCreateTemplate = JSON.stringify(githubBody('post-pg-{{unique}}', pgFx.integrationId));
      scenarios.push(
        { key: 'pgGetRevision', on: pgServer, requests: pgDeployments.map((d) => ({ method: 'GET' as const, path: revisionPath(d), headers })) },
        { key: 'pgGetDeployment', on: pgServer, requests: pgDeployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}`, headers })) },
        { key: 'pgPost', on: pgServer, requests: [{ method: 'POST', path: '/v2/deployments', headers, body: pgCreateBody, bodyTemplate: pgCreateTemplate }] },
        {
          key: 'pgPatch',
          on: pgServer,
          requests: pgDeployments.map((d) => ({
            method: 'PATCH' as const,
            path: `/v2/deployments/${d.id}`,
            headers,
            body: () => JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: unique('sk') }] }),
            bodyTemplate: JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-{{unique}}' }] }),
          })),
        },
      );
    }

    const load = (s: Scenario, seconds: number) => runLoad(s.on.url, { connections: settings.connections, seconds, requests: s.requests });
    log(`hot paths: warm-up ${settings.warmupSeconds} s each`);
    for (const s of scenarios) await load(s, settings.warmupSeconds);
    const rounds = new Map<Key, LoadResult[]>(scenarios.map((s) => [s.key, []]));
    for (let round = 0; round < settings.runs; round += 1) {
      for (const s of scenarios) rounds.get(s.key)!.push(await load(s, settings.seconds));
      log(`  round ${round + 1}/${settings.runs}: ${scenarios.map((s) => `${s.key} ${Math.round(rounds.get(s.key)!.at(-1)!.rps)}`).join(', ')} req/s`);
    }
    /** The run with the median throughput: its latencies come with it, so the row is one real run. */
    const closed = (key: Key): LoadResult => {
      const runs = rounds.get(key)!;
      const sorted = [...runs].sort((a, b) => a.rps - b.rps);
      return { ...sorted[Math.floor(sorted.length / 2)]!, failures: runs.reduce((n, r) => n + r.failures, 0) };
    };
    /** Median over rounds of ours / baseline, each pair measured within seconds of each other. */
    const ratio = (ours: Key, base: Key) => median(rounds.get(ours)!.map((r, i) => r.rps / rounds.get(base)![i]!.rps));
    const pct = (value: number) => `${Math.round(value * 100)}%`;

    // The C generator decides the paced rows (bench/lib/native.ts): the Node one adds ~1.4 ms of
    // its own to every request's latency (its p50 against a bare server 1.5 ms, the C generator's
    // 0.1 ms). The Node one runs beside it in the first round, at the same pace, and is logged, so
    // that the two methods are read in one run.
    const native = nativeLoadgen() !== null;
    log(
      `hot paths: paced open loop at 50% of each median max, ${settings.pacedRounds} round(s) of ${settings.openSeconds} s, by ` +
        (native ? 'the C generator (bench/native/loadgen.c), the Node generator beside it in round 1' : `the Node generator: ${nativeLoadgenMissing}`),
    );
    // The machine's own floor under a paced p99: how late a process with nothing else to do wakes.
    const jitter = native ? await machineJitter(5) : null;
    if (jitter)
      log(
        `  the machine, idle servers: a 200 µs sleep woke p99 ${jitter.p99Ms.toFixed(2)} ms late, at worst ${jitter.maxMs.toFixed(1)} ms; ${jitter.over2MsPerSecond.toFixed(1)} wake-ups a second ≥ 2 ms late`,
      );
    const pacedRuns = new Map<Key, PacedResult[]>(scenarios.map((s) => [s.key, []]));
    // Each paced row runs at half of its own maximum, so the bare servers run at two to three times
    // GET revision's rate: their p99 is the floor at the same utilization. The floor at the same
    // load is the bare SQLite server paced at GET revision's own rate, measured in every round too.
    const sqliteGet = scenarios.find((s) => s.key === 'sqliteGet')!;
    const sameRateFloor: PacedResult[] = [];
    // How busy a server is while paced (its CPU time over the run's wall time): at half of the
    // closed-loop maximum it is not half busy, because each request then wakes it on its own where
    // under saturation one wake-up reads many. Reported for GET revision and its same-rate floor.
    const busyShare = { getRevision: [] as number[], floor: [] as number[] };
    const pacedBusy = async (s: Scenario, options: LoadOptions & { rate: number }, into: keyof typeof busyShare) => {
      const [cpuBefore, wallBefore] = [cpuMs(s.on.pid), performance.now()];
      const result = await runPaced(s.on.url, options);
      busyShare[into].push((cpuMs(s.on.pid) - cpuBefore) / (performance.now() - wallBefore));
      return result;
    };
    const pctOfCore = (share: number) => `${Math.round(share * 100)}%`;
    const busy = (into: keyof typeof busyShare) => `${pctOfCore(busyShare[into].at(-1)!)} of a core busy`;
    const describe = (r: PacedResult) =>
      `p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} ms, from send ${r.p99FromSendMs.toFixed(2)} ms (generator behind schedule: p99 ${r.lateP99Ms.toFixed(2)} ms, at most ${r.lateMs.toFixed(1)} ms; ` +
      `longest silence ${r.longestSilenceMs.toFixed(1)} ms at ${(r.longestSilenceAtMs / 1000).toFixed(2)} s${r.reconnects ? `; ${r.reconnects} connections reopened` : ''})`;
    for (let round = 0; round < settings.pacedRounds; round += 1) {
      for (const s of scenarios) {
        const options = {
          connections: settings.connections,
          seconds: settings.openSeconds,
          requests: s.requests,
          rate: Math.max(1, Math.round(closed(s.key).rps / 2)),
        };
        const result = s.key === 'getRevision' ? await pacedBusy(s, options, 'getRevision') : await runPaced(s.on.url, options);
        pacedRuns.get(s.key)!.push(result);
        log(`  round ${round + 1}: ${s.key} at ${Math.round(result.rps)}/s: ${describe(result)}${s.key === 'getRevision' ? `; ${busy('getRevision')}` : ''}`);
        if (native && round === 0) log(`    the Node generator, same pace: ${describe(await runPacedInChild(s.on.url, options))}`);
        if (s.key === 'getRevision') {
          const floor = await pacedBusy(sqliteGet, { ...options, requests: sqliteGet.requests }, 'floor');
          sameRateFloor.push(floor);
          log(`  round ${round + 1}: sqliteGet at getRevision's ${Math.round(floor.rps)}/s: ${describe(floor)}; ${busy('floor')}`);
        }
      }
    }
    /** The paced run with the median p99: a real run, its other figures with it. */
    const open = new Map<Key, PacedResult>(
      scenarios.map((s) => {
        const sorted = [...pacedRuns.get(s.key)!].sort((a, b) => a.p99 - b.p99);
        return [s.key, sorted[Math.floor(sorted.length / 2)]!];
      }),
    );
    const pacedP99s = (key: Key) =>
      pacedRuns
        .get(key)!
        .map((r) => r.p99.toFixed(2))
        .join(', ');

    const readRatio = ratio('getRevision', 'sqliteGet');
    // Judged against the baseline that commits as the server does (grouped): against one commit per
    // create the server would be credited with the disk waits it shares, not with its own cost.
    const writeRatio = ratio('post', 'sqliteCreateGrouped');
    const openP99 = open.get('getRevision')!.p99;
    /** The paced row of `key`; `noteEnd` is added to its note. */
    const openRow = (key: Key, extra: Partial<Row> = {}, noteEnd = '') =>
      loadRow('  paced open loop at 50% of max', open.get(key)!, {
        note:
          `${native ? 'C generator' : 'Node generator'}; the run with the median p99 of ${settings.pacedRounds} (p99s ${pacedP99s(key)} ms); ` +
          `generator behind schedule: p99 ${open.get(key)!.lateP99Ms.toFixed(2)} ms, at most ${open.get(key)!.lateMs.toFixed(1)} ms; p99 from send ${open.get(key)!.p99FromSendMs.toFixed(2)} ms${noteEnd}`,
        ...extra,
      });
    const pgRows: Row[] = !settings.postgres
      ? []
      : [
          loadRow('PostgreSQL: GET revision', closed('pgGetRevision'), {
            ratio: `${pct(ratio('pgGetRevision', 'getRevision'))} of the SQLite server's; ${pct(ratio('pgGetRevision', 'sqliteGet'))} of SQLite GET`,
          }),
          openRow('pgGetRevision'),
          loadRow('PostgreSQL: GET deployment', closed('pgGetDeployment'), {
            ratio: `${pct(ratio('pgGetDeployment', 'getDeployment'))} of the SQLite server's`,
          }),
          openRow('pgGetDeployment'),
          loadRow('PostgreSQL: POST deployment', closed('pgPost'), {
            ratio: `${pct(ratio('pgPost', 'post'))} of the SQLite server's; ${pct(ratio('pgPost', 'sqliteCreate'))} of the SQLite transaction`,
          }),
          openRow('pgPost'),
          loadRow('PostgreSQL: PATCH creating a revision', closed('pgPatch'), { ratio: `${pct(ratio('pgPatch', 'patch'))} of the SQLite server's` }),
          openRow('pgPatch'),
        ];
    return [
      loadRow('baseline node:http fixed JSON', closed('fixed')),
      openRow('fixed'),
      loadRow('baseline node:http+SQLite GET revision (same SQL, same bytes)', closed('sqliteGet')),
      openRow('sqliteGet'),
      loadRow('baseline node:http+SQLite create (same 3-row transaction)', closed('sqliteCreate')),
      openRow('sqliteCreate'),
      loadRow('  the same, commits grouped as the server groups them', closed('sqliteCreateGrouped')),
      openRow('sqliteCreateGrouped'),
      loadRow('  the same, grouped, row for row (audit entry, first step and its log line)', closed('sqliteCreateRows')),
      openRow('sqliteCreateRows'),
      loadRow('GET revision (Action hot path)', closed('getRevision'), {
        ratio: `${pct(readRatio)} of SQLite GET; ${pct(ratio('getRevision', 'fixed'))} of fixed`,
        target: `≥ ${pct(HOT_TARGETS.getRevisionRatio)}`,
        verdict: verdict(readRatio >= HOT_TARGETS.getRevisionRatio),
      }),
      openRow(
        'getRevision',
        { target: `p99 < ${HOT_TARGETS.getRevisionOpenP99Ms} ms`, verdict: verdict(openP99 < HOT_TARGETS.getRevisionOpenP99Ms) },
        `; the bare SQLite server at this rate: p99 ${sameRateFloor.map((r) => r.p99.toFixed(2)).join(', ')} ms` +
          `; busy while paced (CPU time / wall time, per round): the server ${busyShare.getRevision.map(pctOfCore).join(', ')}, the bare SQLite server at this rate ${busyShare.floor.map(pctOfCore).join(', ')} of a core` +
          (jitter
            ? `; the machine (servers idle, 5 s): ${jitter.over2MsPerSecond.toFixed(1)} wake-ups a second ≥ 2 ms late, worst ${jitter.maxMs.toFixed(1)} ms`
            : ''),
      ),
      loadRow('GET deployment', closed('getDeployment'), {
        ratio: `${pct(ratio('getDeployment', 'sqliteGet'))} of SQLite GET; ${pct(ratio('getDeployment', 'fixed'))} of fixed`,
      }),
      openRow('getDeployment'),
      loadRow('POST deployment', closed('post'), {
        ratio:
          `${pct(writeRatio)} of the same transaction, commits grouped alike; ${pct(ratio('post', 'sqliteCreateRows'))} of it row for row, grouped alike; ` +
          `${pct(ratio('post', 'sqliteCreate'))} of it committed per create`,
        target: `≥ ${pct(HOT_TARGETS.postRatio)}`,
        verdict: verdict(writeRatio >= HOT_TARGETS.postRatio),
      }),
      openRow('post'),
      loadRow('PATCH creating a revision', closed('patch'), { ratio: `${pct(ratio('patch', 'sqliteCreate'))} of the create transaction` }),
      openRow('patch'),
      ...pgRows,
    ];
  } finally {
    for (const child of children.reverse()) await child.stop();
    await postgres?.stop();
  }
}
