import { request } from 'node:http';
import type { graphRepo } from '../../test/agents/harness.ts';
import type { Api } from '../../test/helpers/api.ts';
import { deliver, pushPayload, revisionsOf } from '../../test/webhooks/github.ts';

type LogLine = { timestamp: string; message: string };

/** How a round's commit reaches the control plane: a signed GitHub push delivery, or (`api`) `POST …/revisions`. */
export type PushBy = { webhook: { serverUrl: string; secret: string; installationId: number } } | 'api';

/**
 * Push → serving, `rounds` times, for a deployment already serving `repo`: each round commits a
 * change of the graph's answer only (package.json and the lock file unchanged), pushes it (a real
 * signed push delivery, or an API call), and times until a run through the proxy at `url` streams
 * the new answer; with the stages, from the revision's log (stamped when the agent saw each line).
 */
export async function pushRounds(options: {
  api: Api;
  proxyPort: number;
  deploymentId: string;
  /** The deployment's URL (its `custom_url`) or host name on the proxy. */
  url: string;
  repo: ReturnType<typeof graphRepo>;
  rounds: number;
  by?: PushBy;
}): Promise<Array<Record<string, number>>> {
  const { api, proxyPort, deploymentId: id, url, repo, rounds } = options;
  const by = options.by ?? 'api';
  const results: Array<Record<string, number>> = [];
  for (let round = 1; round <= rounds; round += 1) {
    const answer = `answer ${round} ${crypto.randomUUID().slice(0, 8)}`;
    const commit = repo.commit(
      { 'src/graph.mjs': repo.read('src/graph.mjs').replace(/const ANSWER = '[^']*'/, `const ANSWER = '${answer}'`) },
      `Round ${round}`,
    );
    const pushed = Date.now();
    let accepted = pushed;
    if (by === 'api') await api.post(`/v2/deployments/${id}/revisions`, {});
    else {
      const payload = pushPayload({ repo: 'acme/agent', after: commit, htmlUrl: repo.url.replace(/\.git$/, ''), installationId: by.webhook.installationId });
      const delivery = await deliver(by.webhook.serverUrl, 'push', payload, { secret: by.webhook.secret });
      if (delivery.status !== 202) throw new Error(`push delivery: ${delivery.status} ${JSON.stringify(delivery.body)}`);
      accepted = Date.now();
    }
    for (;;) {
      if (await streamsAnswer(proxyPort, url, answer)) break;
      if (Date.now() - pushed > 300_000) throw new Error('not served in 300 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    const servingMs = Date.now() - pushed;
    const revision =
      by === 'api'
        ? (await revisionsOf(api, id)).at(-1)
        : (await revisionsOf(api, id)).find((r) => r.source_revision_config.repo_commit_sha === commit || r.source_revision_config.repo_ref === commit);
    const logs = async (type: string) => (await api.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=${type}&limit=1000`)).body.logs as LogLine[];
    const [build, deploy] = [await logs('build'), await logs('deploy')];
    const at = (log: LogLine[], test: (m: string) => boolean) => Date.parse(log.find((l) => test(l.message))?.timestamp ?? '') - pushed;
    const spawned = at(deploy, (m) => m === 'starting the agent server');
    const spawnedIndex = deploy.findIndex((l) => l.message === 'starting the agent server');
    const healthy = at(deploy, (m) => m.startsWith('the agent server answers GET /ok'));
    const switched = at(deploy, (m) => m.startsWith('serving '));
    results.push({
      push_to_serving_ms: servingMs,
      // When each stage ended, in ms after the push was sent (the agent's clock: the same machine's).
      webhook_accepted_ms: accepted - pushed,
      claimed_ms: at(build, (m) => m.startsWith('claimed by local agent')),
      fetched_ms: at(build, (m) => m.startsWith('checked out commit') || m.startsWith('unpacked the uploaded tarball')),
      // 0 when the stored packages were reused (npm ci skipped).
      install_ms: build.some((l) => l.message === '$ npm ci') ? at(build, (m) => m.startsWith('build finished')) - at(build, (m) => m === '$ npm ci') : 0,
      built_ms: at(build, (m) => m.startsWith('build finished')),
      server_spawned_ms: spawned,
      // The API server's own first line: Node has loaded its modules by then.
      server_first_line_ms: spawnedIndex >= 0 && deploy[spawnedIndex + 1] ? Date.parse(deploy[spawnedIndex + 1]!.timestamp) - pushed : Number.NaN,
      server_healthy_ms: healthy,
      proxy_switched_ms: switched,
      // Durations of the stages that are not a single step above.
      deploy_moves_ms: spawned - at(build, (m) => m.startsWith('build finished')),
      server_start_ms: healthy - spawned,
      first_answer_after_switch_ms: servingMs - switched,
    });
  }
  return results;
}

/** Each figure's median and lowest–highest over the rounds. */
export function summary(rows: Array<Record<string, number>>): Record<string, { p50: number; min: number; max: number }> {
  const figures: Record<string, { p50: number; min: number; max: number }> = {};
  for (const key of Object.keys(rows[0] ?? {})) {
    const values = rows
      .map((row) => row[key]!)
      .filter((value) => Number.isFinite(value))
      .sort((a, b) => a - b);
    if (values.length === 0) continue;
    figures[key] = { p50: values[Math.floor((values.length - 1) / 2)]!, min: values[0]!, max: values.at(-1)! };
  }
  return figures;
}

/**
 * Whether a run through the proxy answers `answer`: `POST /runs/stream`, read until its first
 * `values` event with an answer (then the request is dropped). A stream, not `/runs/wait`: the
 * LangGraph server ends a wait, and a stream, only on its 500 ms poll of the run's status, which
 * would add its own half second to every round. `url` is the deployment's path-form URL on the proxy.
 */
function streamsAnswer(proxyPort: number, url: string, answer: string): Promise<boolean> {
  const target = new URL(url);
  return new Promise((resolve) => {
    let text = '';
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: 'POST',
        path: `${target.pathname.replace(/\/+$/, '')}/runs/stream`,
        headers: { host: target.host, 'content-type': 'application/json' },
      },
      (res) => {
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
          // The first values event is the input (no answer yet); the next, after the graph's one node, has it.
          const seen = /"answer":\s*("(?:[^"\\]|\\.)*")/.exec(text)?.[1];
          if (seen === undefined) return;
          resolve(JSON.parse(seen) === answer);
          req.destroy();
        });
        res.on('end', () => resolve(false));
        res.on('error', () => resolve(false));
      },
    );
    req.on('error', () => resolve(false));
    req.end(JSON.stringify({ assistant_id: 'agent', input: {}, stream_mode: ['values'] }));
  });
}
