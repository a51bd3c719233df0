import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf } from './github.ts';

const SECRET = 'current-webhook-secret';
const PREVIOUS = 'previous-webhook-secret';

describe('GitHub push webhooks against a real server', () => {
  let server: ServerProcess;
  let api: Api;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;
  let repoCounter = 0;

  beforeAll(async () => {
    server = await startServerProcess({
      GITHUB_WEBHOOK_SECRET: SECRET,
      GITHUB_WEBHOOK_SECRET_PREVIOUS: PREVIOUS,
      SANDBOX_STAGE_MS: '50',
      RECONCILE_INTERVAL_MS: '0',
    });
    api = apiClient(server.url, server.apiKey);
    fx = await workspaceFixtures(api);
  });
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  /** A repository no other test pushes to. */
  function repo(): string {
    repoCounter += 1;
    return `acme/agent-${Date.now().toString(36)}-${repoCounter}`;
  }

  async function deployment(repoName: string, options: { buildOnPush?: boolean; ref?: string; repoUrl?: string; integrationId?: string } = {}) {
    const body = githubBody(uniqueName('push'), options.integrationId ?? fx.integrationId, {
      source_config: {
        integration_id: options.integrationId ?? fx.integrationId,
        repo_url: options.repoUrl ?? `https://github.com/${repoName}`,
        deployment_type: 'dev',
        build_on_push: options.buildOnPush ?? true,
      },
      source_revision_config: { repo_ref: options.ref ?? 'main', graph_config_path: 'langgraph.json' },
    });
    const created = await api.post('/v2/deployments', body);
    expect(created.status).toBe(201);
    return created.body as { id: string; latest_revision_id: string };
  }

  async function pushRevisions(deploymentId: string) {
    return (await revisionsOf(api, deploymentId)).filter((r) => r.trigger === 'push');
  }

  it('a signed push to the tracked branch creates exactly one revision of that commit, which is deployed', async () => {
    const name = repo();
    const dep = await deployment(name);
    const payload = pushPayload({ repo: name, installationId: fx.installationId });
    const delivery = await deliver(server.url, 'push', payload, { secret: SECRET });
    expect(delivery.status).toBe(202);
    expect(delivery.body).toEqual({ delivery_id: delivery.id, status: 'queued' });

    const entry = await processedDelivery(api, delivery.id);
    expect(entry).toMatchObject({ event: 'push', outcome: 'revisions_created', ref: 'refs/heads/main', after: payload.after, repository: name });
    expect(entry.results).toEqual([
      expect.objectContaining({ deployment_id: dep.id, result: 'revision_created', revision_id: expect.any(String), reason: null }),
    ]);
    const pushes = await pushRevisions(dep.id);
    expect(pushes).toHaveLength(1);
    expect(pushes[0].id).toBe(entry.results[0].revision_id);
    expect(pushes[0].source_revision_config).toMatchObject({ repo_commit_sha: payload.after, repo_ref: 'main', graph_config_path: 'langgraph.json' });
    const deployed = await revisionReaches(api, dep.id, pushes[0].id, ['DEPLOYED']);
    expect(deployed.status).toBe('DEPLOYED');
    const after = await api.get(`/v2/deployments/${dep.id}`);
    expect(after.body).toMatchObject({ active_revision_id: pushes[0].id, latest_revision_id: pushes[0].id });
    expect(after.body.source_revision_config.repo_commit_sha).toBe(payload.after);
  });

  it('matches the repository URL after normalising the ssh form, .git, a trailing slash and case', async () => {
    const name = repo();
    const ssh = await deployment(name, { repoUrl: `git@github.com:${name.toUpperCase()}.git` });
    const https = await deployment(name, { repoUrl: `https://GitHub.com/${name}.git/` });
    const delivery = await deliver(server.url, 'push', pushPayload({ repo: name, installationId: fx.installationId }), { secret: SECRET });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(api, delivery.id);
    const created = entry.results.filter((r: any) => r.result === 'revision_created').map((r: any) => r.deployment_id);
    expect(created.sort()).toEqual([ssh.id, https.id].sort());
  });

  describe('refuses deliveries it cannot trust or read', () => {
    const payload = () => pushPayload({ repo: 'acme/refused', installationId: 1 });

    it('no signature → 401', async () => {
      const response = await deliver(server.url, 'push', payload());
      expect(response.status).toBe(401);
      expect(response.body.detail).toMatch(/X-Hub-Signature-256/);
    });

    it('a wrong signature → 401', async () => {
      const response = await deliver(server.url, 'push', payload(), { secret: 'not-the-secret' });
      expect(response.status).toBe(401);
    });

    it('a signature over a different body → 401', async () => {
      const body = JSON.stringify(payload());
      const { signature } = await import('./github.ts');
      const forged = await signature(SECRET, body.replace('main', 'evil'));
      const response = await deliver(server.url, 'push', null, { body, headers: { 'x-hub-signature-256': forged } });
      expect(response.status).toBe(401);
    });

    it('a rotated-out secret → 401, while a secret of GITHUB_WEBHOOK_SECRET_PREVIOUS → 202', async () => {
      const rotatedOut = await deliver(server.url, 'push', payload(), { secret: 'the-secret-before-previous' });
      expect(rotatedOut.status).toBe(401);
      const previous = await deliver(server.url, 'push', payload(), { secret: PREVIOUS });
      expect(previous.status).toBe(202);
    });

    it('missing X-GitHub-Event → 400', async () => {
      const response = await deliver(server.url, 'push', payload(), { secret: SECRET, headers: { 'x-github-event': null } });
      expect(response.status).toBe(400);
      expect(response.body.detail).toMatch(/X-GitHub-Event/);
    });

    it('missing X-GitHub-Delivery → 400', async () => {
      const response = await deliver(server.url, 'push', payload(), { secret: SECRET, headers: { 'x-github-delivery': null } });
      expect(response.status).toBe(400);
      expect(response.body.detail).toMatch(/X-GitHub-Delivery/);
    });

    it('a correctly signed body that is not JSON → 415', async () => {
      const body = 'payload=%7B%22ref%22%3A%22refs%2Fheads%2Fmain%22%7D';
      const response = await deliver(server.url, 'push', null, { secret: SECRET, body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect(response.status).toBe(415);
    });

    it('a body over 25 MiB → 413, and nothing is stored', async () => {
      const big = JSON.stringify({ ...payload(), padding: 'x'.repeat(25 * 1024 * 1024) });
      const response = await deliver(server.url, 'push', null, { secret: SECRET, body: big });
      expect(response.status).toBe(413);
      const log = await api.get(`/v1/webhooks/github/deliveries?delivery_id=${response.id}`);
      expect(log.body.resources).toEqual([]);
    });

    it('a body over 25 MiB sent without a declared length (chunked) → 413', async () => {
      const chunk = new TextEncoder().encode('x'.repeat(1024 * 1024));
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= 26) return controller.close();
          sent += 1;
          controller.enqueue(chunk);
        },
      });
      const response = await fetch(`${server.url}/v1/webhooks/github`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': 'sha256=00' },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      expect(response.status).toBe(413);
    });

    it('ping → 200', async () => {
      const response = await deliver(server.url, 'ping', { zen: 'Keep it logically awesome.', hook_id: 1 }, { secret: SECRET });
      expect(response.status).toBe(200);
      expect(response.body.status).toBe('pong');
    });
  });

  describe('builds nothing, and says why in the delivery log, for', () => {
    async function expectNoRevision(options: {
      deliver: (name: string) => Promise<{ id: string }>;
      setup?: (name: string) => Promise<{ id: string }>;
      reason: RegExp;
    }) {
      const name = repo();
      const dep = await (options.setup ?? ((n: string) => deployment(n)))(name);
      const delivery = await options.deliver(name);
      const entry = await processedDelivery(api, delivery.id);
      expect(entry.outcome).toBe('no_revision');
      const line = entry.results.find((r: any) => r.deployment_id === dep.id);
      const why = line?.reason ?? entry.reason;
      expect(why).toMatch(options.reason);
      expect(await pushRevisions(dep.id)).toEqual([]);
      return entry;
    }
    const push = (name: string, options: Partial<Parameters<typeof pushPayload>[0]> = {}) =>
      deliver(server.url, 'push', pushPayload({ repo: name, installationId: fx.installationId, ...options }), { secret: SECRET });

    it('a branch deletion', async () => {
      await expectNoRevision({ deliver: (name) => push(name, { deleted: true }), reason: /deleted refs\/heads\/main/ });
    });

    it('a tag push', async () => {
      await expectNoRevision({ deliver: (name) => push(name, { ref: 'refs/tags/v1.0.0' }), reason: /tag refs\/tags\/v1\.0\.0/ });
    });

    it('another branch', async () => {
      await expectNoRevision({ deliver: (name) => push(name, { ref: 'refs/heads/feature' }), reason: /tracks branch main; the push was to feature/ });
    });

    it('another repository', async () => {
      const entry = await expectNoRevision({ deliver: (name) => push(`${name}-other`), reason: /No github deployment .*tracks the repository/ });
      expect(entry.results).toEqual([]);
    });

    it('another installation linked to the same workspace', async () => {
      const otherInstallation = fx.installationId + 7_000_000;
      expect((await api.post('/v1/integrations/github', { installation_id: otherInstallation, name: 'second' })).status).toBe(201);
      await expectNoRevision({
        deliver: (name) => push(name, { installationId: otherInstallation }),
        reason: new RegExp(`installation ${fx.installationId}; the delivery came from installation ${otherInstallation}`),
      });
    });

    it('build_on_push: false', async () => {
      await expectNoRevision({ setup: (name) => deployment(name, { buildOnPush: false }), deliver: (name) => push(name), reason: /build_on_push is false/ });
    });

    it.each(['[skip ci]', '[CI SKIP]', '[skip deploy]', '[Deploy Skip]'])('a skip marker %s on the head commit', async (marker) => {
      await expectNoRevision({ deliver: (name) => push(name, { message: `Tidy the docs ${marker}` }), reason: /carries \[/ });
    });
  });

  it('the same delivery twice, concurrently: 202 both times, one revision', async () => {
    const name = repo();
    const dep = await deployment(name);
    const payload = pushPayload({ repo: name, installationId: fx.installationId });
    const id = crypto.randomUUID();
    const answers = await Promise.all(Array.from({ length: 4 }, () => deliver(server.url, 'push', payload, { secret: SECRET, id })));
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    const entry = await processedDelivery(api, id);
    expect(entry.outcome).toBe('revisions_created');
    const pushes = await pushRevisions(dep.id);
    expect(pushes).toHaveLength(1);
    const log = await api.get(`/v1/webhooks/github/deliveries?delivery_id=${id}`);
    expect(log.body.resources).toHaveLength(1);
  });

  it('the same push under different delivery ids, concurrently: one revision; the others say which revision covers it', async () => {
    const name = repo();
    const dep = await deployment(name);
    const payload = pushPayload({ repo: name, installationId: fx.installationId });
    const answers = await Promise.all(Array.from({ length: 6 }, () => deliver(server.url, 'push', payload, { secret: SECRET })));
    expect(answers.every((a) => a.status === 202)).toBe(true);
    const entries = await Promise.all(answers.map((a) => processedDelivery(api, a.id)));
    const pushes = await pushRevisions(dep.id);
    expect(pushes).toHaveLength(1);
    const lines = entries.map((e) => e.results[0]);
    expect(lines.filter((l) => l.result === 'revision_created')).toHaveLength(1);
    for (const line of lines.filter((l) => l.result === 'skipped')) {
      expect(line.revision_id).toBe(pushes[0].id);
      expect(line.reason).toMatch(/already has revision/);
    }
  });

  it('installation events: suspend stops push builds, unsuspend resumes them, deleted removes the link', async () => {
    const installationId = 5_000_000 + Math.floor(Math.random() * 1e6);
    const linked = await api.post('/v1/integrations/github', { installation_id: installationId, name: 'suspendable' });
    expect(linked.status).toBe(201);
    const name = repo();
    const dep = await deployment(name, { integrationId: linked.body.id });
    const installation = (action: string) => ({ action, installation: { id: installationId, account: { login: 'acme' } }, sender: { login: 'ada' } });
    const push = () => deliver(server.url, 'push', pushPayload({ repo: name, installationId }), { secret: SECRET });

    const suspend = await deliver(server.url, 'installation', installation('suspend'), { secret: SECRET });
    expect(suspend.status).toBe(202);
    expect(await processedDelivery(api, suspend.id)).toMatchObject({
      outcome: 'applied',
      results: [expect.objectContaining({ result: 'integration_suspended', integration_id: linked.body.id })],
    });
    const whileSuspended = await processedDelivery(api, (await push()).id);
    expect(whileSuspended.outcome).toBe('no_revision');
    expect(whileSuspended.results[0].reason).toMatch(/suspended/);

    const unsuspend = await deliver(server.url, 'installation', installation('unsuspend'), { secret: SECRET });
    expect((await processedDelivery(api, unsuspend.id)).results[0].result).toBe('integration_unsuspended');
    expect((await processedDelivery(api, (await push()).id)).outcome).toBe('revisions_created');

    const deleted = await deliver(server.url, 'installation', installation('deleted'), { secret: SECRET });
    expect((await processedDelivery(api, deleted.id)).results[0].result).toBe('integration_removed');
    const integrations = await api.get('/v1/integrations/github/install');
    expect(integrations.body.map((i: any) => i.id)).not.toContain(linked.body.id);
    // The installation is linked to no workspace any more: its deliveries are addressed to no one.
    const afterDelete = await push();
    await eventually(async () =>
      server.output().includes(`"delivery_id":"${afterDelete.id}","event":"push","workspace_id":null,"outcome"`) ? true : undefined,
    );
    expect((await api.get(`/v1/webhooks/github/deliveries?delivery_id=${afterDelete.id}`)).body.resources).toEqual([]);
    expect(await pushRevisions(dep.id)).toHaveLength(1);
  });

  it('the delivery log needs an API key and shows a workspace only its own deliveries and deployments', async () => {
    const anonymous = await fetch(`${server.url}/v1/webhooks/github/deliveries`);
    expect(anonymous.status).toBe(401);

    const workspace = await api.post('/v1/workspaces', { name: uniqueName('other') });
    expect(workspace.status).toBe(201);
    const other = apiClient(server.url, server.apiKey, { 'x-tenant-id': workspace.body.id });
    const name = repo();
    await deployment(name);
    const delivery = await deliver(server.url, 'push', pushPayload({ repo: name, installationId: fx.installationId }), { secret: SECRET });
    await processedDelivery(api, delivery.id);
    const theirs = await other.get(`/v1/webhooks/github/deliveries?delivery_id=${delivery.id}`);
    expect(theirs.status).toBe(200);
    expect(theirs.body.resources).toEqual([]);

    const ours = await api.get('/v1/webhooks/github/deliveries?limit=5');
    expect(ours.body.resources[0].delivery_id).toBe(delivery.id);
    const times = ours.body.resources.map((d: any) => d.received_at);
    expect([...times].sort().reverse()).toEqual(times);
  });
});
