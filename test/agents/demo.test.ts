import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { demoAgentWorkDir } from '../../demo/agent-work-dir.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { killLeftoverServers, SHARED_TEST_CACHE } from './harness.ts';

/**
 * The README's "Deploy for real" as a newcomer runs it: `npm run demo` in a fresh clone of this
 * repository (its committed HEAD; node_modules linked from this checkout instead of a two-minute
 * `npm install`). Real git over HTTP (`git http-backend`), the real server and `local` agent, a
 * real `npm ci` in the sandbox; only the package cache is the tests' shared one.
 */
describe('npm run demo, from a fresh clone', () => {
  const root = mkdtempSync(join(tmpdir(), 'cp-demo-'));
  // A clone where the agent's sandbox user may pass (mkdtemp makes 0700): the agent binds its relay from it.
  chmodSync(root, 0o711);
  const clone = join(root, 'clone');
  const dataDir = join(root, 'data');
  let demo: ChildProcess | undefined;

  afterAll(async () => {
    if (demo && demo.exitCode === null && demo.signalCode === null) {
      const exited = new Promise((done) => demo!.once('exit', done));
      process.kill(-demo.pid!, 'SIGINT');
      await exited;
    }
    killLeftoverServers(demoAgentWorkDir(dataDir));
    rmSync(demoAgentWorkDir(dataDir), { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  });

  it('deploys the sample graph and prints a URL that answers from curl, Node and Python; Ctrl-C stops it all', { timeout: 300_000 }, async () => {
    execFileSync('git', ['clone', '--quiet', ROOT, clone]);
    symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));

    // As typed in a terminal (its own process group, so Ctrl-C reaches every process of it).
    demo = spawn(
      'npm',
      [
        'run',
        'demo',
        '--',
        '--dir',
        dataDir,
        '--port',
        '0',
        '--proxy-port',
        '0',
        '--git-port',
        '0',
        '--',
        '--cache-dir',
        SHARED_TEST_CACHE,
        '--pass-env',
        'npm_config_prefer_offline',
      ],
      { cwd: clone, env: { ...process.env, npm_config_prefer_offline: 'true' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let output = '';
    demo.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    demo.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await new Promise<void>((ready, failed) => {
      const check = () => output.includes('demo: ready') && ready();
      demo!.stdout!.on('data', check);
      demo!.once('exit', (code) => failed(new Error(`npm run demo exited with ${code}:\n${output}`)));
    });

    // The URL it prints is the path form on loopback: Node's fetch reaches it without any DNS.
    const url = /answers at\n\s+(http:\/\/127\.0\.0\.1:\d+\/d\/demo-graph)\n/.exec(output)?.[1];
    expect(url, output).toBeDefined();
    // Deployment URLs need the workspace's key (the one the demo prints); without it, 401.
    const key = /\(API key ([0-9a-f]{48})\)/.exec(output)?.[1];
    expect(key, output).toBeDefined();
    const runFrom = (headers: Record<string, string>) =>
      fetch(`${url}/runs/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ assistant_id: 'agent', input: { name: 'fetch' } }),
      });
    expect((await runFrom({})).status).toBe(401);
    const viaFetch = await runFrom({ 'x-api-key': key! });
    expect(viaFetch.status).toBe(200);
    expect(((await viaFetch.json()) as { answer: string }).answer).toBe('hello, fetch, from a graph deployed by the control plane');

    // The commands it prints for curl, Node and Python, run as printed.
    // Python only where the machine has it (the README's two commands do not install it).
    const hasPython = spawnSync('python3', ['--version']).status === 0;
    for (const tool of hasPython ? ['curl', 'node', 'python3'] : ['curl', 'node']) {
      const command = output.split('\n').find((line) => line.trimStart().startsWith(`${tool} `));
      expect(command, output).toBeDefined();
      const answer = execFileSync('sh', ['-c', command!], { encoding: 'utf8' });
      expect(answer, `${tool}: ${command}`).toContain('hello, you, from a graph deployed by the control plane');
    }

    // By host name, as curl resolves *.localhost itself.
    const hostUrl = /by host name: (http:\/\/demo-graph\.localhost:\d+)/.exec(output)?.[1];
    expect(hostUrl, output).toBeDefined();
    expect(execFileSync('curl', ['-s', `${hostUrl}/ok`], { encoding: 'utf8' })).toBe('{"ok":true}');

    // Ctrl-C: the demo, its agent (proxy and agent server included) and the control plane stop.
    const exited = new Promise((done) => demo!.once('exit', done));
    process.kill(-demo.pid!, 'SIGINT');
    await exited;
    await expect(fetch(`${url}/ok`)).rejects.toThrow();
  });
});
