/**
 * GET revision at half of its max rate, paced (bench/lib/native.ts, else bench/lib/paced.ts), on a server that holds N
 * revisions in progress (stages of an hour, as in the hot-paths scenario): what the lease renewal
 * of held revisions costs the paced p99. The hot-paths scenario holds ~20,000 by the time its paced
 * rows run (its POST rounds create them). Run: `node bench/paced-held-revisions.ts 100` and
 * `node bench/paced-held-revisions.ts 20000`, one after the other; 3 paced rounds each.
 */
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { runLoad } from './lib/load.ts';
import { runPaced } from './lib/native.ts';
import { removeTempDirs } from './lib/processes.ts';
import { API_KEY, settingsFrom, startControlPlane } from './lib/settings.ts';

const held = Number(process.argv[2] ?? 100);
const server = await startControlPlane(settingsFrom([]));
try {
  const api = apiClient(server.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const deployments: Array<{ id: string; revisionId: string }> = [];
  for (let i = 0; i < held; i += 1) {
    const created = await api.post('/v2/deployments', githubBody(`held-${i}-${Date.now().toString(36)}`, fx.integrationId));
    if (created.status !== 201) throw new Error(`create: ${created.status}`);
    deployments.push({ id: created.body.id, revisionId: created.body.latest_revision_id });
  }
  const requests = deployments
    .slice(0, 100)
    .map((d) => ({ method: 'GET' as const, path: `/v2/deployments/${d.id}/revisions/${d.revisionId}`, headers: { 'x-api-key': API_KEY } }));
  await runLoad(server.url, { connections: 32, seconds: 3, requests });
  const max = await runLoad(server.url, { connections: 32, seconds: 4, requests });
  for (let round = 1; round <= 3; round += 1) {
    const options = { connections: 32, seconds: 6, requests, rate: Math.round(max.rps / 2) };
    // The C generator where it builds (bench/lib/native.ts), as the hot-paths scenario.
    const r = await runPaced(server.url, options);
    console.log(
      `${held} held, round ${round}: max ${Math.round(max.rps)}/s; paced ${Math.round(r.rps)}/s p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} ms, from send ${r.p99FromSendMs.toFixed(2)} ms; longest silence ${r.longestSilenceMs.toFixed(1)} ms; generator late p99 ${r.lateP99Ms.toFixed(2)} ms; failures ${r.failures}`,
    );
  }
} finally {
  await server.stop();
  removeTempDirs();
}
