/**
 * Claim wake-up: how long after `POST /v2/deployments` answers does an agent's held long-poll
 * (`POST …/agent/claim`, wait_seconds 30) answer with the new revision. A real server process on
 * loopback, RUNS times; prints each lag, the median, the p95 and the max.
 *
 *   npm run bench:agent-claim        # RUNS=50 by default
 */
import { apiClient } from '../test/helpers/api.ts';
import { dockerBody } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';

const runs = Number(process.env.RUNS ?? 50);
const server = await startServerProcess({ AGENT_LEASE_MS: '30000' });
const api = apiClient(server.url, server.apiKey);
const lags: number[] = [];
try {
  const listener = (await api.post('/v2/listeners', { compute_type: 'local', compute_id: 'bench' })).body;
  const token = (await api.post(`/v2/listeners/${listener.id}/tokens`)).body.token as string;
  const agent = (path: string, body?: unknown) =>
    fetch(`${server.url}/v2/listeners/${listener.id}/agent${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then((r) => r.json() as Promise<any>);
  for (let i = 0; i < runs; i++) {
    let answeredAt = 0;
    const held = agent('/claim', { agent_id: 'bench', wait_seconds: 30 }).then((answer) => {
      answeredAt = performance.now();
      return answer;
    });
    await new Promise((r) => setTimeout(r, 50));
    const created = await api.post(
      '/v2/deployments',
      dockerBody(`bench-${i}-${Date.now().toString(36)}`, listener.id, { source_config: { listener_id: listener.id } }),
    );
    const createdAt = performance.now();
    const answer = await held;
    if (answer.work?.deployment?.id !== created.body.id) throw new Error(`run ${i}: unexpected answer ${JSON.stringify(answer)}`);
    lags.push(answeredAt - createdAt);
    await agent(`/claims/${answer.work.claim_id}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOY_FAILED', status_message: 'bench' });
  }
} finally {
  await server.kill();
}
const sorted = [...lags].sort((a, b) => a - b);
const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
console.log(
  `claim answered after the create's answer, ${runs} runs: median ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms`,
);
