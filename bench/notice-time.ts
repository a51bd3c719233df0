/**
 * Time to notice: how long after a revision's move to DEPLOYED (its `updated_at`) the bundled
 * Action's process has ended. Runs the Action as a runner does (tests' harness) against a real
 * server on loopback, RUNS times, and prints each lag, the median and the max.
 *
 *   npm run bench:notice            # RUNS=10 STAGE_MS=300 by default
 */

import { startAction } from '../test/action/harness.ts';
import { apiClient } from '../test/helpers/api.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';

const runs = Number(process.env.RUNS ?? 10);
const stageMs = process.env.STAGE_MS ?? '300';

// LOG_LEVEL stays at info: the helper learns the port from the "listening" line.
const server = await startServerProcess({ SANDBOX_STAGE_MS: stageMs });
const api = apiClient(server.url, server.apiKey);
const name = `bench-${Date.now().toString(36)}`;
const lags: number[] = [];
const seenLags: number[] = [];
try {
  for (let i = 0; i < runs; i++) {
    const started = startAction({ 'api-url': server.url, 'api-key': server.apiKey, name, 'image-uri': `registry.example.com/acme/agent:${i}` });
    let exitedAt = 0;
    started.child.once('exit', () => (exitedAt = Date.now()));
    const run = await started.done;
    if (run.code !== 0) throw new Error(`run ${i} failed:\n${run.stdout}${run.stderr}`);
    const revision = await api.get(`/v2/deployments/${run.outputs['deployment-id']}/revisions/${run.outputs['revision-id']}`);
    const deployedAt = Date.parse(revision.body.updated_at);
    const seenAt = Date.parse(/<td>DEPLOYED<\/td><td>[^<]+<\/td><td>([^<]+)<\/td>/.exec(run.summary)?.[1] ?? 'NaN');
    lags.push(exitedAt - deployedAt);
    seenLags.push(seenAt - deployedAt);
    console.log(`run ${i + 1}: DEPLOYED at ${revision.body.updated_at}; seen after ${seenAt - deployedAt} ms; process ended after ${exitedAt - deployedAt} ms`);
  }
} finally {
  await server.kill();
}

const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return `median ${median} ms, min ${sorted[0]} ms, max ${sorted.at(-1)} ms`;
};
console.log(`\n${runs} runs, sandbox stages of ${stageMs} ms, node ${process.version}`);
console.log(`DEPLOYED → seen by the Action:   ${stats(seenLags)}`);
console.log(`DEPLOYED → Action process ended: ${stats(lags)}  (target < 1000 ms)`);
