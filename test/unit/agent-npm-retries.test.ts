import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCommand } from '../../agent/processes.ts';
import { findBwrap } from '../../agent/sandbox.ts';
import { SandboxSetup } from '../../agent/sandbox-setup.ts';
import { giveTo, sandboxUser } from '../../agent/sandbox-user.ts';

function available(check: () => unknown): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}
const hasBwrap = available(() => findBwrap());
const hasNpm = available(() => execFileSync('npm', ['--version'], { stdio: 'pipe' }));

/**
 * A sandboxed install's npm retries a failed or slow registry read with backoff instead of failing
 * the build at once: the settings the agent gives install commands, read back by the real npm in
 * the real bubblewrap sandbox of an install (its configuration, not the network: the sandbox has
 * none here). An operator's own value, passed with --pass-env, wins.
 */
describe.skipIf(!hasBwrap || !hasNpm)('npm retries in the sandboxed install', () => {
  const workDir = mkdtempSync(join(tmpdir(), 'cp-npm-retries-'));
  // As the agent keeps its work directory with a sandbox user: its bwrap passes through to bind a checkout.
  chmodSync(workDir, 0o711);
  afterAll(() => rmSync(workDir, { recursive: true, force: true }));

  const npmConfigInSandbox = async (env: NodeJS.ProcessEnv, passEnv: string[]) => {
    const user = sandboxUser(undefined);
    const setup = new SandboxSetup({
      workDir,
      sandbox: 'bwrap',
      bwrapPath: findBwrap(),
      sandboxUser: user,
      egress: { mode: 'none', allow: [] },
      pastaPath: null,
      limits: null,
      env,
      passEnv,
    });
    const deploymentId = crypto.randomUUID();
    const checkout = join(workDir, deploymentId, crypto.randomUUID());
    mkdirSync(checkout, { recursive: true });
    writeFileSync(join(checkout, 'package.json'), '{"name":"retries","version":"1.0.0"}');
    giveTo(user, join(workDir, deploymentId));
    const lines: string[] = [];
    const result = await runCommand('npm config get fetch-retries fetch-retry-factor fetch-retry-mintimeout fetch-retry-maxtimeout', {
      cwd: checkout,
      env: setup.buildEnv(),
      sandbox: setup.sandboxFor(deploymentId, checkout, checkout, null),
      signal: new AbortController().signal,
      onLine: (line) => lines.push(line),
    });
    expect(result.code, lines.join('\n')).toBe(0);
    return Object.fromEntries(lines.filter((line) => line.includes('=')).map((line) => line.split('=').map((part) => part.trim()) as [string, string]));
  };

  it('retries a registry read 5 times, from 2 s doubling to 30 s', async () => {
    expect(await npmConfigInSandbox({}, [])).toEqual({
      'fetch-retries': '5',
      'fetch-retry-factor': '2',
      'fetch-retry-mintimeout': '2000',
      'fetch-retry-maxtimeout': '30000',
    });
  });

  it('takes the operator’s own retries passed with --pass-env', async () => {
    const config = await npmConfigInSandbox({ npm_config_fetch_retries: '9' }, ['npm_config_fetch_retries']);
    expect(config['fetch-retries']).toBe('9');
    expect(config['fetch-retry-mintimeout']).toBe('2000');
  });
});
