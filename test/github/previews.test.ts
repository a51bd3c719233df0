import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, revisionsOf, sha } from '../webhooks/github.ts';
import { startGithubScene } from './scene.ts';
import type { GithubStandIn } from './stand-in.ts';

const SECRET = 'preview-webhook-secret';

/**
 * Contract §12, "Pull-request previews", through the real server (sandbox data plane) and the
 * GitHub stand-in: signed `pull_request` deliveries in GitHub's shape make, rebuild and tear down
 * `<name>-pr-<n>`; forks never build; the cap refuses with a status; idle and orphaned previews go.
 */
describe('pull-request previews', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let installation: number;
  let integrationId: string;

  beforeAll(async () => {
    ({ github, server, api, installation, integrationId } = await startGithubScene({
      repos: ['acme/agent', 'acme/labelled', 'acme/idle'],
      env: { GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0', PREVIEW_SWEEP_MS: '300' },
    }));
  });

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await github?.stop();
  });

  const parent = async (repo: string, preview: Record<string, unknown>) => {
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('pv'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: `${github.url}/${repo}`, deployment_type: 'dev', build_on_push: true, preview },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        secrets: [{ name: 'PARENT_SECRET', value: 'parent-value' }],
      }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body as { id: string; name: string; source_config: Record<string, unknown> };
  };
  const pullRequest = async (
    repo: string,
    action: string,
    number: number,
    options: { head?: string; ref?: string; fork?: boolean; labels?: string[]; label?: string } = {},
  ) => {
    const head = options.head ?? sha();
    const htmlUrl = `${github.url}/${repo}`;
    const payload = {
      action,
      number,
      ...(options.label ? { label: { name: options.label } } : {}),
      pull_request: {
        number,
        state: action === 'closed' ? 'closed' : 'open',
        labels: (options.labels ?? []).map((name) => ({ name })),
        head: { sha: head, ref: options.ref ?? `feature-${number}`, repo: { full_name: options.fork ? `someone/${repo.split('/')[1]}` : repo } },
        base: { sha: sha(), ref: 'main', repo: { full_name: repo } },
      },
      repository: { full_name: repo, html_url: htmlUrl, clone_url: `${htmlUrl}.git` },
      installation: { id: installation },
      sender: { login: 'alice' },
    };
    const delivered = await deliver(server.url, 'pull_request', payload, { secret: SECRET });
    expect(delivered.status).toBe(202);
    return { head, entry: await processedDelivery(api, delivered.id) };
  };
  const previewNamed = async (name: string) =>
    ((await api.get(`/v2/deployments?name_contains=${encodeURIComponent(name)}&limit=100`)).body.resources as any[]).find((d) => d.name === name);

  it('builds a preview per pull request, rebuilds on synchronize, tears it down on close, never for a fork, and refuses past max_concurrent', async () => {
    const main = await parent('acme/agent', { trigger: 'pull_request', max_concurrent: 2 });
    expect(main.source_config.preview).toMatchObject({ trigger: 'pull_request', max_concurrent: 2 });

    const one = await pullRequest('acme/agent', 'opened', 1);
    const preview = await eventually(() => previewNamed(`${main.name}-pr-1`));
    expect(preview).toMatchObject({ parent_deployment_id: main.id, pull_request: 1, source: 'github' });
    expect(preview.secrets.map((s: { name: string }) => s.name)).toEqual(['PARENT_SECRET']);
    const [first] = await revisionsOf(api, preview.id);
    expect(first.source_revision_config.repo_commit_sha).toBe(one.head);
    await revisionReaches(api, preview.id, first.id, ['DEPLOYED'], 30_000);
    await eventually(async () => (github.deployments.find((d) => d.body.ref === one.head)?.statuses.at(-1)?.state === 'success' ? true : undefined), 30_000);
    const ghDeployment = github.deployments.find((d) => d.body.ref === one.head)!;
    // One environment for every preview of the deployment, not one per pull request.
    expect(ghDeployment.body).toMatchObject({ environment: `${main.name}/preview`, transient_environment: true, production_environment: false });

    // The parent's secrets change later: the preview keeps its snapshot.
    expect(
      (
        await api.patch(`/v2/deployments/${main.id}`, {
          secrets: [
            { name: 'PARENT_SECRET', value: 'x' },
            { name: 'ADDED_LATER', value: 'y' },
          ],
        })
      ).status,
    ).toBe(200);
    const sync = await pullRequest('acme/agent', 'synchronize', 1);
    const rebuilt = await eventually(async () => (await revisionsOf(api, preview.id)).find((r) => r.source_revision_config.repo_commit_sha === sync.head));
    await revisionReaches(api, preview.id, rebuilt.id, ['DEPLOYED'], 30_000);
    expect((await api.get(`/v2/deployments/${preview.id}`)).body.secrets.map((s: { name: string }) => s.name)).toEqual(['PARENT_SECRET']);
    await eventually(async () => (github.deployments.find((d) => d.body.ref === one.head)?.statuses.at(-1)?.state === 'inactive' ? true : undefined), 30_000);

    // A fork's pull request builds nothing.
    const fork = await pullRequest('acme/agent', 'opened', 3, { fork: true });
    expect(fork.entry.reason ?? JSON.stringify(fork.entry)).toContain('fork');
    expect(await previewNamed(`${main.name}-pr-3`)).toBeUndefined();

    // Two at most: the third is refused, and the pull request is told why.
    const two = await pullRequest('acme/agent', 'opened', 2);
    await eventually(() => previewNamed(`${main.name}-pr-2`));
    const twoDeployed = await eventually(async () => github.deployments.find((d) => d.body.ref === two.head), 30_000);
    expect(twoDeployed.body.environment).toBe(`${main.name}/preview`);
    expect(new Set(github.deployments.filter((d) => d.repo === 'acme/agent').map((d) => d.body.environment))).toEqual(new Set([`${main.name}/preview`]));
    const refused = await pullRequest('acme/agent', 'opened', 4);
    expect(await previewNamed(`${main.name}-pr-4`)).toBeUndefined();
    const told = await eventually(async () => github.commitStatuses.find((c) => c.sha === refused.head));
    expect(told.body).toMatchObject({ state: 'error', context: `deploy/${main.name}-pr-4` });
    expect(String(told.body.description)).toContain('max_concurrent');
    expect(String(told.body.description).length).toBeLessThanOrEqual(140);

    // Closed: torn down, its GitHub deployment inactive.
    await pullRequest('acme/agent', 'closed', 1);
    await eventually(async () => ((await api.get(`/v2/deployments/${preview.id}`)).status === 404 ? true : undefined), 30_000);
    await eventually(async () => (github.deployments.find((d) => d.body.ref === sync.head)?.statuses.at(-1)?.state === 'inactive' ? true : undefined), 30_000);

    // Deleting the parent deletes its previews.
    const second = await previewNamed(`${main.name}-pr-2`);
    expect((await api.delete(`/v2/deployments/${main.id}`)).status).toBe(204);
    await eventually(async () => ((await api.get(`/v2/deployments/${second.id}`)).status === 404 ? true : undefined), 30_000);
    expect(github.problems()).toEqual([]);
  });

  it('builds only labelled pull requests when the trigger is a label', async () => {
    const labelled = await parent('acme/labelled', { trigger: 'label', label: 'preview' });
    await pullRequest('acme/labelled', 'opened', 7);
    expect(await previewNamed(`${labelled.name}-pr-7`)).toBeUndefined();
    await pullRequest('acme/labelled', 'labeled', 7, { label: 'preview', labels: ['preview'] });
    const preview = await eventually(() => previewNamed(`${labelled.name}-pr-7`));
    expect(preview.pull_request).toBe(7);
  });

  it('tears down a preview idle past idle_ttl_hours', async () => {
    // 0.0003 h is about a second: the sweep (every 300 ms here) removes it soon after.
    const idle = await parent('acme/idle', { trigger: 'pull_request', idle_ttl_hours: 0.0003 });
    const opened = await pullRequest('acme/idle', 'opened', 9);
    expect(opened.entry.results.some((r: { result: string }) => r.result === 'revision_created')).toBe(true);
    await eventually(async () => ((await previewNamed(`${idle.name}-pr-9`)) === undefined ? true : undefined), 30_000);
    expect(server.output()).toContain('no pull-request activity');
  });

  it('refuses preview settings that cannot work', async () => {
    const bad = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('pv'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: `${github.url}/acme/agent`, deployment_type: 'dev', preview: { trigger: 'label' } },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
    );
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body.detail)).toContain('label');
  });
});
