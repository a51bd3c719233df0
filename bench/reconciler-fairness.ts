/**
 * Reconciler fairness: how long after a commit to a reachable repository (workspace G) its `push`
 * revision exists, while another workspace (H) has K deployments whose repositories accept a
 * connection and never answer (a real loopback listener). K = 0 is the baseline of the same run;
 * the ratio to it is what matters (this machine is shared). Before the fix the reconciler read
 * URLs one after another, so G waited K × RECONCILE_TIMEOUT_MS (20 s) per pass.
 *
 *   node bench/reconciler-fairness.ts          # K = 0, 10, 100; ROUNDS=5 commits each
 */
import { createServer, type Socket } from 'node:net';
import { apiClient, eventually } from '../test/helpers/api.ts';
import { uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { localRemote } from '../test/webhooks/local-remote.ts';
import { pushDeployment } from '../test/webhooks/shared-setup.ts';

const rounds = Number(process.env.ROUNDS ?? 5);
const counts = (process.env.HANGING ?? '0,10,100').split(',').map(Number);
const intervalMs = 500;

const sockets = new Set<Socket>();
const listener = createServer((s) => {
  sockets.add(s);
  s.on('error', () => {});
  s.resume();
  s.on('close', () => sockets.delete(s));
});
await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
const port = (listener.address() as { port: number }).port;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const results: Array<{ hanging: number; median: number; max: number; peakOpen: number }> = [];

for (const hanging of counts) {
  const server = await startServerProcess({
    ALLOW_FILE_REPO_URLS: 'true',
    RECONCILE_ALLOWED_HOSTS: `127.0.0.1:${port}`,
    RECONCILE_INTERVAL_MS: String(intervalMs),
    SANDBOX_STAGE_MS: '50',
    LOG_LEVEL: 'info',
  });
  let peakOpen = 0;
  const sampler = setInterval(() => (peakOpen = Math.max(peakOpen, sockets.size)), 50);
  try {
    const api = apiClient(server.url, server.apiKey);
    const ws = await api.post('/v1/workspaces', { name: uniqueName('hostile') });
    const hostile = apiClient(server.url, server.apiKey, { 'x-tenant-id': ws.body.id });
    const hostileFx = await workspaceFixtures(hostile);
    for (let i = 0; i < hanging; i++) await pushDeployment(hostile, hostileFx.integrationId, `https://127.0.0.1:${port}/hostile/repo-${i}.git`);

    const remote = localRemote();
    const first = remote.commit('First version');
    const dep = await pushDeployment(api, (await workspaceFixtures(api)).integrationId, remote.url);
    await eventually(async () => (server.output().includes(`"deployment_id":"${dep.id}","branch":"main","head":"${first}"`) ? true : undefined), 120_000);
    const lags: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const sha = remote.commit(`Version ${round + 2}`);
      const committedAt = Date.now();
      await eventually(
        async () => {
          const revisions = await api.get(`/v2/deployments/${dep.id}/revisions?limit=5`);
          return revisions.body.resources.some((r: any) => r.source_revision_config.repo_commit_sha === sha) ? true : undefined;
        },
        300_000,
        20,
      );
      lags.push(Date.now() - committedAt);
    }
    results.push({ hanging, median: median(lags), max: Math.max(...lags), peakOpen });
    console.error(`K=${hanging}: ${lags.join(', ')} ms`);
  } finally {
    clearInterval(sampler);
    await server.kill('SIGKILL');
    for (const s of sockets) s.destroy();
  }
}
listener.close();

const base = results[0]!.median;
console.log(`\nreconciler: commit → push revision, RECONCILE_INTERVAL_MS=${intervalMs}, RECONCILE_CONCURRENCY=8, ${rounds} commits per row`);
console.log('| hanging URLs of another workspace | median ms | max ms | ratio to K=0 | peak hanging connections |');
console.log('|---|---|---|---|---|');
for (const r of results) console.log(`| ${r.hanging} | ${r.median} | ${r.max} | ${(r.median / base).toFixed(2)} | ${r.peakOpen} |`);
