import { join } from 'node:path';
import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { seedId } from '../lib/baseline-ids.ts';
import { closedLoop, runLoad, type LoadRequest, type LoadResult } from '../lib/load.ts';
import { startChild, tempDir } from '../lib/processes.ts';
import { API_KEY, startControlPlane, type Settings } from '../lib/settings.ts';
import { loadRow, percent, verdict, type Row } from '../lib/table.ts';

type Measured = { closed: LoadResult & { all: number[] }; open: LoadResult };

/** Closed loop at full speed (median of runs), then an open-loop run at half that rate. */
async function measure(url: string, settings: Settings, requests: LoadRequest[]): Promise<Measured> {
  const closed = await closedLoop(url, { connections: settings.connections, seconds: settings.seconds, runs: settings.runs, warmupSeconds: settings.warmupSeconds, requests });
  const open = await runLoad(url, { connections: settings.connections, seconds: settings.openSeconds, rate: Math.max(1, Math.round(closed.rps / 2)), requests });
  return { closed, open };
}

let uniqueCounter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid.toString(36)}-${(uniqueCounter += 1).toString(36)}`;

/**
 * The request paths: both baselines and the real server, measured one after the other in the same
 * run, each process on its own: GET one row / a deployment / a revision, and the two writes.
 */
export async function hotPaths(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];

  log('baseline: node:http, fixed JSON body');
  const fixed = await startChild('bench/baselines/http-fixed.ts', {});
  let fixedGet: Measured;
  try {
    fixedGet = await measure(fixed.url, settings, [{ method: 'GET', path: '/' }]);
  } finally {
    await fixed.stop();
  }

  log('baseline: node:http + better-sqlite3');
  const sqlite = await startChild('bench/baselines/http-sqlite.ts', { BASELINE_DB: join(tempDir(), 'baseline.db'), BASELINE_ROWS: '1000' });
  let sqliteGet: Measured;
  let sqliteInsert: Measured;
  try {
    sqliteGet = await measure(
      sqlite.url,
      settings,
      Array.from({ length: 100 }, (_, i) => ({ method: 'GET' as const, path: `/rows/${seedId(i * 10)}` })),
    );
    sqliteInsert = await measure(sqlite.url, settings, [
      { method: 'POST', path: '/rows', body: () => JSON.stringify({ name: unique('row'), config: { repo_ref: 'main', graph_config_path: 'langgraph.json' } }) },
    ]);
  } finally {
    await sqlite.stop();
  }

  log('control plane: GET / POST / PATCH');
  const server = await startControlPlane();
  try {
    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const deployments: Array<{ id: string; revisionId: string }> = [];
    for (let i = 0; i < 100; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(unique('hot'), fx.integrationId));
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      deployments.push({ id: created.body.id, revisionId: created.body.latest_revision_id });
    }
    const headers = { 'x-api-key': API_KEY };
    const getDeployment = await measure(server.url, settings, deployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}`, headers })));
    const getRevision = await measure(
      server.url,
      settings,
      deployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}/revisions/${d.revisionId}`, headers })),
    );
    const post = await measure(server.url, settings, [{ method: 'POST', path: '/v2/deployments', headers, body: () => JSON.stringify(githubBody(unique('post'), fx.integrationId)) }]);
    const patch = await measure(
      server.url,
      settings,
      deployments.map((d) => ({
        method: 'PATCH' as const,
        path: `/v2/deployments/${d.id}`,
        headers,
        body: () => JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: unique('sk') }] }),
      })),
    );

    const readTarget = getRevision.closed.rps / sqliteGet.closed.rps;
    const writeTarget = post.closed.rps / sqliteInsert.closed.rps;
    rows.push(
      loadRow('baseline node:http fixed JSON', fixedGet.closed),
      loadRow('  open loop at 50% of max', fixedGet.open),
      loadRow('baseline node:http+SQLite GET row', sqliteGet.closed),
      loadRow('  open loop at 50% of max', sqliteGet.open),
      loadRow('baseline node:http+SQLite INSERT row', sqliteInsert.closed),
      loadRow('  open loop at 50% of max', sqliteInsert.open),
      loadRow('GET deployment', getDeployment.closed, { ratio: `${percent(getDeployment.closed.rps, sqliteGet.closed.rps)} of SQLite GET; ${percent(getDeployment.closed.rps, fixedGet.closed.rps)} of fixed` }),
      loadRow('  open loop at 50% of max', getDeployment.open),
      loadRow('GET revision (Action hot path)', getRevision.closed, {
        ratio: `${percent(getRevision.closed.rps, sqliteGet.closed.rps)} of SQLite GET; ${percent(getRevision.closed.rps, fixedGet.closed.rps)} of fixed`,
        target: '≥ 60% (stretch 75%)',
        verdict: verdict(readTarget >= 0.6) + (readTarget >= 0.75 ? ' (stretch too)' : ''),
      }),
      loadRow('  open loop at 50% of max', getRevision.open, { target: 'p99 < 5 ms', verdict: verdict(getRevision.open.p99 < 5) }),
      loadRow('POST deployment', post.closed, {
        ratio: `${percent(post.closed.rps, sqliteInsert.closed.rps)} of SQLite INSERT`,
        target: '≥ 40% (stretch 50%)',
        verdict: verdict(writeTarget >= 0.4) + (writeTarget >= 0.5 ? ' (stretch too)' : ''),
      }),
      loadRow('  open loop at 50% of max', post.open),
      loadRow('PATCH creating a revision', patch.closed, { ratio: `${percent(patch.closed.rps, sqliteInsert.closed.rps)} of SQLite INSERT` }),
      loadRow('  open loop at 50% of max', patch.open),
    );
    const runs = (m: Measured) => m.closed.all.join('/');
    log(`closed-loop runs (req/s): fixed ${runs(fixedGet)}, sqlite GET ${runs(sqliteGet)}, sqlite INSERT ${runs(sqliteInsert)}, GET deployment ${runs(getDeployment)}, GET revision ${runs(getRevision)}, POST ${runs(post)}, PATCH ${runs(patch)}`);
  } finally {
    await server.stop();
  }
  return rows;
}
