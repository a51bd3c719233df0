/**
 * `npm run demo`: the README's "Deploy for real", run end to end on this machine with nothing to
 * edit. It starts a git server (the system's `git http-backend`) holding a sample LangGraph JS
 * graph (demo/graph), the control plane (trusting that git server as its GitHub host, so an
 * `http://` repository URL on it is accepted), an integration, a `local` listener and its agent,
 * deploys the graph, checks that it answers, and prints its URL and how to call it. Ctrl-C stops
 * everything. Nothing here is simulated: the build is a real `npm ci` in the agent's sandbox.
 *
 *   npm run demo [-- --dir ./data/demo --port 8080 --proxy-port 8180 --git-port 8190 [-- <agent options>]]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { cpSync, createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { demoAgentWorkDir } from './agent-work-dir.ts';
import { startGitServer } from './git-http-backend.ts';

const ROOT = resolve(import.meta.dirname, '..');
const HOST = '127.0.0.1';
const NAME = 'demo-graph';
const REPO = 'acme/demo-graph';

const separator = process.argv.indexOf('--', 2);
const { values } = parseArgs({
  args: separator < 0 ? process.argv.slice(2) : process.argv.slice(2, separator),
  options: {
    dir: { type: 'string', default: './data/demo' },
    port: { type: 'string', default: '8080' },
    'proxy-port': { type: 'string', default: '8180' },
    'git-port': { type: 'string', default: '8190' },
  },
});
const agentArgs = separator < 0 ? [] : process.argv.slice(separator + 1);
const dir = resolve(values.dir);
const children: ChildProcess[] = [];

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function fail(message: string): Promise<never> {
  process.stderr.write(`demo: ${message}\n`);
  await stopAll();
  process.exit(1);
}

/**
 * Stops the agent first (SIGINT: its proxy and agent servers too), then the control plane, each
 * waited for: a child whose output pipe closed under it could not finish stopping.
 */
async function stopAll(): Promise<void> {
  for (const child of children.toReversed()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGINT');
    await exited;
  }
}

/** Starts a script of this repository with this Node and waits for a line of its output to match `ready`. */
function startChild(script: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  // A process group of its own: Ctrl-C reaches the demo alone, which stops its children in order, once each.
  const child = spawn(process.execPath, [join(ROOT, script), ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.push(child);
  // Each child's output goes to <dir>/<server|agent>.log, for whoever wants to see what happened.
  const log = createWriteStream(join(dir, `${basename(dirname(script))}.log`));
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  let output = '';
  return new Promise((resolveStart, reject) => {
    const onData = (chunk: Buffer) => {
      if (output.length > 65_536) return;
      output += chunk.toString();
      const match = ready.exec(output);
      if (match) resolveStart({ child, match });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}:\n${output}`)));
  });
}

async function api(base: string, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) await fail(`${method} ${path} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A bare repository under the git server's root holding demo/graph as one commit on `main`. */
function makeRepository(gitRoot: string): void {
  const bare = join(gitRoot, `${REPO}.git`);
  const work = join(dir, 'graph-work');
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Demo', '-c', 'user.email=demo@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd, stdio: 'pipe' });
  mkdirSync(bare, { recursive: true });
  git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  cpSync(join(ROOT, 'demo/graph'), work, { recursive: true, filter: (src) => !src.includes('node_modules') });
  git(work, 'init', '--quiet', '--initial-branch=main');
  git(work, 'add', '-A');
  git(work, 'commit', '--quiet', '-m', 'A sample LangGraph graph');
  git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
}

async function main(): Promise<void> {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
  } catch {
    await fail('the local agent builds in a bubblewrap sandbox: install it first (apt-get install bubblewrap), then run npm run demo again');
  }
  // Each run starts from nothing: its own database, repository and agent work directory.
  rmSync(dir, { recursive: true, force: true });
  const agentWorkDir = demoAgentWorkDir(dir);
  rmSync(agentWorkDir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const gitRoot = join(dir, 'git');
  makeRepository(gitRoot);
  const git = await startGitServer(gitRoot, HOST, Number(values['git-port']));
  say(`demo: git server on http://${HOST}:${git.port}/${REPO}.git (git http-backend)`);

  const key = randomBytes(24).toString('hex');
  const server = await startChild(
    'server/main.ts',
    [],
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: join(dir, 'control-plane.db'),
      BOOTSTRAP_API_KEY: key,
      HOST,
      PORT: values.port,
      // The demo's git server stands in for GitHub: repositories on it may be named over http://.
      GITHUB_URL: `http://${HOST}:${git.port}`,
      RECONCILE_INTERVAL_MS: '0',
    },
    /"msg":"listening".*?"port":(\d+)/,
  );
  const base = `http://${HOST}:${server.match[1]}`;
  say(`demo: control plane on ${base} (API key ${key})`);

  const workspace = (await api(base, key, 'GET', '/v1/workspaces'))[0];
  const integration = await api(base, key, 'POST', '/v1/integrations/github', { installation_id: randomInt(1_000, 1_000_000), name: 'demo' });
  const listener = await api(base, key, 'POST', '/v2/listeners', { compute_type: 'local', compute_id: 'demo' });
  const { token } = await api(base, key, 'POST', `/v2/listeners/${listener.id}/tokens`);
  await api(base, key, 'PATCH', `/v1/workspaces/${workspace.id}`, { default_listener_id: listener.id });

  const agent = await startChild(
    'agent/main.ts',
    ['--url', base, '--listener', listener.id, '--proxy-port', values['proxy-port'], '--work-dir', agentWorkDir, ...agentArgs],
    { ...process.env, CONTROL_PLANE_AGENT_TOKEN: token },
    /proxy listening on http:\/\/[^:]+:(\d+)[\s\S]*agent: serving listener/,
  );
  const proxyPort = agent.match[1];
  say(`demo: local agent serving listener ${listener.id}, its proxy on http://${HOST}:${proxyPort}`);

  const deployment = await api(base, key, 'POST', '/v2/deployments', {
    name: NAME,
    source: 'github',
    source_config: { integration_id: integration.id, repo_url: `http://${HOST}:${git.port}/${REPO}.git`, deployment_type: 'dev', build_on_push: false },
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
  });
  say(`demo: deploying ${NAME} (npm ci and the LangGraph server in the sandbox; the first build downloads packages)`);
  const revisionPath = `/v2/deployments/${deployment.id}/revisions/${deployment.latest_revision_id}`;
  let status = '';
  for (;;) {
    const revision = await api(base, key, 'GET', revisionPath);
    if (revision.status !== status) say(`demo:   ${(status = revision.status)}`);
    if (revision.status === 'DEPLOYED') break;
    if (/FAILED|CANCELLED/.test(revision.status)) {
      const logs = await api(base, key, 'GET', `${revisionPath}/logs?type=build&limit=50`);
      await fail(`${revision.status}: ${revision.status_message}\n${logs.logs.map((l: { message: string }) => l.message).join('\n')}`);
    }
    await new Promise((done) => setTimeout(done, 500));
  }
  const url = (await api(base, key, 'GET', `/v2/deployments/${deployment.id}`)).source_config.custom_url as string;
  // Deployment URLs need an API key of the deployment's workspace, as on the hosted product.
  const answer = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ assistant_id: 'agent', input: { name: 'demo' } }),
  });
  if (!answer.ok) await fail(`${url}/runs/wait answered ${answer.status}: ${await answer.text()}`);
  const run = `{"assistant_id":"agent","input":{"name":"you"}}`;
  say(`
demo: ${NAME} is deployed and answers at
  ${url}
  (also by host name: http://${NAME}.localhost:${proxyPort}, where the client resolves *.localhost, as curl and browsers do)

  (every request but GET /ok carries an API key of the deployment's workspace: X-Api-Key)

  curl -s ${url}/runs/wait -H 'X-Api-Key: ${key}' -H 'Content-Type: application/json' -d '${run}'
  node -e 'fetch("${url}/runs/wait", {method: "POST", headers: {"x-api-key": "${key}", "content-type": "application/json"}, body: JSON.stringify(${run})}).then((r) => r.json()).then(console.log)'
  python3 -c 'import json, urllib.request as u; print(json.load(u.urlopen(u.Request("${url}/runs/wait", data=json.dumps(${run}).encode(), headers={"X-Api-Key": "${key}", "Content-Type": "application/json"}))))'

  API: export API=${base} KEY=${key}   (curl -s $API/v2/deployments -H "X-Api-Key: $KEY")
demo: ready (Ctrl-C stops the agent, its servers and the control plane; their output: ${join(dir, 'server.log')}, ${join(dir, 'agent.log')})`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void stopAll().then(() => process.exit(0)));
}
main().catch((error: unknown) => fail(error instanceof Error ? error.message : String(error)));
