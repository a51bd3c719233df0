import { join } from 'node:path';
import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { seedId } from '../lib/baseline-ids.ts';
import { runLoad, type LoadRequest, type LoadResult } from '../lib/load.ts';
import { startChild, tempDir, type Child } from '../lib/processes.ts';
import { API_KEY, startControlPlane, type Settings } from '../lib/settings.ts';
import { loadRow, verdict, type Row } from '../lib/table.ts';

let uniqueCounter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid.toString(36)}-${(uniqueCounter += 1).toString(36)}`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

type Key = 'fixed' | 'sqliteGet' | 'getRevision' | 'getDeployment' | 'sqliteInsert' | 'post' | 'patch';
type Scenario = { key: Key; url: string; requests: LoadRequest[] };

/**
 * The request paths: both baselines and the real server run at the same time (idle processes cost
 * nothing), and each round measures every scenario once, one after the other, so a baseline and
 * the figure compared with it are taken seconds apart. Ratios are the median of the per-round
 * ratios, which holds on a machine whose load changes from minute to minute.
 */
export async function hotPaths(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const children: Child[] = [];
  try {
    const fixed = await startChild('bench/baselines/http-fixed.ts', {});
    children.push(fixed);
    const sqlite = await startChild('bench/baselines/http-sqlite.ts', { BASELINE_DB: join(tempDir(), 'baseline.db'), BASELINE_ROWS: '1000', BASELINE_SYNCHRONOUS: settings.synchronous });
    children.push(sqlite);
    const server = await startControlPlane(settings);
    children.push(server);

    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const deployments: Array<{ id: string; revisionId: string }> = [];
    for (let i = 0; i < 100; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(unique('hot'), fx.integrationId));
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      deployments.push({ id: created.body.id, revisionId: created.body.latest_revision_id });
    }
    const headers = { 'x-api-key': API_KEY };
    const scenarios: Scenario[] = [
      { key: 'fixed', url: fixed.url, requests: [{ method: 'GET', path: '/' }] },
      { key: 'sqliteGet', url: sqlite.url, requests: Array.from({ length: 100 }, (_, i) => ({ method: 'GET' as const, path: `/rows/${seedId(i * 10)}` })) },
      { key: 'getRevision', url: server.url, requests: deployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}/revisions/${d.revisionId}`, headers })) },
      { key: 'getDeployment', url: server.url, requests: deployments.map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}`, headers })) },
      {
        key: 'sqliteInsert',
        url: sqlite.url,
        requests: [{ method: 'POST', path: '/rows', body: () => JSON.stringify({ name: unique('row'), config: { repo_ref: 'main', graph_config_path: 'langgraph.json' } }) }],
      },
      { key: 'post', url: server.url, requests: [{ method: 'POST', path: '/v2/deployments', headers, body: () => JSON.stringify(githubBody(unique('post'), fx.integrationId)) }] },
      {
        key: 'patch',
        url: server.url,
        requests: deployments.map((d) => ({
          method: 'PATCH' as const,
          path: `/v2/deployments/${d.id}`,
          headers,
          body: () => JSON.stringify({ secrets: [{ name: 'OPENAI_API_KEY', value: unique('sk') }] }),
        })),
      },
    ];

    const load = (s: Scenario, seconds: number, rate?: number) => runLoad(s.url, { connections: settings.connections, seconds, requests: s.requests, ...(rate ? { rate } : {}) });
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

    log(`hot paths: open loop at 50% of each median max, ${settings.openSeconds} s each`);
    const open = new Map<Key, LoadResult>();
    for (const s of scenarios) open.set(s.key, await load(s, settings.openSeconds, Math.max(1, Math.round(closed(s.key).rps / 2))));

    const readRatio = ratio('getRevision', 'sqliteGet');
    const writeRatio = ratio('post', 'sqliteInsert');
    const openRow = (key: Key, extra: Partial<Row> = {}) => loadRow('  open loop at 50% of max', open.get(key)!, extra);
    return [
      loadRow('baseline node:http fixed JSON', closed('fixed')),
      openRow('fixed'),
      loadRow('baseline node:http+SQLite GET row', closed('sqliteGet')),
      openRow('sqliteGet'),
      loadRow('baseline node:http+SQLite INSERT row', closed('sqliteInsert')),
      openRow('sqliteInsert'),
      loadRow('GET revision (Action hot path)', closed('getRevision'), {
        ratio: `${pct(readRatio)} of SQLite GET; ${pct(ratio('getRevision', 'fixed'))} of fixed`,
        target: '≥ 60% (stretch 75%)',
        verdict: verdict(readRatio >= 0.6) + (readRatio >= 0.75 ? ' (stretch too)' : ''),
      }),
      openRow('getRevision', { target: 'p99 < 5 ms', verdict: verdict(open.get('getRevision')!.p99 < 5) }),
      loadRow('GET deployment', closed('getDeployment'), { ratio: `${pct(ratio('getDeployment', 'sqliteGet'))} of SQLite GET; ${pct(ratio('getDeployment', 'fixed'))} of fixed` }),
      openRow('getDeployment'),
      loadRow('POST deployment', closed('post'), {
        ratio: `${pct(writeRatio)} of SQLite INSERT`,
        target: '≥ 40% (stretch 50%)',
        verdict: verdict(writeRatio >= 0.4) + (writeRatio >= 0.5 ? ' (stretch too)' : ''),
      }),
      openRow('post'),
      loadRow('PATCH creating a revision', closed('patch'), { ratio: `${pct(ratio('patch', 'sqliteInsert'))} of SQLite INSERT` }),
      openRow('patch'),
    ];
  } finally {
    for (const child of children.reverse()) await child.stop();
  }
}
