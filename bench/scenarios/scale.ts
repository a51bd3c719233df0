import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { type LoadRequest, type LoadResult, runLoad } from '../lib/load.ts';
import { queryPlan, seedDatabase } from '../lib/seed.ts';
import { API_KEY, type ControlPlane, type Settings, startControlPlane } from '../lib/settings.ts';
import { loadRow, type Row, verdict } from '../lib/table.ts';

type Prepared = { databasePath: string; deploymentIds: string[]; revisions: Array<{ deploymentId: string; revisionId: string }>; plan: string };

/**
 * A database of `count` deployments (× revisionsEach revisions): one deployment is made through
 * the API, the server stopped, and the rest copied from it straight into the file.
 */
async function prepare(count: number, settings: Settings, log: (line: string) => void): Promise<Prepared> {
  const first = await startControlPlane(settings);
  const api = apiClient(first.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const template = await api.post('/v2/deployments', githubBody(`template-${count}`, fx.integrationId));
  if (template.status !== 201) throw new Error(`create: ${template.status} ${JSON.stringify(template.body)}`);
  await first.stop();
  const seededAt = performance.now();
  const sample = seedDatabase(first.databasePath, {
    templateId: template.body.id,
    deployments: count - 1,
    revisionsEach: settings.scale.revisionsEach,
    sample: 100,
  });
  log(`  seeded ${count - 1} deployments × ${settings.scale.revisionsEach} revisions in ${((performance.now() - seededAt) / 1000).toFixed(1)} s`);
  const plan = queryPlan(first.databasePath, 'SELECT * FROM deployments WHERE tenant_id = @tenant ORDER BY created_at DESC, rowid DESC LIMIT 20 OFFSET 0', {
    tenant: template.body.tenant_id,
  });
  return { databasePath: first.databasePath, ...sample, plan };
}

type Key = 'listDeployments' | 'getDeployment' | 'listRevisions' | 'getRevision';

function requestsFor(key: Key, p: Prepared): LoadRequest[] {
  const headers = { 'x-api-key': API_KEY };
  switch (key) {
    case 'listDeployments':
      return [{ method: 'GET', path: '/v2/deployments?limit=20&offset=0', headers }];
    case 'getDeployment':
      return p.deploymentIds.map((id) => ({ method: 'GET', path: `/v2/deployments/${id}`, headers }));
    case 'listRevisions':
      return p.deploymentIds.map((id) => ({ method: 'GET', path: `/v2/deployments/${id}/revisions?limit=20`, headers }));
    case 'getRevision':
      return p.revisions.map((r) => ({ method: 'GET', path: `/v2/deployments/${r.deploymentId}/revisions/${r.revisionId}`, headers }));
  }
}

/**
 * The reads whose cost could grow with the table — first page of the list, GET by id, a
 * deployment's revisions — on a small and a large database, both servers up at once and measured
 * alternately, round by round.
 */
export async function scale(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const { small, large, revisionsEach } = settings.scale;
  log(`scale: ${small} vs ${large} deployments`);
  const a = await prepare(small, settings, log);
  const b = await prepare(large, settings, log);
  log(`  list plan at ${large}: ${b.plan}`);
  const servers: ControlPlane[] = [];
  try {
    const sa = await startControlPlane(settings, { databasePath: a.databasePath });
    servers.push(sa);
    const sb = await startControlPlane(settings, { databasePath: b.databasePath });
    servers.push(sb);
    const keys: Key[] = ['listDeployments', 'getDeployment', 'listRevisions', 'getRevision'];
    const seconds = Math.max(2, settings.seconds - 1);
    const load = (server: ControlPlane, p: Prepared, key: Key, s: number) =>
      runLoad(server.url, { connections: settings.connections, seconds: s, requests: requestsFor(key, p) });
    for (const key of keys) {
      await load(sa, a, key, settings.warmupSeconds);
      await load(sb, b, key, settings.warmupSeconds);
    }
    const results = new Map<string, LoadResult[]>();
    const push = (name: string, r: LoadResult) => results.set(name, [...(results.get(name) ?? []), r]);
    const rounds = Math.max(1, settings.runs - 2);
    for (let round = 0; round < rounds; round += 1) {
      for (const key of keys) {
        push(`a:${key}`, await load(sa, a, key, seconds));
        push(`b:${key}`, await load(sb, b, key, seconds));
      }
      log(
        `  round ${round + 1}/${rounds}: ${keys.map((k) => `${k} ${Math.round(results.get(`a:${k}`)!.at(-1)!.rps)}/${Math.round(results.get(`b:${k}`)!.at(-1)!.rps)}`).join(', ')} req/s (small/large)`,
      );
    }
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const medianRun = (name: string) => [...results.get(name)!].sort((x, y) => x.rps - y.rps)[Math.floor(results.get(name)!.length / 2)]!;
    const label = (n: number) => (n >= 1000 ? `${n / 1000}k` : String(n));
    const sizes = `${label(large)} dep / ${label(large * revisionsEach)} rev`;
    const names: Record<Key, string> = {
      listDeployments: 'list deployments, first page',
      getDeployment: 'GET deployment',
      listRevisions: 'list revisions, first page',
      getRevision: 'GET revision',
    };
    const rows: Row[] = [];
    for (const key of keys) {
      const ratio = median(results.get(`b:${key}`)!.map((r, i) => r.rps / results.get(`a:${key}`)![i]!.rps));
      rows.push(
        loadRow(`${names[key]} @ ${label(small)} dep`, medianRun(`a:${key}`)),
        loadRow(`${names[key]} @ ${sizes}`, medianRun(`b:${key}`), {
          ratio: `${Math.round(ratio * 100)}% of the ${label(small)} req/s`,
          target: 'within 2× of 1k',
          verdict: verdict(ratio >= 0.5),
        }),
      );
    }
    rows.push({
      scenario: `restart on ${sizes} (spawn → listening)`,
      p50: sb.startMs,
      note: `${sa.startMs.toFixed(0)} ms on ${label(small)}; list query plan: ${b.plan}`,
    });
    return rows;
  } finally {
    for (const server of servers) await server.stop();
  }
}
