import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubAppFrom, repositoryOnHost } from '../../server/github/app-settings.ts';
import { GithubApi } from '../../server/github/github-api.ts';
import { GithubPace } from '../../server/github/github-pace.ts';
import { InstallationTokens } from '../../server/github/installation-tokens.ts';
import { describe as describeStatus, planFor } from '../../server/github/status-plan.ts';
import { gitTokenEnv } from '../../shared/git-auth.ts';
import { GithubStandIn } from './stand-in.ts';

describe('the GitHub parts on their own', () => {
  let github: GithubStandIn;
  beforeAll(async () => {
    github = await new GithubStandIn().start();
  });
  afterAll(async () => {
    await github?.stop();
  });

  it('mints a token narrowed to one repository, reuses it until 5 minutes before it expires, then mints again', async () => {
    const installation = github.install({ login: 'acme', id: 1, type: 'Organization' }, ['acme/one', 'acme/two'], []);
    const app = githubAppFrom({ ...github.serverEnv(), GITHUB_APP_PRIVATE_KEY_FILE: undefined, GITHUB_APP_ID: github.appId } as never)!;
    let now = Date.now();
    // The App JWT is signed on the real clock (the stand-in checks it against its own); the cache's clock moves.
    const tokens = new InstallationTokens(new GithubApi(app), () => now);
    const first = await tokens.forRepository(installation, { owner: 'acme', name: 'one' });
    const [again] = await Promise.all([
      tokens.forRepository(installation, { owner: 'acme', name: 'one' }),
      tokens.forRepository(installation, { owner: 'acme', name: 'one' }),
    ]);
    expect(again).toBe(first);
    expect(github.mintedTokens()).toHaveLength(1);
    expect(github.mintedTokens()[0]).toMatchObject({ repositories: ['acme/one'], permissions: { contents: 'read' } });
    // 56 minutes later the hour-long token has 4 minutes left: too little to start a clone with.
    now += 56 * 60_000;
    const later = await tokens.forRepository(installation, { owner: 'acme', name: 'one' });
    expect(later).not.toBe(first);
    expect(github.mintedTokens()).toHaveLength(2);
    // The stand-in checked every App JWT (RS256, iss, iat, exp ≤ 10 min) and every request against GitHub's description.
    expect(github.problems()).toEqual([]);
  });

  it('refuses an App JWT signed with another key', async () => {
    const installation = github.install({ login: 'other', id: 2, type: 'User' }, ['other/x'], []);
    const impostor = new GithubStandIn();
    const app = githubAppFrom({ ...github.serverEnv(), GITHUB_APP_PRIVATE_KEY: impostor.privateKeyPem } as never)!;
    await expect(new InstallationTokens(new GithubApi(app)).forRepository(installation, { owner: 'other', name: 'x' })).rejects.toThrow(/401/);
  });

  it("knows which repository URLs are on the App's host", () => {
    expect(repositoryOnHost('https://github.com/Acme/App.git', 'https://github.com')).toEqual({ owner: 'Acme', name: 'App' });
    expect(repositoryOnHost('git@github.com:acme/app.git', 'https://github.com')).toEqual({ owner: 'acme', name: 'app' });
    expect(repositoryOnHost('ssh://git@github.com/acme/app', 'https://github.com')).toEqual({ owner: 'acme', name: 'app' });
    expect(repositoryOnHost('https://gitlab.com/acme/app', 'https://github.com')).toBeNull();
    expect(repositoryOnHost('http://github.com/acme/app', 'https://github.com')).toBeNull();
    expect(repositoryOnHost('http://ghe.internal:8080/acme/app', 'http://ghe.internal:8080')).toEqual({ owner: 'acme', name: 'app' });
    expect(repositoryOnHost('http://ghe.internal:9999/acme/app', 'http://ghe.internal:8080')).toBeNull();
    expect(repositoryOnHost('https://github.com/acme/app/tree/main', 'https://github.com')).toBeNull();
  });

  it('gives git the token through its environment only, for that URL only', () => {
    const env = gitTokenEnv(
      { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.askPass', GIT_CONFIG_VALUE_0: '' },
      'https://github.com/acme/app.git',
      'ghs_secret',
    );
    expect(env.GIT_CONFIG_COUNT).toBe('2');
    expect(env.GIT_CONFIG_KEY_1).toBe('http.https://github.com/acme/app.git.extraHeader');
    expect(env.GIT_CONFIG_VALUE_1).toBe(`Authorization: Basic ${Buffer.from('x-access-token:ghs_secret').toString('base64')}`);
    // git itself reads it so, scoped to the URL, and writes none of it into a repository's config.
    const dir = mkdtempSync(join(tmpdir(), 'cp-git-env-'));
    execFileSync('git', ['init', '-q', dir]);
    const seen = execFileSync('git', ['-C', dir, 'config', '--get-urlmatch', 'http.extraHeader', 'https://github.com/acme/app.git/info/refs'], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    expect(seen.trim()).toBe(env.GIT_CONFIG_VALUE_1);
    const elsewhere = (() => {
      try {
        return execFileSync('git', ['-C', dir, 'config', '--get-urlmatch', 'http.extraHeader', 'https://github.com/other/repo.git/info/refs'], {
          env: { ...process.env, ...env },
          encoding: 'utf8',
        });
      } catch {
        return '';
      }
    })();
    expect(elsewhere).toBe('');
    expect(execFileSync('git', ['-C', dir, 'config', '--local', '--list'], { encoding: 'utf8' })).not.toContain('ghs_secret');
  });

  it('paces writes evenly and pauses all of them when GitHub says so', () => {
    let now = 1_000_000;
    const pace = new GithubPace(60, () => now);
    expect(pace.take()).toBe(0);
    expect(pace.take()).toBe(1000);
    now += 1000;
    expect(pace.take()).toBe(0);
    now += 1000;
    expect(pace.pauseFrom(new Headers({ 'retry-after': '30' }))).toBe(now + 30_000);
    expect(pace.take()).toBe(30_000);
    expect(pace.pauseFrom(new Headers({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor((now + 90_000) / 1000)) }))).toBe(
      Math.floor((now + 90_000) / 1000) * 1000,
    );
    expect(pace.pauseFrom(new Headers({ 'x-ratelimit-remaining': '12' }))).toBeNull();
  });

  it('collapses revision stages into GitHub states, each description within 140 characters', () => {
    expect(planFor('QUEUED', null)).toMatchObject({ deployment: 'queued', commit: 'pending' });
    expect(planFor('DEPLOYING', null)).toMatchObject({ deployment: 'in_progress', commit: 'pending' });
    expect(planFor('DEPLOYED', null)).toMatchObject({ deployment: 'success', commit: 'success', replacesOthers: true });
    const failed = planFor('BUILD_FAILED', 'x'.repeat(500))!;
    expect(failed).toMatchObject({ deployment: 'failure', commit: 'failure' });
    expect(failed.description.length).toBe(140);
    expect(describeStatus('a\n b')).toBe('a b');
    expect(planFor('DELETED', null)).toMatchObject({ deployment: 'inactive', commit: null });
  });
});
