/**
 * Memory of one deployment's agent server, measured where it runs: the `local` agent's sandboxed
 * production server (bwrap, its pid and network namespaces, the agent's limits, the production
 * command of agent/server-command.ts) started by a real agent for a real deployment of the fixture
 * app (test/fixtures/langgraph-app, a one-node graph, from a git repository over file://). After 20
 * runs of the graph through the agent's proxy and 3 s at rest, the process tree under the server
 * the agent recorded (bwrap and everything in the sandbox) is read from /proc: each process's
 * resident memory (VmRSS) and its proportional share (Pss, /proc/<pid>/smaps_rollup: a page shared
 * by n processes counts 1/n in each) and its private pages (USS: Private_Clean + Private_Dirty,
 * what its exit frees). Summing RSS counts the pages the tree's processes share (Node's code, the
 * mapped node_modules) once per process; PSS is the fair sum, though it also divides pages with
 * any other process on the machine mapping the same files (every Node process maps the same
 * binary), so on a busy machine it reads lower; USS is the floor.
 *
 * Then, for the decision between the LangGraph CLI's `dev` mode (`tsx watch`, a watcher and
 * reloader) and the production command, both are run unsandboxed on a copy of the app in the same
 * way (20 runs, 3 s at rest) and their trees summed the same two ways.
 *
 *   npm exec -c 'node bench/agent-server-memory.ts'
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../agent/agent-server.ts';
import { readGraphConfig } from '../agent/graph-config.ts';
import { killGroup } from '../agent/processes.ts';
import { productionServerCommand } from '../agent/server-command.ts';
import { graphRepo, killLeftoverServers, localListener, runGraph, serverPidOf, startAgent } from '../test/agents/harness.ts';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';

const RUNS = 20;
const REST_MS = 3000;

type ProcessMemory = { pid: number; command: string; rssKib: number; pssKib: number; ussKib: number };
type TreeMemory = { processes: ProcessMemory[]; rssMib: number; pssMib: number; ussMib: number };

/** Every process's parent, read from /proc/<pid>/stat. */
function parents(): Map<number, number> {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  return parentOf;
}

/** A kB figure of a /proc file (`VmRSS:` of status, `Pss:` of smaps_rollup); 0 when the process is gone. */
function kib(file: string, field: string): number {
  try {
    return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(file, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** `root` and its descendants, with the resident and proportional memory of each. */
function treeMemory(root: number): TreeMemory {
  const parentOf = parents();
  const tree = [root];
  for (let i = 0; i < tree.length; i++) for (const [pid, parent] of parentOf) if (parent === tree[i]) tree.push(pid);
  const processes = tree.map((pid) => ({
    pid,
    command: commandOf(pid),
    rssKib: kib(`/proc/${pid}/status`, 'VmRSS'),
    pssKib: kib(`/proc/${pid}/smaps_rollup`, 'Pss'),
    ussKib: kib(`/proc/${pid}/smaps_rollup`, 'Private_Clean') + kib(`/proc/${pid}/smaps_rollup`, 'Private_Dirty'),
  }));
  const mib = (k: number) => Math.round(k / 1024);
  return {
    processes,
    rssMib: mib(processes.reduce((sum, p) => sum + p.rssKib, 0)),
    pssMib: mib(processes.reduce((sum, p) => sum + p.pssKib, 0)),
    ussMib: mib(processes.reduce((sum, p) => sum + p.ussKib, 0)),
  };
}

/** The process's command line, shortened (its program and what it runs). */
function commandOf(pid: number): string {
  try {
    const words = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return words
      .slice(0, 3)
      .map((word) => (word.length > 60 ? `…${word.slice(-59)}` : word))
      .join(' ');
  } catch {
    return '?';
  }
}

/** The build directories under the agent's work directory that hold a recorded server. */
function recordedServers(workDir: string): string[] {
  const found: string[] = [];
  for (const deployment of readdirSync(workDir, { withFileTypes: true }).filter((entry) => entry.isDirectory())) {
    const dir = join(workDir, deployment.name);
    for (const entry of readdirSync(dir)) {
      if (entry.endsWith('.agent') && existsSync(join(dir, entry, 'server.json'))) found.push(join(dir, entry.slice(0, -'.agent'.length)));
    }
  }
  return found;
}

/** The production server as the local agent runs it: a real control plane and agent, one deployment. */
async function sandboxed(): Promise<TreeMemory & { recordedPid: number }> {
  const server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', RECONCILE_INTERVAL_MS: '0' });
  const workDir = mkdtempSync(join(tmpdir(), 'cp-bench-memory-'));
  const api = apiClient(server.url, server.apiKey);
  const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
  const { integrationId } = await workspaceFixtures(api);
  const { listenerId, token } = await localListener(api, workspaceId);
  const agent = await startAgent({ url: server.url, token, listenerId, workDir });
  try {
    const repo = graphRepo();
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('memory'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false },
      }),
    );
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    const revision = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    if (revision.status !== 'DEPLOYED') throw new Error(`revision ${revision.status}: ${revision.status_message}\n${agent.output()}`);
    const url = (await api.get(`/v2/deployments/${created.body.id}`)).body.source_config.custom_url as string;
    for (let i = 0; i < RUNS; i++) {
      const run = await runGraph(agent.proxyPort, url);
      if (run.status !== 200) throw new Error(`run answered ${run.status}: ${JSON.stringify(run.body)}`);
    }
    await new Promise((r) => setTimeout(r, REST_MS));
    const [buildDir, ...others] = recordedServers(workDir);
    if (!buildDir || others.length > 0) throw new Error(`expected one recorded server in ${workDir}, found ${others.length + (buildDir ? 1 : 0)}`);
    const recordedPid = serverPidOf(buildDir);
    return { ...treeMemory(recordedPid), recordedPid };
  } finally {
    await agent.stop('SIGINT');
    await server.kill('SIGTERM');
    killLeftoverServers(workDir);
  }
}

/** `dev` or the production command run directly (no sandbox) on an installed copy of the app. */
async function unsandboxed(app: string, mode: 'dev' | 'production'): Promise<TreeMemory & { startMs: number }> {
  const port = await freePort();
  const config = readGraphConfig(join(app, 'langgraph.json'));
  const command =
    mode === 'dev'
      ? `exec ${JSON.stringify(process.execPath)} node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs dev --port ${port} --host 127.0.0.1 --no-browser --config langgraph.json`
      : productionServerCommand(app, config, port, { node: process.execPath, agentModules: null })!;
  const started = Date.now();
  const child = spawn('sh', ['-c', command], {
    cwd: app,
    detached: true,
    stdio: 'ignore',
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_JSON: 'true', BROWSER: 'none' },
  });
  const pgid = child.pid!;
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/ok`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() - started > 120_000) throw new Error(`${mode}: not healthy in 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const startMs = Date.now() - started;
    for (let i = 0; i < RUNS; i += 1) {
      const run = await fetch(`http://127.0.0.1:${port}/runs/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'agent', input: {} }),
      });
      if (!run.ok) throw new Error(`${mode}: run answered ${run.status}`);
    }
    await new Promise((r) => setTimeout(r, REST_MS));
    return { ...treeMemory(pgid), startMs };
  } finally {
    await killGroup(pgid);
  }
}

const brief = ({ processes, ...sums }: TreeMemory) => ({
  ...sums,
  processes: processes.map(
    (p) =>
      `${p.command} (pid ${p.pid}): RSS ${Math.round(p.rssKib / 1024)} MiB, PSS ${Math.round(p.pssKib / 1024)} MiB, USS ${Math.round(p.ussKib / 1024)} MiB`,
  ),
});

const inSandbox = await sandboxed();
const app = mkdtempSync(join(tmpdir(), 'cp-bench-app-'));
cpSync(resolve(import.meta.dirname, '../test/fixtures/langgraph-app'), app, { recursive: true });
execFileSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], {
  cwd: app,
  stdio: 'ignore',
  env: { ...process.env, PATH: `${resolve(process.execPath, '..')}:${process.env.PATH}` },
});
const dev = await unsandboxed(app, 'dev');
const production = await unsandboxed(app, 'production');
rmSync(app, { recursive: true, force: true });
console.log(
  JSON.stringify(
    {
      benchmark: 'agent-server-memory',
      sandboxed_production: brief(inSandbox),
      unsandboxed: { dev: { startMs: dev.startMs, ...brief(dev) }, production: { startMs: production.startMs, ...brief(production) } },
    },
    null,
    2,
  ),
);
