/**
 * What a noisy neighbour does to a victim on the same `local` agent, with the agent's limits on
 * (cgroups: --cpu-max 1, --pids-max 512, --build-memory-max-mb 1024; bwrap, pasta): the victim's
 * p50/p99 through its proxy (sequential `POST /assistants/search`) while quiet, then while a
 * neighbour's install burns CPU on 4 processes, forks 400 processes at a time, and holds 900 MiB,
 * then quiet again. Goal (contract §15): p99 within 2× of quiet.
 *
 * Then the start cost of the network path per deployment: push → serving with an unchanged lock
 * file, on two agents (each with its control plane: a github deployment goes to its workspace's
 * listener), one whose sandboxes get pasta (`--egress public`, the default) and one without it
 * (`--egress none`: a namespace with only its own loopback), rounds alternating between them so
 * both see the same noise. Goal: ≤ 3 s.
 *
 *   node bench/agent-noisy-neighbour.ts        # PHASE_SECONDS=15 ROUNDS=5
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_AGENT_MODULES } from '../agent/sandbox.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, localScene, startAgent } from '../test/agents/harness.ts';
import { githubBody, revisionReaches, uniqueName } from '../test/helpers/fixtures.ts';
import { pushRounds } from './lib/push-rounds.ts';

const phaseSeconds = Number(process.env.PHASE_SECONDS ?? 15);
const rounds = Number(process.env.ROUNDS ?? 5);
/** The agent's own LangGraph packages as the sandbox shows them: no install waits for npm. */
const LINK = `ln -s ${SANDBOX_AGENT_MODULES} node_modules`;
/** Each noise lasts past the victim's sample (it starts once the neighbour is BUILDING). */
const noiseSeconds = phaseSeconds + 8;
const NOISES: Array<{ name: string; install: string }> = [
  { name: 'CPU burn (4 busy loops)', install: `${LINK} && for i in 1 2 3 4; do timeout ${noiseSeconds} sh -c 'while :; do :; done' & done; wait` },
  {
    name: 'fork burst (400 at a time)',
    install: `${LINK} && end=$(($(date +%s)+${noiseSeconds})); while [ $(date +%s) -lt $end ]; do for i in $(seq 1 400); do sleep 1 & done; wait; done`,
  },
  {
    name: 'memory hold (900 MiB)',
    install: `${LINK} && node -e "const held=[];for(let i=0;i<900;i+=1)held.push(Buffer.alloc(1<<20,1));setTimeout(()=>console.log(held.length),${noiseSeconds * 1000})"`,
  },
];

type Scene = Awaited<ReturnType<typeof localScene>>;
const scenes: Scene[] = [];
const workDirs: string[] = [];
const agents: AgentProcess[] = [];
/** A control plane with a local listener, and an agent of that listener started with `args`. */
const agentOn = async (args: string[]) => {
  const scene = await localScene();
  scenes.push(scene);
  const workDir = mkdtempSync(join(tmpdir(), 'cp-bench-noisy-'));
  workDirs.push(workDir);
  const agent = await startAgent({ url: scene.server.url, token: scene.token, listenerId: scene.listenerId, workDir, args });
  agents.push(agent);
  return { scene, agent };
};
const deploy = async ({ api, integrationId }: Scene, install: string, repo = graphRepo()) => {
  const created = await api.post(
    '/v2/deployments',
    githubBody(uniqueName('noisy'), integrationId, {
      source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false, install_command: install },
    }),
  );
  if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  return { id: created.body.id as string, revisionId: created.body.latest_revision_id as string, repo };
};
const deployed = async ({ api }: Scene, d: { id: string; revisionId: string }) => {
  const revision = await revisionReaches(api, d.id, d.revisionId, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
  if (revision.status !== 'DEPLOYED') throw new Error(`${revision.status}: ${revision.status_message}`);
  return (await api.get(`/v2/deployments/${d.id}`)).body.source_config.custom_url as string;
};
const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * p)] ?? Number.NaN;

try {
  const { scene, agent: limited } = await agentOn(['--cpu-max', '1', '--pids-max', '512', '--build-memory-max-mb', '1024']);
  const { api } = scene;
  const victim = await deploy(scene, LINK);
  const victimUrl = await deployed(scene, victim);
  /** Sequential requests to the victim for `ms`: each one's time, and the failures. */
  const sample = async (ms: number) => {
    const times: number[] = [];
    let failures = 0;
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const started = process.hrtime.bigint();
      const answer = await hostFetch(limited.proxyPort, victimUrl, '/assistants/search', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      }).catch(() => ({ status: 0 }));
      if (answer.status === 200) times.push(Number(process.hrtime.bigint() - started) / 1e6);
      else failures += 1;
    }
    return { times, failures };
  };
  await sample(2000); // warm-up
  const rows: Array<{ phase: string; n: number; failures: number; p50: number; p99: number }> = [];
  const record = (phase: string, s: { times: number[]; failures: number }) =>
    rows.push({ phase, n: s.times.length, failures: s.failures, p50: pct(s.times, 0.5), p99: pct(s.times, 0.99) });
  record('quiet (before)', await sample(phaseSeconds * 1000));
  for (const noise of NOISES) {
    const neighbour = await deploy(scene, noise.install);
    for (;;) {
      const status = (await api.get(`/v2/deployments/${neighbour.id}/revisions/${neighbour.revisionId}`)).body.status as string;
      if (status === 'BUILDING') break;
      if (/FAILED|DEPLOYED/.test(status)) throw new Error(`the neighbour ended ${status} before its noise`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 3000)); // the checkout and the install's start
    record(noise.name, await sample(phaseSeconds * 1000));
    await revisionReaches(api, neighbour.id, neighbour.revisionId, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
  }
  record('quiet (after)', await sample(phaseSeconds * 1000));
  const quietP99 = Math.max(rows[0]!.p99, rows.at(-1)!.p99);
  console.log('\n| victim, while its neighbour… | requests | failed | p50 ms | p99 ms | p99 / quiet p99 |\n|---|---|---|---|---|---|');
  for (const row of rows)
    console.log(`| ${row.phase} | ${row.n} | ${row.failures} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${(row.p99 / quietP99).toFixed(2)} |`);

  // The network path's start cost: pasta against no pasta, alternating rounds.
  const none = await agentOn(['--egress', 'none']);
  const lanes = [
    { name: 'pasta (--egress public)', agent: limited, scene, times: [] as number[] },
    { name: 'no pasta (--egress none)', agent: none.agent, scene: none.scene, times: [] as number[] },
  ];
  const served = await Promise.all(
    lanes.map(async (lane) => {
      const d = await deploy(lane.scene, LINK);
      return { ...d, url: await deployed(lane.scene, d) };
    }),
  );
  for (let round = 0; round < rounds; round += 1)
    for (const [i, lane] of lanes.entries()) {
      const d = served[i]!;
      const [result] = await pushRounds({ api: lane.scene.api, proxyPort: lane.agent.proxyPort, deploymentId: d.id, url: d.url, repo: d.repo, rounds: 1 });
      lane.times.push(result!.push_to_serving_ms!);
    }
  console.log('\n| sandbox network | rounds | push → serving p50 ms | max ms |\n|---|---|---|---|');
  for (const lane of lanes) console.log(`| ${lane.name} | ${lane.times.length} | ${pct(lane.times, 0.5)} | ${Math.max(...lane.times)} |`);
  console.log(`pasta adds ${pct(lanes[0]!.times, 0.5) - pct(lanes[1]!.times, 0.5)} ms at p50 per deployment start`);
} finally {
  for (const agent of agents) await agent.stop('SIGINT');
  for (const { server } of scenes) await server.kill('SIGTERM');
  for (const dir of workDirs) killLeftoverServers(dir);
}
