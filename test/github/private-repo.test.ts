import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AgentProcess, graphRepo, killLeftoverServers, localListener, runGraph, SETTLED, startAgent } from '../agents/harness.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { withInstallSlot } from '../helpers/install-slots.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { revisionsOf } from '../webhooks/github.ts';
import { linkThroughSetup } from './link.ts';
import { GithubStandIn } from './stand-in.ts';

/**
 * Contract §12, "Private repositories build": a private repository served by real git
 * (`git http-backend`) that opens only to a token the GitHub stand-in minted for it, built and
 * served by the real `local` agent, then a push found by the reconciler alone. Nothing of the
 * token may be left in a log, a command line, the checkout or the database.
 */
describe("a private repository on the App's GitHub", () => {
  let github: GithubStandIn | undefined;
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  let api: Api;
  let integrationId: string;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-work-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
    await github?.stop();
  });

  it('builds and serves through the local agent with a narrowed token, and the reconciler reads its head', { timeout: 600_000 }, async () => {
    github = await new GithubStandIn().start();
    // The repository lives where the stand-in's git server serves it: acme/remote.
    mkdirSync(join(github.reposRoot, 'acme'));
    const repo = graphRepo(join(github.reposRoot, 'acme'));
    github.createRepository('acme/unrelated');
    const installation = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/remote', 'acme/unrelated'], ['alice']);
    const repoUrl = `${github.url}/acme/remote`;
    // Private: without a token, git gets nothing.
    // (Asynchronously: the stand-in answers from this very process.)
    const anonymous = await new Promise<number | null>((resolve) => {
      const child = spawn('git', ['ls-remote', `${repoUrl}.git`], {
        env: { PATH: process.env.PATH, GIT_TERMINAL_PROMPT: '0', HOME: workDir },
        stdio: 'ignore',
      });
      child.on('close', resolve);
    });
    expect(anonymous).not.toBe(0);
    expect(github.gitRequests.map((r) => r.authorized)).toEqual([false]);
    const anonymousRequests = github.gitRequests.length;

    server = await startServerProcess({ ...github.serverEnv(), RECONCILE_INTERVAL_MS: '1000', AGENT_LEASE_MS: '10000' });
    api = apiClient(server.url, server.apiKey);
    const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
    integrationId = await linkThroughSetup(server.url, api, github, installation, 'alice');
    const { listenerId, token } = await localListener(api, workspaceId);
    agent = await startAgent({ url: server.url, token, listenerId, workDir });

    // Its npm ci downloads from the registry: one of the machine's install slots while it builds.
    const { created, first } = await withInstallSlot(async () => {
      const created = await api.post(
        '/v2/deployments',
        githubBody(uniqueName('private'), integrationId, {
          source_config: { integration_id: integrationId, repo_url: repoUrl, deployment_type: 'dev', build_on_push: true },
          source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
          secrets: [{ name: 'GREETING', value: 'hello-from-a-secret' }],
        }),
      );
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      return { created, first: await revisionReaches(api, created.body.id, created.body.latest_revision_id, SETTLED, 300_000) };
    });
    const deploymentId = created.body.id as string;
    const logOf = async (revisionId: string) =>
      ((await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>)
        .map((l) => l.message)
        .join('\n');
    expect(first.status, `${first.status_message}\n${await logOf(first.id)}\n${agent.output()}`).toBe('DEPLOYED');
    expect(first.source_revision_config.repo_commit_sha).toBe(repo.first);
    const deployment = (await api.get(`/v2/deployments/${deploymentId}`)).body;
    const host = deployment.source_config.custom_url;
    expect((await runGraph(agent.proxyPort, host)).body).toMatchObject({ answer: 'the first answer', secret_seen: 'hello-from-a-secret' });

    // A push no webhook reports: the reconciler reads the private head with a token and builds it.
    const second = repo.commit({ 'src/graph.mjs': repo.read('src/graph.mjs').replace('the first answer', 'the second answer') }, 'Answer differently');
    const pushed = await eventually(
      async () => (await revisionsOf(api, deploymentId)).find((r) => r.source_revision_config.repo_commit_sha === second),
      60_000,
      250,
    );
    const swapped = await revisionReaches(api, deploymentId, pushed.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(swapped.status, swapped.status_message).toBe('DEPLOYED');
    expect((await runGraph(agent.proxyPort, host)).body.answer).toBe('the second answer');

    // Every token was narrowed to the one repository; git only ever got in, and only with a
    // read-only contents token (the status sender's own tokens can write statuses, not code).
    const minted = github.mintedTokens();
    expect(minted.some((t) => t.permissions.contents === 'read')).toBe(true);
    for (const t of minted) {
      expect(t.repositories).toEqual(['acme/remote']);
      expect([JSON.stringify({ contents: 'read' }), JSON.stringify({ deployments: 'write', statuses: 'write' })]).toContain(JSON.stringify(t.permissions));
    }
    const ours = github.gitRequests.slice(anonymousRequests);
    expect(ours.length).toBeGreaterThan(0);
    expect(ours.filter((r) => !r.authorized)).toEqual([]);
    expect(ours.every((r) => JSON.stringify(r.tokenPermissions) === JSON.stringify({ contents: 'read' }))).toBe(true);

    // And GitHub heard of both: the first (built from the branch: its commit known once checked out) replaced by the second.
    const states = (commit: string) => github!.deployments.filter((d) => d.body.ref === commit).map((d) => d.statuses.map((s) => s.state));
    await eventually(async () => (states(repo.first)[0]?.at(-1) === 'inactive' && states(second)[0]?.at(-1) === 'success' ? true : undefined), 30_000, 100);
    expect(states(repo.first)).toEqual([['in_progress', 'success', 'inactive']]);
    expect(states(second)).toEqual([['in_progress', 'success']]);
    expect(github.commitStatuses.filter((c) => c.sha === second).map((c) => c.body.state)).toEqual(['pending', 'success']);
    expect(github.problems()).toEqual([]);

    // Nothing of any token anywhere: logs of both processes, the build logs, the checkouts (.git/config
    // included), the database.
    const logs = `${server.output()}\n${agent.output()}\n${await logOf(first.id)}\n${await logOf(swapped.id)}`;
    const database = [server.databasePath, `${server.databasePath}-wal`]
      .map((f) => {
        try {
          return readFileSync(f).toString('latin1');
        } catch {
          return '';
        }
      })
      .join('');
    for (const { token: secret } of minted) {
      const forms = [secret, Buffer.from(`x-access-token:${secret}`).toString('base64')];
      for (const form of forms) {
        expect(logs.includes(form)).toBe(false);
        expect(database.includes(form)).toBe(false);
        const onDisk = spawnSync('grep', ['-rlF', '--', form, workDir], { encoding: 'utf8' });
        expect(onDisk.stdout).toBe('');
      }
    }
    const checkouts = execFileSync('find', [workDir, '-path', '*/.git/config'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    expect(checkouts.length).toBeGreaterThan(0);
    for (const config of checkouts) expect(readFileSync(config, 'utf8')).not.toMatch(/extraheader|authorization/i);
    // After the first mint named the repository, GitHub's answer gave its id: later mints narrow by id.
    const mints = github.exchanges.filter((e) => e.template === '/app/installations/{installation_id}/access_tokens');
    expect(
      mints.some((e) => JSON.stringify((e.body as { repository_ids?: number[] }).repository_ids) === JSON.stringify([github!.repositoryId('acme/remote')])),
    ).toBe(true);
  });

  it("fails a revision of a repository outside the installation's selection at once, saying what to fix, with no anonymous clone", {
    timeout: 120_000,
  }, async () => {
    // The repository exists and git serves it, but the installation was not granted it.
    github!.createRepository('acme/hidden');
    const before = github!.gitRequests.length;
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('hidden'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: `${github!.url}/acme/hidden`, deployment_type: 'dev' },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const failed = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 30_000);
    expect(failed.status).toBe('BUILD_FAILED');
    expect(failed.status_message).toContain('acme/hidden is not among the repositories selected');
    expect(failed.status_message).toContain('Repository access');
    // git was never asked for it, with or without credentials.
    expect(github!.gitRequests.slice(before).filter((r) => r.repo === 'acme/hidden')).toEqual([]);
    expect(github!.problems()).toEqual([]);
  });
});
