import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkThroughSetup } from '../github/link.ts';
import { GithubStandIn } from '../github/stand-in.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { attributeOf, type CollectedSpan, newTraceparent, standInCollector } from '../helpers/otlp-collector.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, pushPayload, revisionsOf, sha } from '../webhooks/github.ts';

const SECRET = 'traces-webhook-secret';

type AuditEntry = {
  actor_kind: string;
  actor_id: string;
  action: string;
  resource_type: string;
  resource_id: string | null;
  fields: string[];
  workspace_id: string;
};

/**
 * Contract §17 beyond the HTTP span, through a real server exporting to a stand-in collector on
 * loopback, with the GitHub stand-in (checked against GitHub's description) as its GitHub and the
 * sandbox data plane (simulated: it builds nothing, and moves revisions through the same
 * transitions) or the listener-agent protocol called as an agent does: a revision's stage changes
 * are spans of the trace of the request that made it, its work item carries that trace to the
 * agent, a push's revision is traced under its delivery, GitHub calls are client spans, and the
 * changes agents and GitHub deliveries make are audited as theirs, in their workspace only.
 */
describe('revision traces and the audit of agents and GitHub deliveries', () => {
  let collector: Awaited<ReturnType<typeof standInCollector>>;
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let other: Api;
  let installation: number;
  let integrationId: string;
  const repoUrl = () => `${github.url}/acme/agent`;

  beforeAll(async () => {
    collector = await standInCollector();
    github = await new GithubStandIn().start();
    installation = github.install({ login: 'acme', id: 601, type: 'Organization' }, ['acme/agent'], ['alice']);
    server = await startServerProcess({
      ...github.serverEnv(),
      GITHUB_WEBHOOK_SECRET: SECRET,
      RECONCILE_INTERVAL_MS: '0',
      SANDBOX_STAGE_MS: '20',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: 'acp-test',
    });
    api = apiClient(server.url, server.apiKey);
    integrationId = await linkThroughSetup(server.url, api, github, installation, 'alice');
    const workspace = await api.post('/v1/workspaces', { name: uniqueName('other') });
    other = apiClient(server.url, (await api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'another workspace' })).body.key);
  });
  afterAll(async () => {
    await server?.kill();
    await github?.stop();
    collector?.server.close();
  });

  const spansOf = (traceId: string) => collector.spans.filter((s) => s.traceId === traceId);
  const auditOf = async (client: Api, resourceId: string): Promise<AuditEntry[]> =>
    (await client.get(`/v1/audit-events?resource_id=${resourceId}&limit=500`)).body.resources;

  it("a create's traceparent is the trace of its revision's stage changes, under the request's span", async () => {
    const { traceparent, traceId } = newTraceparent();
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('traced'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repoUrl(), deployment_type: 'dev', build_on_push: true },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
      { traceparent },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED'], 30_000);
    const deployed = await eventually(async () => spansOf(traceId).find((s) => s.name === 'revision DEPLOYED'), 20_000);
    const request = spansOf(traceId).find((s) => s.name === 'POST /v2/deployments')!;
    expect(deployed.parentSpanId).toBe(request.spanId);
    expect(attributeOf(deployed, 'acp.revision.id')).toBe(created.body.latest_revision_id);
    // Each stage the sandbox moved it through is a span of the same trace.
    expect(spansOf(traceId).filter((s) => s.name.startsWith('revision ')).length).toBeGreaterThanOrEqual(3);
  });

  it("a push's revision is traced under its delivery's span, audited as the delivery's in its workspace only; GitHub calls are client spans", async () => {
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('pushed'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repoUrl(), deployment_type: 'dev', build_on_push: true },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
    );
    expect(created.status).toBe(201);
    await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED'], 30_000);
    const after = sha();
    const delivered = await deliver(server.url, 'push', pushPayload({ repo: 'acme/agent', after, htmlUrl: repoUrl(), installationId: installation }), {
      secret: SECRET,
    });
    expect(delivered.status).toBe(202);
    const pushed = await eventually(
      async () => (await revisionsOf(api, created.body.id)).find((r) => r.source_revision_config.repo_commit_sha === after),
      20_000,
    );
    await revisionReaches(api, created.body.id, pushed.id, ['DEPLOYED'], 30_000);

    const delivery = await eventually(
      async () => collector.spans.find((s) => s.name === 'webhook push' && attributeOf(s, 'acp.webhook.delivery_id') === delivered.id),
      20_000,
    );
    const stage = await eventually(
      async () => spansOf(delivery.traceId).find((s) => s.name === 'revision DEPLOYED' && attributeOf(s, 'acp.revision.id') === pushed.id),
      20_000,
    );
    expect(stage.parentSpanId).toBe(delivery.spanId);

    const entries = await auditOf(api, pushed.id);
    expect(entries).toEqual([
      expect.objectContaining({ actor_kind: 'github_delivery', actor_id: delivered.id, action: 'create', resource_type: 'revision', resource_id: pushed.id }),
    ]);
    expect(await auditOf(other, pushed.id)).toEqual([]);

    // The GitHub App's calls (installation tokens, statuses) are client spans with HTTP attributes, never a token.
    const calls = await eventually(async () => {
      const found = collector.spans.filter((s) => s.kind === 3 && String(attributeOf(s, 'url.full')).startsWith(github.url));
      return found.length > 0 ? found : undefined;
    }, 20_000);
    for (const call of calls) {
      expect(['GET', 'POST', 'PATCH', 'DELETE']).toContain(attributeOf(call, 'http.request.method'));
      expect(attributeOf(call, 'server.address')).toBe('127.0.0.1');
      expect(JSON.stringify(call.attributes)).not.toMatch(/ghs_|Bearer|token [A-Za-z0-9]/);
    }
  });

  it("GitHub's installation suspend and unsuspend are audited on the integration as the delivery's, in its workspace only", async () => {
    const event = async (action: 'suspend' | 'unsuspend') => {
      const payload = { action, installation: { id: installation, account: { login: 'acme', id: 601, type: 'Organization' } }, sender: { login: 'alice' } };
      const delivered = await deliver(server.url, 'installation', payload, { secret: SECRET });
      expect(delivered.status).toBe(202);
      return delivered.id;
    };
    const suspended = await event('suspend');
    const unsuspended = await event('unsuspend');
    const entries = await eventually(async () => {
      const found = (await auditOf(api, integrationId)).filter((e) => e.actor_kind === 'github_delivery');
      return found.length === 2 ? found : undefined;
    }, 20_000);
    // Newest first.
    expect(entries).toEqual([
      expect.objectContaining({ actor_id: unsuspended, action: 'unsuspend', resource_type: 'integration', resource_id: integrationId }),
      expect.objectContaining({ actor_id: suspended, action: 'suspend', resource_type: 'integration', resource_id: integrationId }),
    ]);
    expect(await auditOf(other, integrationId)).toEqual([]);
  });

  it("an agent's work item carries its revision's trace; the agent's stage changes are spans of it and audited as the listener's", async () => {
    const listener = await api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('traced-local') });
    const token = (await api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
    const overHttp = { request: (path: string, init: RequestInit) => fetch(`${server.url}${path}`, init) };
    const call = (path: string, body?: unknown) => agentCall(overHttp, listener.body.id, token, path, body);
    expect((await call('/heartbeat', { agent_id: 'a1', version: 'test-agent/1', capacity: 1, public_url: 'http://{name}.agents.test' })).status).toBe(200);

    const { traceparent, traceId } = newTraceparent();
    const created = await api.post('/v2/deployments', dockerBody(uniqueName('agent-traced'), listener.body.id), { traceparent });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const revisionId = created.body.latest_revision_id as string;
    const work = await eventually(async () => (await call('/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work ?? undefined, 10_000);
    expect(work.revision.id).toBe(revisionId);
    expect(work.revision.traceparent.split('-')[1]).toBe(traceId);
    expect((await call(`/claims/${work.claim_id}/transition`, { from: work.revision.status, to: 'DEPLOYING' })).status).toBe(200);
    expect((await call(`/claims/${work.claim_id}/transition`, { from: 'DEPLOYING', to: 'DEPLOYED' })).status).toBe(200);
    // A stale report (the compare-and-set loses) changes nothing and is not audited.
    expect((await call(`/claims/${work.claim_id}/transition`, { from: 'DEPLOYING', to: 'DEPLOYED' })).status).toBe(409);

    const names = async () => {
      const found = spansOf(traceId).map((s: CollectedSpan) => s.name);
      return found.includes('revision DEPLOYED') ? found : undefined;
    };
    expect(await eventually(names, 20_000)).toEqual(expect.arrayContaining(['POST /v2/deployments', 'revision DEPLOYING', 'revision DEPLOYED']));

    const entries = (await auditOf(api, revisionId)).filter((e) => e.actor_kind === 'agent');
    expect(entries).toHaveLength(2);
    for (const entry of entries) {
      expect(entry).toMatchObject({ actor_id: listener.body.id, action: 'transition', resource_type: 'revision', fields: ['status'] });
    }
    expect(await auditOf(other, revisionId)).toEqual([]);
  });
});
