/**
 * Push → serving on a `local` listener for a commit that leaves the lock file unchanged: the real
 * server and agent as processes (bwrap sandbox, pasta, limits: the agent's defaults; production
 * agent server), the fixture app in a git repository over file://, npm's cache warm. The first
 * revision is built and served; then ROUNDS commits change only the graph's answer, each pushed as
 * a real signed GitHub push delivery (HMAC over the body, the App webhook's secret), and the time
 * until a run through the deployment's proxy streams the new answer is measured, with the stages
 * read from the revision's log (each line stamped when the agent saw it).
 *
 * BEFORE=<another tree> runs that tree's agent too (its own listener, deployment and repository,
 * on the same control plane), and the rounds alternate between the two agents, so a before/after
 * comparison shares the machine's load round by round.
 *
 *   npm exec -c 'node bench/agent-push-to-serving.ts'                                   # ROUNDS=3
 *   ROUNDS=6 BEFORE=/path/to/tree npm exec -c 'node bench/agent-push-to-serving.ts'
 */
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { graphRepo, killLeftoverServers, localListener, startAgent } from '../test/agents/harness.ts';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { pushRounds, summary } from './lib/push-rounds.ts';

const rounds = Number(process.env.ROUNDS ?? 3);
const secret = `bench-${crypto.randomUUID()}`;
const server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', GITHUB_WEBHOOK_SECRET: secret, RECONCILE_INTERVAL_MS: '0' });
const api = apiClient(server.url, server.apiKey);
const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
const { integrationId, installationId } = await workspaceFixtures(api);
// Each tree's agent is its own agent/main.ts, run from that tree.
const trees: Array<{ name: string; root?: string }> = [{ name: 'this tree' }];
if (process.env.BEFORE) trees.push({ name: process.env.BEFORE, root: process.env.BEFORE });
const agents: Array<{ name: string; run: (round: number) => Promise<Record<string, number>>; stop: () => Promise<void> }> = [];
try {
  for (const { name, root } of trees) {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-bench-push-'));
    // The workspace's default listener is this one's while its deployment is created (localListener sets it).
    const { listenerId, token } = await localListener(api, workspaceId);
    const agent = await startAgent({ url: server.url, token, listenerId, workDir, root });
    const stop = async () => {
      await agent.stop('SIGINT');
      killLeftoverServers(workDir);
    };
    agents.push({ name, run: async () => ({}), stop });
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
    agents.at(-1)!.run = async () => {
      // A push's revision goes to the workspace's default listener: this agent's, for this round.
      await api.patch(`/v1/workspaces/${workspaceId}`, { default_listener_id: listenerId });
      return (await pushRounds({ api, proxyPort: agent.proxyPort, deploymentId: id, url, repo, rounds: 1, by }))[0]!;
    };
  }
  const results = new Map(agents.map((a) => [a.name, [] as Array<Record<string, number>>]));
  for (let round = 0; round < rounds; round += 1) {
    // Alternated, and the order reversed every other round: neither tree always goes first.
    const order = round % 2 === 0 ? agents : [...agents].reverse();
    for (const agent of order) results.get(agent.name)!.push({ ...(await agent.run(round)), load_average: loadavg()[0]! });
  }
  console.log(
    JSON.stringify({ benchmark: 'agent-push-to-serving', trees: [...results].map(([tree, rows]) => ({ tree, ...summary(rows), rounds: rows })) }, null, 2),
  );
} finally {
  for (const agent of agents) await agent.stop();
  await server.kill('SIGTERM');
}
