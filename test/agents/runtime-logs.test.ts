import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { splitLines } from '../../agent/processes.ts';
import { DEFAULT_RUNTIME_LOG_OPTIONS } from '../../agent/runtime-logs.ts';
import { dnsSafeName } from '../../shared/dns-safe-name.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, LINK_AGENT_MODULES, localScene, startAgent } from './harness.ts';

function rssMb(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return Math.round(kb / 1024);
}

/** A graph that prints a line per run, and on `flood` 100 MB of lines and one 50 MB line without a newline. */
const LOUD_GRAPH = `import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ tag: Annotation(), flood: Annotation(), answer: Annotation() });

export const graph = new StateGraph(State)
  .addNode('respond', ({ tag, flood }) => {
    console.log('RUNTIME-LINE ' + tag);
    if (flood) {
      const line = 'x'.repeat(500);
      for (let i = 0; i < 200000; i += 1) console.log(line);
      process.stdout.write('y'.repeat(50 * 1024 * 1024) + '\\n');
    }
    return { answer: 'printed' };
  })
  .addEdge(START, 'respond')
  .addEdge('respond', END)
  .compile();
`;

describe('runtime logs of a live revision', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-runtime-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('answers at the custom_url its agent reports (by path, no DNS), shows a line the server printed after DEPLOYED in `langgraph deploy logs`, and caps a flood without the agent growing', {
    timeout: 600_000,
  }, async () => {
    const scene = await localScene();
    server = scene.server;
    const { api, integrationId, listenerId, token } = scene;
    // The URL template a client without DNS for *.localhost can use: path-based, on the proxy's port.
    const proxyPort = await new Promise<number>((resolve) => {
      const probe = createNetServer().listen(0, '127.0.0.1', () => {
        const port = (probe.address() as { port: number }).port;
        probe.close(() => resolve(port));
      });
    });
    agent = await startAgent({ url: server.url, token, listenerId, workDir, proxyPort, args: ['--public-url', `http://127.0.0.1:${proxyPort}/d/{name}`] });
    const repo = graphRepo();
    repo.commit({ 'src/graph.mjs': LOUD_GRAPH }, 'A graph that prints');
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('loud'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false, install_command: LINK_AGENT_MODULES },
      }),
    );
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const revision = await revisionReaches(api, id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(revision.status, revision.status_message).toBe('DEPLOYED');
    // custom_url is the URL the agent's proxy answers on (what `langgraph deploy` prints): a plain fetch reaches it.
    const customUrl = (await api.get(`/v2/deployments/${id}`)).body.source_config.custom_url as string;
    expect(customUrl).toBe(`http://127.0.0.1:${proxyPort}/d/${dnsSafeName(created.body.name)}`);
    expect((await fetch(`${customUrl}/ok`)).status).toBe(200);
    const host = `${dnsSafeName(created.body.name)}.localhost`;
    const run = (input: Record<string, unknown>) =>
      hostFetch(agent!.proxyPort, host, '/runs/wait', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'agent', input }),
      });

    const tag = crypto.randomUUID();
    expect((await run({ tag })).status).toBe(200);
    /** Every deploy line stored for the revision, counted page by page along its cursor. */
    const storedDeployLines = async (deploymentId: string, revisionId: string) => {
      let count = 0;
      let offset: number | null = null;
      for (;;) {
        const page: { logs: unknown[]; next_offset: number | null } = (
          await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=deploy&limit=1000${offset === null ? '' : `&offset=${offset}`}`)
        ).body;
        count += page.logs.length;
        if (page.logs.length < 1000) return count;
        offset = page.next_offset;
      }
    };
    // `langgraph deploy logs` (host_backend.py): POST /v1/projects/{id}/deploy_logs, as the CLI sends it.
    const deployLogs = async () => {
      const response = await fetch(`${server!.url}/v1/projects/${id}/deploy_logs`, {
        method: 'POST',
        headers: { 'X-Api-Key': server!.apiKey, 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ limit: 1000, order: 'desc', offset: null, level: null, query: null, start_time: null, end_time: null }),
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { logs: Array<{ message: string; level: string }> }).logs;
    };
    const shown = await (async () => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const logs = await deployLogs();
        if (logs.some((l) => l.message.includes(`RUNTIME-LINE ${tag}`)) || Date.now() > deadline) return logs;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    expect(shown.map((l) => l.message)).toContain(`RUNTIME-LINE ${tag}`);
    // Requests are logged by the server too, plain and with their level.
    expect(shown.some((l) => /POST \/runs\/wait/.test(l.message) && !l.message.includes('\x1b['))).toBe(true);

    // The flood: 100 MB in 200,000 lines and one 50 MB line. The agent's memory stays bounded.
    const before = rssMb(agent.pid);
    const storedBefore = await storedDeployLines(id, revision.id);
    let peak = before;
    const floodStarted = performance.now();
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(agent!.pid))), 100);
    const flooded = await run({ tag: 'flood', flood: true });
    await new Promise((r) => setTimeout(r, 3000));
    clearInterval(sampler);
    expect(flooded.status).toBe(200);
    const after = await deployLogs();
    const stored = (await storedDeployLines(id, revision.id)) - storedBefore;
    // The seconds in which the agent can have shipped the flood's lines: its token bucket refills on
    // its own clock, which ran no longer than this test waited (a flush a second later included).
    const floodSeconds = Math.ceil((performance.now() - floodStarted) / 1000) + 1;
    console.log(`runtime log flood: agent RSS ${before} MB before, peak ${peak} MB; ${stored} deploy lines stored in ${floodSeconds} s`);
    expect(peak - before).toBeLessThan(100);
    expect(after.some((l) => /runtime log line\(s\) dropped/.test(l.message))).toBe(true);
    // Far fewer than the 200,000 printed were stored: the burst plus the rate for the seconds it ran
    // (and a line a second saying how many were dropped). Counted against the seconds measured, not
    // a fixed 1,000, which a flood that ran longer than ten seconds on a loaded machine exceeded.
    const { burst, perSecond } = DEFAULT_RUNTIME_LOG_OPTIONS;
    expect(stored).toBeLessThanOrEqual(burst + (perSecond + 1) * floodSeconds);
    expect(stored).toBeLessThan(200_000 / 20);
  });
});

describe('bounds on output lines and runtime logs', () => {
  it('cuts a line without a newline at the bound and says how much was cut', async () => {
    const stream = new PassThrough();
    const lines: string[] = [];
    splitLines(stream, (line) => lines.push(line), 10);
    stream.write('short\nabcdefghijklmnopqrstuvwxyz');
    // The carriage return of the cut line is among what was cut.
    stream.write('0123456789\r\nlast');
    stream.end();
    await new Promise((r) => setImmediate(r));
    expect(lines).toEqual(['short', 'abcdefghij… [line cut by the agent: 27 more characters]', 'last']);
  });
});
