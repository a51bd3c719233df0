import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, expect } from 'vitest';
import { processIdentity, stateDirOf } from '../../agent/build-records.ts';
import { SANDBOX_AGENT_MODULES } from '../../agent/sandbox.ts';
import { type Api, apiClient } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

export const FIXTURE = resolve(ROOT, 'test/fixtures/langgraph-app');
/**
 * An install command for repositories whose packages are not what a test is about: a link to the
 * agent's own node_modules (read-only in the sandbox, with the LangGraph packages the fixture app
 * needs), instead of an `npm ci` that downloads ~100 MB from the registry through the sandbox's
 * network for every new deployment.
 */
export const LINK_AGENT_MODULES = `ln -s ${SANDBOX_AGENT_MODULES} node_modules`;
/** The package managers' cache the test agents share (one download of the fixture's packages per machine). */
export const SHARED_TEST_CACHE = join(tmpdir(), 'cp-agent-test-package-cache');

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    encoding: 'utf8',
  }).trim();
}

/**
 * A real git "remote" (a bare repository, reached over file://) holding the fixture LangGraph app,
 * and a clone that commits and pushes to it.
 */
export function graphRepo(root = mkdtempSync(join(tmpdir(), 'cp-agent-git-'))) {
  const bare = join(root, 'remote.git');
  const work = join(root, 'work');
  git(root, 'init', '--bare', '--initial-branch=main', bare);
  git(root, 'clone', '-q', `file://${bare}`, work);
  cpSync(FIXTURE, work, { recursive: true, filter: (src) => !src.includes('node_modules') });
  /** Writes the files (path → content, relative to the repository), commits, pushes; answers the commit. */
  const commit = (files: Record<string, string>, message: string) => {
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    git(work, 'add', '-A');
    git(work, 'commit', '-q', '-m', message);
    git(work, 'push', '-q', 'origin', 'HEAD:refs/heads/main');
    return git(work, 'rev-parse', 'HEAD');
  };
  const read = (path: string) => readFileSync(join(work, path), 'utf8');
  const first = commit({}, 'The fixture LangGraph app');
  return { url: `file://${bare}`, first, commit, read };
}

export type AgentProcess = {
  pid: number;
  proxyPort: number;
  workDir: string;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
};

/** Starts the real agent (`node agent/main.ts`) and waits until it serves its listener. */
export async function startAgent(options: {
  url: string;
  token: string;
  listenerId: string;
  workDir: string;
  agentId?: string;
  env?: Record<string, string>;
  args?: string[];
  cacheDir?: string;
  inheritedFd?: boolean;
  proxyPort?: number;
  /**
   * Whether the proxy asks for X-Api-Key as it does by default; false (the default here) starts
   * the agent with --public, for tests about everything else than keys (their requests carry none).
   */
  requireKeys?: boolean;
  /** The tree whose agent runs (a benchmark's before/after); this one by default. */
  root?: string;
}): Promise<AgentProcess> {
  const root = options.root ?? ROOT;
  const child: ChildProcess = spawn(
    process.execPath,
    [
      resolve(root, 'agent/main.ts'),
      '--url',
      options.url,
      '--listener',
      options.listenerId,
      '--work-dir',
      options.workDir,
      '--proxy-port',
      String(options.proxyPort ?? 0),
      '--agent-id',
      options.agentId ?? `agent-${crypto.randomUUID().slice(0, 8)}`,
      // The sandbox sees only the variables named: npm's settings of the test machine.
      ...['npm_config_prefer_offline', 'npm_config_audit', 'npm_config_fund'].flatMap((name) => ['--pass-env', name]),
      '--cache-dir',
      options.cacheDir ?? SHARED_TEST_CACHE,
      ...(options.requireKeys ? [] : ['--public']),
      ...(options.args ?? []),
    ],
    {
      cwd: root,
      // The agent runs with the machine's environment (npm's registry settings and CA certificates among it).
      env: {
        ...process.env,
        CONTROL_PLANE_AGENT_TOKEN: options.token,
        npm_config_prefer_offline: 'true',
        npm_config_audit: 'false',
        npm_config_fund: 'false',
        ...options.env,
      },
      // A descriptor the agent inherits open (as from a supervisor or shell): it must not reach any command it runs.
      stdio: options.inheritedFd ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const proxyPort = await new Promise<number>((resolvePort, reject) => {
    // Killed when it misses the deadline, as a server is (test/helpers/listening-child.ts): left
    // running, it would go on claiming work to the end of the run.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`agent did not start:\n${output}`));
    }, 60_000);
    const check = () => {
      const port = /proxy listening on http:\/\/[^:]+:(\d+)/.exec(output)?.[1];
      if (port && output.includes('agent: serving listener')) {
        clearTimeout(timer);
        resolvePort(Number(port));
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code}:\n${output}`));
    });
  });
  return {
    pid: child.pid!,
    proxyPort,
    workDir: options.workDir,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/**
 * A real control plane (a server process taking `file://` repositories, no reconciler) with a
 * `local` listener in its default workspace and an integration for `github` deployments: what each
 * end-to-end agent test starts from.
 */
export async function localScene(env: Record<string, string> = {}): Promise<{
  server: ServerProcess;
  api: Api;
  workspaceId: string;
  integrationId: string;
  listenerId: string;
  token: string;
}> {
  const server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', RECONCILE_INTERVAL_MS: '0', ...env });
  const api = apiClient(server.url, server.apiKey);
  const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
  const { integrationId } = await workspaceFixtures(api);
  const { listenerId, token } = await localListener(api, workspaceId);
  return { server, api, workspaceId, integrationId, listenerId, token };
}

type LocalScene = Awaited<ReturnType<typeof localScene>>;
/** What `startAgent` takes beyond the scene's server, listener and work directory. */
type AgentOptions = Omit<Parameters<typeof startAgent>[0], 'url' | 'token' | 'listenerId' | 'workDir'>;
export type AgentScene = LocalScene & { agent: AgentProcess };

/**
 * The scene of an agent test file, and its clean-up: `start` makes a control plane (`localScene`)
 * and a real agent serving its listener from `workDir`; `agent` starts another (or the same one
 * again, e.g. on the same proxy port). Call it in a describe block: after the block every agent
 * it started is stopped with `stopSignal`, every server killed, and every agent server left in
 * the work directory ended.
 */
export function agentTestScene(workDir: string, stopSignal: NodeJS.Signals = 'SIGTERM') {
  const agents: AgentProcess[] = [];
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const agent of agents) await agent.stop(stopSignal);
    for (const server of servers) await server.kill('SIGTERM');
    killLeftoverServers(workDir);
  });
  const agent = async (scene: LocalScene, options: AgentOptions = {}) => {
    const started = await startAgent({ url: scene.server.url, token: scene.token, listenerId: scene.listenerId, workDir, ...options });
    agents.push(started);
    return started;
  };
  return {
    workDir,
    agent,
    async start(serverEnv: Record<string, string> = {}, options: AgentOptions = {}): Promise<AgentScene> {
      const scene = await localScene(serverEnv);
      servers.push(scene.server);
      return { ...scene, agent: await agent(scene, options) };
    },
  };
}

export type Settled = { id: string; status: string; status_message: string; [field: string]: any };
export const SETTLED = ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'];

/**
 * A `github` deployment of `repoUrl` (dev, no build on push; `sourceConfig` adds to its source
 * config, `body` to the request) created on the scene, and its first revision waited for until
 * it is DEPLOYED: else the test fails with the revision's message and the agent's output.
 * Answers the deployment's id and name, the revision, and the URL the agent serves it at.
 */
export async function deployedRepo(
  scene: { api: Api; integrationId: string; agent?: AgentProcess },
  repoUrl: string,
  options: { prefix?: string; sourceConfig?: Record<string, unknown>; body?: Record<string, unknown> } = {},
): Promise<{ id: string; name: string; revision: Settled; url: string }> {
  const { api, integrationId } = scene;
  const created = await api.post(
    '/v2/deployments',
    githubBody(uniqueName(options.prefix ?? 'agent'), integrationId, {
      source_config: { integration_id: integrationId, repo_url: repoUrl, deployment_type: 'dev', build_on_push: false, ...options.sourceConfig },
      ...options.body,
    }),
  );
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const id = created.body.id as string;
  const revision = (await revisionReaches(api, id, created.body.latest_revision_id, SETTLED, 300_000)) as Settled;
  expect(revision.status, `${revision.status_message}\n${scene.agent?.output() ?? ''}`).toBe('DEPLOYED');
  const url = (await api.get(`/v2/deployments/${id}`)).body.source_config.custom_url as string;
  return { id, name: created.body.name as string, revision, url };
}

/** A `local` listener with an agent token, made the workspace's default listener. */
export async function localListener(api: Api, workspaceId: string, computeId = `local-${crypto.randomUUID().slice(0, 8)}`) {
  const listener = await api.post('/v2/listeners', { compute_type: 'local', compute_id: computeId });
  if (listener.status !== 201) throw new Error(`listener: ${listener.status} ${JSON.stringify(listener.body)}`);
  const token = await api.post(`/v2/listeners/${listener.body.id}/tokens`);
  if (token.status !== 201) throw new Error(`token: ${token.status} ${JSON.stringify(token.body)}`);
  const patched = await api.patch(`/v1/workspaces/${workspaceId}`, { default_listener_id: listener.body.id });
  if (patched.status !== 200) throw new Error(`workspace: ${patched.status} ${JSON.stringify(patched.body)}`);
  return { listenerId: listener.body.id as string, token: token.body.token as string };
}

/** The pid of the agent server the agent recorded for a build directory (in its state beside the checkout). */
export function serverPidOf(buildDir: string): number {
  return (JSON.parse(readFileSync(join(stateDirOf(buildDir), 'server.json'), 'utf8')) as { pid: number }).pid;
}

/**
 * SIGKILL to the process (or, with `group`, its process group) recorded in `recordFile` as
 * `{pid, identity}`, only while that pid still names the recorded process: pids are reused (a
 * suite spawns thousands of processes and pid_max may be 32768), so a stale one may name any
 * process by now, this test runner's own included.
 */
function killRecorded(recordFile: string, group: boolean): void {
  try {
    const record = JSON.parse(readFileSync(recordFile, 'utf8')) as { pid: number; identity?: string | null };
    if (!record.identity || processIdentity(record.pid) !== record.identity) return;
    process.kill(group ? -record.pid : record.pid, 'SIGKILL');
  } catch {
    // no record, or the process is gone
  }
}

/** Ends every agent server and the proxy left in a work directory (after an agent was stopped with SIGTERM or SIGKILL). */
export function killLeftoverServers(workDir: string): void {
  if (!existsSync(workDir)) return;
  killRecorded(join(workDir, '.proxy', 'proxy.json'), false);
  for (const deployment of readdirSync(workDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)) {
    const dir = join(workDir, deployment);
    for (const entry of existsSync(dir) ? readdirSync(dir) : []) {
      if (entry.endsWith('.agent')) killRecorded(join(dir, entry, 'server.json'), true);
    }
  }
}

/** Runs the graph through the deployment's URL (the agent's proxy, by Host): POST /runs/wait. */
export async function runGraph(proxyPort: number, hostOrUrl: string): Promise<{ status: number; body: any }> {
  const response = await hostFetch(proxyPort, hostOrUrl, '/runs/wait', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ assistant_id: 'agent', input: {} }),
  });
  return response;
}

/**
 * An HTTP request to the proxy on loopback with a chosen Host header (as curl http://<host>:<port>
 * would send); or, given a deployment's `custom_url` in the path form (`http://127.0.0.1:<port>/d/<name>`,
 * the agent's default), to that URL's path.
 */
export async function hostFetch(
  proxyPort: number,
  hostOrUrl: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: any }> {
  const { request } = await import('node:http');
  const url = /^https?:\/\//.test(hostOrUrl) ? new URL(hostOrUrl) : null;
  const target = url ? { path: `${url.pathname.replace(/\/+$/, '')}${path}`, host: url.host } : { path, host: `${hostOrUrl}:${proxyPort}` };
  return new Promise((resolvePromise, reject) => {
    const req = request(
      { host: '127.0.0.1', port: proxyPort, path: target.path, method: init.method ?? 'GET', headers: { ...init.headers, host: target.host } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => {
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolvePromise({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

/**
 * Processes whose working directory is inside `dir` (an install or build of that checkout): how
 * a test finds a sandboxed command, whose own pid is only valid in its pid namespace.
 */
export function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cwd === dir || cwd.startsWith(`${dir}/`)) found.push(Number(name));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}
