import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { closedLoop, type LoadRequest, type LoadResult } from '../lib/load.ts';
import { queryPlan, seedDatabase } from '../lib/seed.ts';
import { API_KEY, startControlPlane, type Settings } from '../lib/settings.ts';
import { loadRow, verdict, type Row } from '../lib/table.ts';

type Figures = { listDeployments: LoadResult; getDeployment: LoadResult; listRevisions: LoadResult; getRevision: LoadResult; restartMs: number };

/**
 * Builds a database of `count` deployments (× revisionsEach revisions) — one made through the API,
 * stopped, the rest copied from it straight into the file — restarts the server on it and measures
 * the reads whose cost could grow with the table: the first page of the list, GET by id, and a
 * deployment's revisions.
 */
async function measureAt(count: number, settings: Settings, log: (line: string) => void): Promise<{ figures: Figures; plan: string }> {
  const first = await startControlPlane();
  const api = apiClient(first.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const template = await api.post('/v2/deployments', githubBody(`template-${count}`, fx.integrationId));
  if (template.status !== 201) throw new Error(`create: ${template.status} ${JSON.stringify(template.body)}`);
  await first.stop();

  const seededAt = performance.now();
  const sample = seedDatabase(first.databasePath, { templateId: template.body.id, deployments: count - 1, revisionsEach: settings.scale.revisionsEach, sample: 100 });
  log(`  seeded ${count - 1} deployments × ${settings.scale.revisionsEach} revisions in ${((performance.now() - seededAt) / 1000).toFixed(1)} s`);
  const tenantId = template.body.tenant_id as string;
  const plan = queryPlan(
    first.databasePath,
    'SELECT * FROM deployments WHERE tenant_id = @tenant ORDER BY created_at DESC, rowid DESC LIMIT 20 OFFSET 0',
    { tenant: tenantId },
  );

  const server = await startControlPlane({ databasePath: first.databasePath });
  try {
    const headers = { 'x-api-key': API_KEY };
    const load = (requests: LoadRequest[]) =>
      closedLoop(server.url, { connections: settings.connections, seconds: Math.max(2, settings.seconds - 2), runs: settings.runs, warmupSeconds: settings.warmupSeconds, requests });
    const figures: Figures = {
      restartMs: server.startMs,
      listDeployments: await load([{ method: 'GET', path: '/v2/deployments?limit=20&offset=0', headers }]),
      getDeployment: await load(sample.deploymentIds.map((id) => ({ method: 'GET' as const, path: `/v2/deployments/${id}`, headers }))),
      listRevisions: await load(sample.deploymentIds.map((id) => ({ method: 'GET' as const, path: `/v2/deployments/${id}/revisions?limit=20`, headers }))),
      getRevision: await load(sample.revisions.map((r) => ({ method: 'GET' as const, path: `/v2/deployments/${r.deploymentId}/revisions/${r.revisionId}`, headers }))),
    };
    return { figures, plan };
  } finally {
    await server.stop();
  }
}

export async function scale(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const { small, large, revisionsEach } = settings.scale;
  log(`scale: ${small} vs ${large} deployments`);
  const a = await measureAt(small, settings, log);
  const b = await measureAt(large, settings, log);
  log(`  list plan at ${large}: ${b.plan}`);
  const label = (n: number) => (n >= 1000 ? `${n / 1000}k` : String(n));
  const sizes = `${label(large)} dep / ${label(large * revisionsEach)} rev`;
  const pair = (name: string, pick: (f: Figures) => LoadResult): Row[] => {
    const x = pick(a.figures);
    const y = pick(b.figures);
    const slower = Math.max(y.p50 / x.p50, x.rps / y.rps);
    return [
      loadRow(`${name} @ ${label(small)} dep`, x),
      loadRow(`${name} @ ${sizes}`, y, { ratio: `${Math.round((y.rps / x.rps) * 100)}% of the ${label(small)} req/s`, target: 'within 2× of 1k', verdict: verdict(slower <= 2) }),
    ];
  };
  return [
    ...pair('list deployments, first page', (f) => f.listDeployments),
    ...pair('GET deployment', (f) => f.getDeployment),
    ...pair('list revisions, first page', (f) => f.listRevisions),
    ...pair('GET revision', (f) => f.getRevision),
    { scenario: `restart on ${sizes} (spawn → listening)`, p50: b.figures.restartMs, note: `${a.figures.restartMs.toFixed(0)} ms at ${label(small)}` },
  ];
}
