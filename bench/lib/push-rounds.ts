import { type graphRepo, runGraph } from '../../test/agents/harness.ts';
import type { Api } from '../../test/helpers/api.ts';

type LogLine = { timestamp: string; message: string };

/**
 * Push → serving, `rounds` times, for a deployment already serving `repo`: each round commits a
 * change of the graph's answer only (package.json and the lock file unchanged), asks for a
 * revision, and times until the proxy at `url` serves the new answer; with the build log's split.
 */
export async function pushRounds(options: {
  api: Api;
  proxyPort: number;
  deploymentId: string;
  /** The deployment's URL (its `custom_url`) or host name on the proxy. */
  url: string;
  repo: ReturnType<typeof graphRepo>;
  rounds: number;
}): Promise<Array<Record<string, number>>> {
  const { api, proxyPort, deploymentId: id, url, repo, rounds } = options;
  const results: Array<Record<string, number>> = [];
  for (let round = 1; round <= rounds; round += 1) {
    const answer = `answer ${round} ${crypto.randomUUID().slice(0, 8)}`;
    repo.commit({ 'src/graph.mjs': repo.read('src/graph.mjs').replace(/const ANSWER = '[^']*'/, `const ANSWER = '${answer}'`) }, `Round ${round}`);
    const pushed = Date.now();
    const revision = await api.post(`/v2/deployments/${id}/revisions`, {});
    for (;;) {
      const served = await runGraph(proxyPort, url).catch(() => null);
      if (served?.body?.answer === answer) break;
      if (Date.now() - pushed > 300_000) throw new Error('not served in 300 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const servingMs = Date.now() - pushed;
    const logs = async (type: string) =>
      (await api.get(`/v2/deployments/${id}/revisions/${revision.body.id}/logs?type=${type}&limit=1000`)).body.logs as LogLine[];
    const [build, deploy] = [await logs('build'), await logs('deploy')];
    const at = (log: LogLine[], test: (m: string) => boolean) => Date.parse(log.find((l) => test(l.message))?.timestamp ?? '');
    const installed = build.some((l) => l.message === '$ npm ci');
    results.push({
      push_to_serving_ms: servingMs,
      // 0 when the stored packages were reused (npm ci skipped).
      npm_ci_ms: installed ? at(build, (m) => m.startsWith('build finished')) - at(build, (m) => m === '$ npm ci') : 0,
      build_ms: at(build, (m) => m.startsWith('build finished')) - Date.parse(build[0]!.timestamp),
      deploy_ms: Date.parse(deploy.at(-1)!.timestamp) - Date.parse(deploy[0]!.timestamp),
    });
  }
  return results;
}
