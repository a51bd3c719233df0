import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markBuilt, processIdentity, stateDirOf } from '../../agent/build-records.ts';
import { AgentClient } from '../../agent/client.ts';
import { eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { killLeftoverServers, serverPidOf } from './harness.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The real agent (`node agent/main.ts`) as a process, against the real control plane served on
 * loopback by the test process. The agent server of a live revision is simulated by a script
 * planted where the repository's own LangGraph.js API server would be
 * (`node_modules/@langchain/langgraph-api/dist/cli/entrypoint.mjs`): it records its pid and never
 * becomes healthy, as a slow server does while the agent restores it. These agents run with
 * `--sandbox none`, so the planted server's pid is the machine's (the sandbox is tested elsewhere).
 */
describe('the local agent process: signals and its state', () => {
  let t: App;
  let server: ServerType;
  let url: string;
  let listener: { listenerId: string; token: string };
  const children: ChildProcess[] = [];
  /** Process groups the tests started, with what identified each when it was recorded (pids are reused). */
  const pids = new Map<number, string | null>();
  const track = (pid: number) => pids.set(pid, processIdentity(pid));
  const workDirs: string[] = [];

  beforeAll(async () => {
    t = await inProcessApp();
    server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((done) => server.once('listening', () => done()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const created = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: `machine-${crypto.randomUUID().slice(0, 6)}` });
    const token = await t.api.post(`/v2/listeners/${created.body.id}/tokens`);
    listener = { listenerId: created.body.id as string, token: token.body.token as string };
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const [pid, identity] of pids) {
      // Only while the pid still names the process recorded: a reused pid may name any process.
      if (!identity || processIdentity(pid) !== identity) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    // SIGTERM leaves the proxy (and live servers) for a next agent: none comes here.
    for (const dir of workDirs) killLeftoverServers(dir);
    (server as import('node:http').Server).closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
    t.close();
  });

  /** A deployment of the listener whose revision is DEPLOYED (moved there through the agent routes). */
  const liveDeployment = async () => {
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('live'), listener.listenerId));
    expect(created.status).toBe(201);
    const client = new AgentClient({ url, token: listener.token, listenerId: listener.listenerId });
    const work = await eventually(async () => {
      const w = await client.claim('setup', 1);
      return w && w.deployment.id === created.body.id ? w : undefined;
    }, 10_000);
    await client.transition(work.claim_id, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' });
    await client.transition(work.claim_id, { from: 'DEPLOYING', to: 'DEPLOYED' });
    return { deploymentId: created.body.id as string, revisionId: created.body.latest_revision_id as string };
  };

  /**
   * A build directory as a finished build leaves it, whose "server" is the planted script: one
   * that never becomes healthy, or (`healthy`) a real HTTP server answering `GET /ok` on `$PORT`.
   */
  const plantBuild = (workDir: string, deploymentId: string, revisionId: string, pidFile: string, options: { healthy?: boolean; built?: boolean } = {}) => {
    const buildDir = join(workDir, deploymentId, revisionId);
    const api = join(buildDir, 'node_modules', '@langchain', 'langgraph-api', 'dist');
    mkdirSync(join(api, 'cli'), { recursive: true });
    writeFileSync(join(buildDir, 'langgraph.json'), JSON.stringify({ node_version: '20', graphs: { agent: './graph.js:graph' } }));
    writeFileSync(join(api, 'preload.mjs'), '');
    const serve = options.healthy
      ? `require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');`
      : 'setInterval(() => {}, 1000);';
    writeFileSync(
      join(api, 'cli', 'entrypoint.mjs'),
      `import { createRequire } from 'node:module';\nimport { writeFileSync } from 'node:fs';\nconst require = createRequire(import.meta.url);\nwriteFileSync(${JSON.stringify(pidFile)}, String(process.pid));\nconsole.log('simulated agent server starting');\n${serve}\n`,
    );
    void chmodSync;
    if (options.built ?? true) markBuilt(buildDir, { sha: null, graph_config_path: 'langgraph.json' });
    return buildDir;
  };

  /** A process that has nothing to do with the agent, in a process group of its own. */
  const unrelatedProcess = () => {
    const child = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    children.push(child);
    track(child.pid!);
    return child.pid!;
  };

  const spawnAgent = (workDir: string) => {
    const child = spawn(
      process.execPath,
      [
        resolve(ROOT, 'agent/main.ts'),
        '--url',
        url,
        '--listener',
        listener.listenerId,
        '--work-dir',
        workDir,
        '--proxy-port',
        '0',
        '--start-timeout',
        '120',
        '--sandbox',
        'none',
      ],
      { cwd: ROOT, env: { ...process.env, CONTROL_PLANE_AGENT_TOKEN: listener.token }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    workDirs.push(workDir);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    return { child, output: () => output, exited };
  };

  it('SIGTERM while restoring a live revision stops the agent and the server it had started', { timeout: 60_000 }, async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-signal-'));
    const { deploymentId, revisionId } = await liveDeployment();
    const pidFile = join(workDir, 'server.pid');
    plantBuild(workDir, deploymentId, revisionId, pidFile);
    const agent = spawnAgent(workDir);
    // The restore has started the (never healthy) server: start() is still under way.
    const serverPid = await eventually(async () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : undefined), 30_000);
    track(serverPid);
    expect(alive(serverPid)).toBe(true);
    expect(agent.output()).not.toContain('agent: serving listener');
    agent.child.kill('SIGTERM');
    const code = await agent.exited;
    expect(code).toBe(0);
    // Nothing the agent started outlives it (before the fix the server kept running, holding its port).
    await eventually(async () => (alive(serverPid) ? undefined : true), 10_000);
    expect(agent.output()).toContain('SIGTERM: stopping');
  });

  it('a second signal exits at once, and the exit still kills the server’s process group', { timeout: 60_000 }, async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-signal2-'));
    const { deploymentId, revisionId } = await liveDeployment();
    const pidFile = join(workDir, 'server.pid');
    plantBuild(workDir, deploymentId, revisionId, pidFile);
    const agent = spawnAgent(workDir);
    const serverPid = await eventually(async () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : undefined), 30_000);
    track(serverPid);
    agent.child.kill('SIGINT');
    agent.child.kill('SIGINT');
    await agent.exited;
    await eventually(async () => (alive(serverPid) ? undefined : true), 10_000);
  });

  const serving = (agent: ReturnType<typeof spawnAgent>) =>
    eventually(async () => (agent.output().includes('agent: serving listener') ? true : undefined), 30_000);

  it('takes no file of the checked-out tree for its state: a committed `.agent-built` is not a finished build, a committed pid file kills nothing', {
    timeout: 60_000,
  }, async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-state-'));
    const { deploymentId, revisionId } = await liveDeployment();
    const pidFile = join(workDir, 'server.pid');
    // The repository ships files named as the agent's state once was; the build never finished.
    const buildDir = plantBuild(workDir, deploymentId, revisionId, pidFile, { healthy: true, built: false });
    const unrelated = unrelatedProcess();
    writeFileSync(join(buildDir, '.agent-built'), JSON.stringify({ sha: null, graph_config_path: 'langgraph.json' }));
    writeFileSync(join(buildDir, '.agent-server.pid'), String(unrelated));
    const agent = spawnAgent(workDir);
    await serving(agent);
    expect(agent.output()).toContain(`revision ${revisionId} was not built on this machine; not serving it`);
    expect(existsSync(pidFile)).toBe(false);
    expect(alive(unrelated)).toBe(true);
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
    expect(alive(unrelated)).toBe(true);
  });

  it('a restarted agent takes over the server it left running, and never touches a process that merely has the recorded pid now', {
    timeout: 90_000,
  }, async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-orphan-'));
    const { deploymentId, revisionId } = await liveDeployment();
    const pidFile = join(workDir, 'server.pid');
    const buildDir = plantBuild(workDir, deploymentId, revisionId, pidFile, { healthy: true });
    // The state is beside the checkout, not in it.
    expect(existsSync(join(stateDirOf(buildDir), 'built.json'))).toBe(true);

    const first = spawnAgent(workDir);
    await serving(first);
    const orphan = serverPidOf(buildDir);
    track(orphan);
    expect(existsSync(join(buildDir, '.agent-server.pid'))).toBe(false);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(alive(orphan)).toBe(true);

    const second = spawnAgent(workDir);
    await serving(second);
    // The server a killed agent left serving goes on serving: the new agent routes to it.
    expect(second.output()).toContain(`took over the agent server (pid ${orphan})`);
    expect(alive(orphan)).toBe(true);
    const restarted = serverPidOf(buildDir);
    expect(restarted).toBe(orphan);
    track(restarted);
    second.child.kill('SIGKILL');
    await second.exited;

    // Simulated reboot: the recorded server is gone and its pid now names an unrelated process.
    process.kill(-restarted, 'SIGKILL');
    await eventually(async () => (alive(restarted) ? undefined : true), 10_000);
    const unrelated = unrelatedProcess();
    const record = JSON.parse(readFileSync(join(stateDirOf(buildDir), 'server.json'), 'utf8')) as { pid: number; identity: string };
    writeFileSync(join(stateDirOf(buildDir), 'server.json'), JSON.stringify({ ...record, pid: unrelated }));
    const third = spawnAgent(workDir);
    await serving(third);
    expect(third.output()).toContain(`pid ${unrelated} was recorded for this build, but it is another process now`);
    expect(alive(unrelated)).toBe(true);
    track(serverPidOf(buildDir));
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
    expect(alive(unrelated)).toBe(true);
  });
});
