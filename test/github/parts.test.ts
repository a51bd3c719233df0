import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubAppFrom, installPageUrl } from '../../server/github/app-settings.ts';
import { GithubApi } from '../../server/github/github-api.ts';
import { GithubPace } from '../../server/github/github-pace.ts';
import { InstallationTokens } from '../../server/github/installation-tokens.ts';
import { rateLimitedUntil } from '../../server/github/rate-limits.ts';
import { describe as describeStatus, planFor } from '../../server/github/status-plan.ts';
import { gitTokenEnv } from '../../shared/git-auth.ts';
import { repositoryOnHost } from '../../shared/repo-url.ts';
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
    await expect(new InstallationTokens(new GithubApi(app)).forRepository(installation, { owner: 'other', name: 'x' })).rejects.toThrow(
      "GitHub did not accept the App's credentials",
    );
  });

  it('makes the install page on github.com and on GitHub Enterprise Server, with no host written in', () => {
    expect(installPageUrl({ webUrl: 'https://github.com', apiUrl: 'https://api.github.com', slug: 'deployer' })).toBe(
      'https://github.com/apps/deployer/installations/new',
    );
    expect(installPageUrl({ webUrl: 'https://ghe.example', apiUrl: 'https://ghe.example/api/v3', slug: 'deployer' })).toBe(
      'https://ghe.example/github-apps/deployer/installations/new',
    );
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

  it('holds 200 pushes of one installation under 80 writes a minute and 500 an hour, while another installation goes at once', () => {
    let now = 1_000_000;
    const pace = new GithubPace({ perMinute: 80, perHour: 500 }, () => now);
    const sent: number[] = [];
    // 200 pushes at once, 5 writes each (a deployment, its statuses, the check run): every write waits its turn.
    for (let write = 0; write < 200 * 5; write++) {
      for (let wait = pace.take(1); wait > 0; wait = pace.take(1)) {
        // Another installation is not held up by this one's queue.
        if (write === 400) expect(pace.take(2)).toBe(0);
        now += wait;
      }
      sent.push(now);
    }
    const most = (windowMs: number) => Math.max(...sent.map((at) => sent.filter((t) => t >= at && t < at + windowMs).length));
    expect(most(60_000)).toBe(80);
    expect(most(3_600_000)).toBe(500);
    // The first 80 went at once: a burst under the limit is not slowed.
    expect(sent[79]).toBe(1_000_000);
    expect(sent[80]).toBe(1_060_000);
  });

  it("pauses only the installation GitHub rate-limited, as long as GitHub's rules say", () => {
    const now = 1_000_000;
    const pace = new GithubPace({ perMinute: 80, perHour: 500 }, () => now);
    pace.pause(1, rateLimitedUntil(new Headers({ 'retry-after': '30' }), 0, now));
    expect(pace.take(1)).toBe(30_000);
    expect(pace.take(2)).toBe(0);
    const reset = Math.floor((now + 90_000) / 1000);
    expect(rateLimitedUntil(new Headers({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) }), 0, now)).toBe(reset * 1000);
    // No header (a secondary limit's bare 403): at least a minute, then doubling.
    expect(rateLimitedUntil(new Headers(), 0, now)).toBe(now + 60_000);
    expect(rateLimitedUntil(new Headers(), 2, now)).toBe(now + 240_000);
    expect(rateLimitedUntil(new Headers({ 'x-ratelimit-remaining': '12' }), 0, now)).toBe(now + 60_000);
    // Never more than an hour, whatever a header says.
    expect(rateLimitedUntil(new Headers({ 'retry-after': '999999' }), 0, now)).toBe(now + 3_600_000);
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
