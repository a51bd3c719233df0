/**
 * Push → serving on a `local` listener for a commit that leaves the lock file unchanged: the real
 * server and agent as processes (bwrap sandbox, pasta, limits: the agent's defaults; production
 * agent server), the fixture app in a git repository over file://, npm's cache warm. The first
 * revision is built and served; then ROUNDS commits change only the graph's answer, each pushed as
 * a real signed GitHub push delivery (HMAC over the body, the App webhook's secret), and the time
 * until a run through the deployment's proxy streams the new answer is measured, with the stages
 * read from the revision's log (each line stamped when the agent saw it).
 *
 *   npm exec -c 'node bench/agent-push-to-serving.ts'        # ROUNDS=3
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { graphRepo, killLeftoverServers, localListener, startAgent } from '../test/agents/harness.ts';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { pushRounds } from './lib/push-rounds.ts';

const rounds = Number(process.env.ROUNDS ?? 3);
const secret = `bench-${crypto.randomUUID()}`;
const server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', GITHUB_WEBHOOK_SECRET: secret, RECONCILE_INTERVAL_MS: '0' });
const workDir = mkdtempSync(join(tmpdir(), 'cp-bench-push-'));
const api = apiClient(server.url, server.apiKey);
const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
const { integrationId, installationId } = await workspaceFixtures(api);
const { listenerId, token } = await localListener(api, workspaceId);
const agent = await startAgent({ url: server.url, token, listenerId, workDir });
try {
  const repo = graphRepo();
  const created = await api.post(
    '/v2/deployments',
    githubBody(uniqueName('push'), integrationId, {
      source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: true },
    }),
  );
  const id = created.body.id as string;
  const first = await revisionReaches(api, id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
  if (first.status !== 'DEPLOYED') throw new Error(`first revision ${first.status}: ${first.status_message}`);
  const url = (await api.get(`/v2/deployments/${id}`)).body.source_config.custom_url as string;
  const by = { webhook: { serverUrl: server.url, secret, installationId } };
  const results = await pushRounds({ api, proxyPort: agent.proxyPort, deploymentId: id, url, repo, rounds, by });
  const sorted = results.map((r) => r.push_to_serving_ms!).sort((a, b) => a - b);
  console.log(JSON.stringify({ benchmark: 'agent-push-to-serving', p50_ms: sorted[Math.floor((sorted.length - 1) / 2)], rounds: results }, null, 2));
} finally {
  await agent.stop('SIGINT');
  await server.kill('SIGTERM');
  killLeftoverServers(workDir);
}
