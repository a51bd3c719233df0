import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** The hosted API's shapes and rules (contract §2, §4, §6), request by request, in-process. */
describe('compatibility with the hosted API', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;
  beforeAll(async () => {
    t = await inProcessApp({ stageMs: 5 });
    fx = await workspaceFixtures(t.api);
  });
  afterAll(() => t.close());

  const warnings = (headers: Headers) => (headers.get('warning') ?? '').split(/, (?=299 )/).filter(Boolean);

  it('unknown fields are ignored, each named in a Warning, and nothing of them is stored', async () => {
    const body = {
      ...githubBody(uniqueName(), fx.integrationId),
      tracked_packages: ['langgraph'],
      secret_references: [{ name: 'A', secret_name: 's', secret_key: 'k' }],
    };
    (body.source_config as Record<string, unknown>).surprise = { nested: true };
    (body.secrets[0] as Record<string, unknown>).comment = 'x';
    const created = await t.api.post('/v2/deployments', body);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(warnings(created.headers).sort()).toEqual(
      [
        '299 - "Unknown field ignored: body.tracked_packages"',
        '299 - "Unknown field ignored: body.secret_references"',
        '299 - "Unknown field ignored: body.source_config.surprise"',
        '299 - "Unknown field ignored: body.secrets.0.comment"',
      ].sort(),
    );
    const row = (await t.sql.prepare('SELECT * FROM deployments WHERE id = ?').get(created.body.id)) as Record<string, string>;
    expect(JSON.stringify(row)).not.toMatch(/surprise|tracked_packages|secret_references/);
    const read = await t.api.get(`/v2/deployments/${created.body.id}`);
    expect(JSON.stringify(read.body)).not.toMatch(/surprise|tracked_packages|secret_references|comment/);
    expect(read.headers.get('warning')).toBeNull();

    // PATCH: the same rule; a PATCH that only carries unknown fields changes nothing.
    const before = (await t.api.get(`/v2/deployments/${created.body.id}/revisions`)).body.resources.length;
    const patched = await t.api.patch(`/v2/deployments/${created.body.id}`, { tracked_packages: ['x'], source_revision_config: { weird: 1 } });
    expect(patched.status).toBe(200);
    expect(warnings(patched.headers).sort()).toEqual([
      '299 - "Unknown field ignored: body.source_revision_config.weird"',
      '299 - "Unknown field ignored: body.tracked_packages"',
    ]);
    expect((await t.api.get(`/v2/deployments/${created.body.id}/revisions`)).body.resources.length).toBe(before);
  });

  it('many unknown fields: 20 Warning values and one that counts the rest; odd keys are escaped', async () => {
    const body: Record<string, unknown> = githubBody(uniqueName(), fx.integrationId);
    for (let i = 0; i < 25; i++) body[`extra_${String(i).padStart(2, '0')}`] = i;
    body['grüße "x"'] = 1;
    const response = await t.api.post('/v2/deployments', body);
    expect(response.status).toBe(201);
    const values = warnings(response.headers);
    expect(values).toHaveLength(21);
    expect(values.at(-1)).toBe('299 - "6 more unknown fields ignored"');
    const escaped = await t.api.patch(`/v2/deployments/${response.body.id}`, { 'grüße "x"': 1 });
    expect(escaped.headers.get('warning')).toBe('299 - "Unknown field ignored: body.gr\\u00fc\\u00dfe \\"x\\""');
  });

  it('the OpenAPI document does not forbid the fields the routes ignore', async () => {
    type Doc = { paths: Record<string, Record<string, { requestBody?: unknown }>>; components: { schemas: Record<string, unknown> } };
    const doc = (await (await t.app.request('/openapi.json')).json()) as Doc;
    /** The request body's schema with every component it refers to put in place (each once), as one text. */
    const expanded = (root: unknown): string => {
      const seen = new Set<string>();
      const inline = (value: unknown): unknown => {
        if (Array.isArray(value)) return value.map(inline);
        if (value === null || typeof value !== 'object') return value;
        const ref = (value as { $ref?: unknown }).$ref;
        if (typeof ref === 'string') {
          if (seen.has(ref)) return {};
          seen.add(ref);
          return inline(doc.components.schemas[ref.replace('#/components/schemas/', '')]);
        }
        return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, inline(v)]));
      };
      return JSON.stringify(inline(root));
    };
    for (const [path, method] of [
      ['/v2/deployments', 'post'],
      ['/v2/deployments/{deployment_id}', 'patch'],
      ['/v2/listeners', 'post'],
      ['/v1/projects/{project_id}/deploy_logs', 'post'],
      ['/v1/api-keys', 'post'],
    ] as const) {
      const body = expanded(doc.paths[path]![method]!.requestBody);
      expect(body, `${method} ${path}`).toContain('"properties"');
      // Every route ignores unknown fields with a Warning (contract section 2), so no request schema forbids them.
      expect(body, `${method} ${path}`).not.toContain('"additionalProperties":false');
    }
  });

  it('a known field with a wrong type is still 422, and the request stores nothing', async () => {
    const name = uniqueName();
    const body = { ...githubBody(name, fx.integrationId), tracked_packages: ['x'] };
    (body.source_config as Record<string, unknown>).build_on_push = 'yes';
    const response = await t.api.post('/v2/deployments', body);
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'source_config', 'build_on_push'], type: 'bool_type' })]);
    expect((await t.api.get(`/v2/deployments?name_contains=${name}`)).body.resources).toEqual([]);
    // The rule reaches listeners too.
    const listener = await t.api.post('/v2/listeners', { compute_type: 'k8s', compute_id: 42 });
    expect(listener.status).toBe(422);
  });

  it('graph_config_path and langgraph_config_path are one field, in requests and answers', async () => {
    const hostedName = githubBody(uniqueName(), fx.integrationId, {
      source_revision_config: { repo_ref: 'main', langgraph_config_path: 'graphs/langgraph.json' },
    });
    const created = await t.api.post('/v2/deployments', hostedName);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.source_revision_config).toMatchObject({ graph_config_path: 'graphs/langgraph.json', langgraph_config_path: 'graphs/langgraph.json' });
    const revision = await t.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    expect(revision.body.source_revision_config).toMatchObject({ graph_config_path: 'graphs/langgraph.json', langgraph_config_path: 'graphs/langgraph.json' });

    const both = githubBody(uniqueName(), fx.integrationId, {
      source_revision_config: { repo_ref: 'main', graph_config_path: 'a.json', langgraph_config_path: 'a.json' },
    });
    expect((await t.api.post('/v2/deployments', both)).status).toBe(201);
    const differ = githubBody(uniqueName(), fx.integrationId, {
      source_revision_config: { repo_ref: 'main', graph_config_path: 'a.json', langgraph_config_path: 'b.json' },
    });
    const refused = await t.api.post('/v2/deployments', differ);
    expect(refused.status).toBe(422);
    expect(refused.body.detail[0].loc).toEqual(['body', 'source_revision_config', 'langgraph_config_path']);
    const neither = githubBody(uniqueName(), fx.integrationId, { source_revision_config: { repo_ref: 'main' } });
    expect((await t.api.post('/v2/deployments', neither)).body.detail[0]).toMatchObject({
      loc: ['body', 'source_revision_config', 'graph_config_path'],
      type: 'missing',
    });

    const patched = await t.api.patch(`/v2/deployments/${created.body.id}`, { source_revision_config: { langgraph_config_path: 'other.json' } });
    expect(patched.status).toBe(200);
    expect(patched.body.source_revision_config).toMatchObject({ graph_config_path: 'other.json', langgraph_config_path: 'other.json' });
    expect(patched.body.latest_revision_id).not.toBe(created.body.latest_revision_id);
    const conflicting = await t.api.patch(`/v2/deployments/${created.body.id}`, {
      source_revision_config: { graph_config_path: 'x.json', langgraph_config_path: 'y.json' },
    });
    expect(conflicting.status).toBe(422);
    const listed = await t.api.get(`/v2/deployments/${created.body.id}/revisions`);
    for (const item of listed.body.resources) expect(item.source_revision_config.langgraph_config_path).toBe(item.source_revision_config.graph_config_path);
  });

  it('POST …/revisions creates a revision (201); an empty body rebuilds the latest config', async () => {
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const id = created.body.id;
    const rebuilt = await t.app.request(`/v2/deployments/${id}/revisions`, { method: 'POST', headers: { 'x-api-key': t.apiKey } });
    expect(rebuilt.status).toBe(201);
    const rebuiltBody = (await rebuilt.json()) as { id: string; source_revision_config: { repo_ref: string } };
    expect(rebuiltBody.source_revision_config.repo_ref).toBe('main');
    const changed = await t.api.post(`/v2/deployments/${id}/revisions`, { source_revision_config: { repo_ref: 'release' }, tracked_packages: [] });
    expect(changed.status).toBe(201);
    expect(changed.headers.get('warning')).toContain('body.tracked_packages');
    expect(changed.body).toMatchObject({ deployment_id: id, source: 'github', source_revision_config: { repo_ref: 'release' } });
    const list = await t.api.get(`/v2/deployments/${id}/revisions`);
    expect(list.body.resources.map((r: { id: string }) => r.id).slice(0, 2)).toEqual([changed.body.id, rebuiltBody.id]);
    expect((await t.api.get(`/v2/deployments/${id}`)).body.latest_revision_id).toBe(changed.body.id);
    expect((await t.api.post(`/v2/deployments/${id}/revisions`, { source_revision_config: { image_uri: 'x:1' } })).status).toBe(400);
    expect((await t.api.post(`/v2/deployments/${crypto.randomUUID()}/revisions`, {})).status).toBe(404);
  });

  it('bulk DELETE: 200 when all are deleted, 207 with the failures otherwise; bad ids 422', async () => {
    const a = (await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).body.id;
    const b = (await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).body.id;
    const c = (await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).body.id;
    const all = await t.api.delete(`/v2/deployments?deployment_ids=${a}&deployment_ids=${b}`);
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ deleted: [a, b], failed: [] });
    const missing = crypto.randomUUID();
    const some = await t.api.delete(`/v2/deployments?deployment_ids=${c},${missing}`);
    expect(some.status).toBe(207);
    expect(some.body.deleted).toEqual([c]);
    expect(some.body.failed).toEqual([{ id: missing, detail: `Deployment ID ${missing} not found.` }]);
    // Another workspace's deployment is "not found" too.
    const ws = await t.api.post('/v1/workspaces', { name: uniqueName('ws') });
    const other = await t
      .client(t.apiKey, { 'x-tenant-id': ws.body.id })
      .post('/v2/deployments', githubBody(uniqueName(), (await workspaceFixtures(t.client(t.apiKey, { 'x-tenant-id': ws.body.id }))).integrationId));
    const cross = await t.api.delete(`/v2/deployments?deployment_ids=${other.body.id}`);
    expect(cross.status).toBe(207);
    expect(cross.body.deleted).toEqual([]);
    expect((await t.client(t.apiKey, { 'x-tenant-id': ws.body.id }).get(`/v2/deployments/${other.body.id}`)).body.status).not.toBe('AWAITING_DELETE');
    expect((await t.api.delete('/v2/deployments')).status).toBe(422);
    expect((await t.api.delete('/v2/deployments?deployment_ids=nope')).status).toBe(422);
    const tooMany = Array.from({ length: 101 }, () => crypto.randomUUID()).join(',');
    expect((await t.api.delete(`/v2/deployments?deployment_ids=${tooMany}`)).status).toBe(422);
  });

  it('the /v1/projects log routes answer {logs: [{id, timestamp, level, message}], next_offset}', async () => {
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const { id, latest_revision_id: rid } = created.body;
    await revisionReaches(t.api, id, rid, ['DEPLOYED']);
    const build = await t.api.post(`/v1/projects/${id}/revisions/${rid}/build_logs`, {
      limit: 100,
      order: 'desc',
      offset: null,
      level: null,
      query: null,
      start_time: null,
      end_time: null,
    });
    expect(build.status).toBe(200);
    expect(build.body.logs.length).toBeGreaterThanOrEqual(2);
    for (const line of build.body.logs)
      expect(line).toEqual({ id: expect.any(String), timestamp: expect.any(String), level: expect.any(String), message: expect.any(String) });
    const ids = build.body.logs.map((line: { id: string }) => Number(line.id));
    expect(ids).toEqual([...ids].sort((x, y) => y - x)); // desc: newest first
    const asc = await t.api.post(`/v1/projects/${id}/revisions/${rid}/build_logs`, { order: 'asc', limit: 1 });
    expect(asc.body.logs).toHaveLength(1);
    expect(asc.body.next_offset).toBe(Number(asc.body.logs[0].id));
    const next = await t.api.post(`/v1/projects/${id}/revisions/${rid}/build_logs`, { order: 'asc', limit: 1, offset: String(asc.body.next_offset) });
    expect(Number(next.body.logs[0].id)).toBeGreaterThan(Number(asc.body.logs[0].id));
    const searched = await t.api.post(`/v1/projects/${id}/revisions/${rid}/build_logs`, { query: 'finished' });
    expect(searched.body.logs.length).toBeGreaterThan(0);
    for (const line of searched.body.logs) expect(line.message).toContain('finished');
    expect((await t.api.post(`/v1/projects/${id}/revisions/${rid}/build_logs`, { level: 'error' })).body.logs).toEqual([]);
    const deploy = await t.api.post(`/v1/projects/${id}/revisions/${rid}/deploy_logs`, {});
    expect(deploy.body.logs.some((line: { message: string }) => line.message.includes('simulated deploy'))).toBe(true);
    const live = await t.api.post(`/v1/projects/${id}/deploy_logs`, { order: 'desc' });
    expect(live.body.logs).toEqual(deploy.body.logs);
    const empty = await t.app.request(`/v1/projects/${id}/deploy_logs`, { method: 'POST', headers: { 'x-api-key': t.apiKey } });
    expect(empty.status).toBe(200);
    expect((await t.api.post(`/v1/projects/${id}/deploy_logs`, { order: 'sideways' })).status).toBe(422);
    const extra = await t.api.post(`/v1/projects/${id}/deploy_logs`, { order: 'desc', follow: true });
    expect(extra.status).toBe(200);
    expect(extra.headers.get('warning')).toBe('299 - "Unknown field ignored: body.follow"');
    // The tracing project's id names the same logs.
    const project = (await t.api.get(`/v1/tracing-projects?name=${created.body.name}`)).body.resources[0];
    expect((await t.api.post(`/v1/projects/${project.id}/deploy_logs`, { order: 'desc' })).body.logs).toEqual(deploy.body.logs);
    expect((await t.api.post(`/v1/projects/${crypto.randomUUID()}/deploy_logs`, {})).status).toBe(404);
  });

  it('listeners carry version', async () => {
    const created = await t.api.post('/v2/listeners', {
      version: '0.4.2',
      compute_type: 'k8s',
      compute_id: uniqueName('cluster'),
      compute_config: { k8s_namespaces: [] },
    });
    expect(created.status).toBe(201);
    expect(created.body.version).toBe('0.4.2');
    const patched = await t.api.patch(`/v2/listeners/${created.body.id}`, { version: '0.5.0' });
    expect(patched.body.version).toBe('0.5.0');
    expect(patched.body.compute_config).toEqual({ k8s_namespaces: [] });
    expect((await t.api.get(`/v2/listeners/${created.body.id}`)).body.version).toBe('0.5.0');
    const sandbox = (await t.api.get('/v2/listeners')).body.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox');
    expect(sandbox.version).toBeNull();
  });

  it('internal_docker: created without a revision; push-token names missing settings; PATCH with image_uri deploys on the sandbox', async () => {
    const created = await t.api.post('/v2/deployments', {
      name: uniqueName(),
      source: 'internal_docker',
      source_config: { deployment_type: 'dev' },
      source_revision_config: {},
      secrets: [],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.latest_revision_id).toBeNull();
    expect(created.body.source_config.custom_url).toMatch(/^https:\/\//);
    const id = created.body.id;
    expect((await t.api.get(`/v2/deployments/${id}/revisions`)).body.resources).toEqual([]);
    const token = await t.api.post(`/v2/deployments/${id}/push-token`);
    expect(token.status).toBe(400);
    expect(token.body.detail).toContain('REGISTRY_URL and REGISTRY_PUSH_TOKEN');
    expect((await t.api.post(`/v2/deployments/${id}/upload-url`)).status).toBe(400);
    expect(
      (await t.api.patch(`/v2/deployments/${id}`, { revision_source: 'internal_source', source_revision_config: { image_uri: 'r/x@sha256:1' } })).status,
    ).toBe(400);
    expect((await t.api.patch(`/v2/deployments/${id}`, { secrets: [{ name: 'A', value: 'b' }] })).status).toBe(400); // nothing to deploy yet
    const patched = await t.api.patch(`/v2/deployments/${id}`, {
      revision_source: 'internal_docker',
      source_revision_config: { image_uri: 'registry.local/agent@sha256:abc' },
      secrets: [],
      tracked_packages: ['langgraph'],
    });
    expect(patched.status).toBe(200);
    expect(patched.headers.get('warning')).toBe('299 - "Unknown field ignored: body.tracked_packages"');
    const revision = await revisionReaches(t.api, id, patched.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED']);
    expect(revision.status).toBe('DEPLOYED');
    expect(revision.source).toBe('internal_docker');
    const logs = await t.api.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=deploy`);
    expect(logs.body.logs[0].message).toContain('registry.local/agent@sha256:abc');
    expect((await t.api.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=build`)).body.logs).toEqual([]);
    expect((await t.api.patch(`/v2/deployments/${id}`, { source_config: { custom_url: 'https://mine.example.com' } })).body.detail).toContain('read-only');
    // An image on create makes the first revision at once.
    const withImage = await t.api.post('/v2/deployments', {
      name: uniqueName(),
      source: 'internal_docker',
      source_revision_config: { image_uri: 'registry.local/a:1' },
    });
    expect(withImage.status).toBe(201);
    expect(withImage.body.latest_revision_id).not.toBeNull();
    expect((await revisionReaches(t.api, withImage.body.id, withImage.body.latest_revision_id, ['DEPLOYED'])).trigger).toBe('create');
    // Fields these sources do not take: 422 on create.
    const bad = await t.api.post('/v2/deployments', { name: uniqueName(), source: 'internal_docker', source_config: { listener_id: fx.listenerId } });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['body', 'source_config', 'listener_id']);
  });

  it('push-token with a configured registry answers the token', async () => {
    const configured = await inProcessApp({ env: { REGISTRY_URL: 'registry.example.com/acme', REGISTRY_PUSH_TOKEN: 'push-secret-token' } });
    try {
      const created = await configured.api.post('/v2/deployments', { name: uniqueName(), source: 'internal_docker' });
      const token = await configured.api.post(`/v2/deployments/${created.body.id}/push-token`);
      expect(token.status).toBe(200);
      expect(token.body).toEqual({ token: 'push-secret-token', registry_url: 'registry.example.com/acme' });
      expect((await configured.api.post(`/v2/deployments/${crypto.randomUUID()}/push-token`)).status).toBe(404);
    } finally {
      configured.close();
    }
  });

  it('integration repos: recorded from installation, installation_repositories and push deliveries; scoped to the workspace', async () => {
    const installation = { id: fx.installationId, account: { login: 'acme' } };
    const repos = t.services.installationRepos;
    await repos.recordFromDelivery('installation', {
      action: 'created',
      installation,
      repositories: [
        { id: 1, name: 'agent', full_name: 'acme/agent' },
        { id: 2, name: 'tools', full_name: 'acme/tools' },
      ],
    });
    await repos.recordFromDelivery('installation_repositories', {
      action: 'added',
      installation,
      repositories_added: [{ id: 3, name: 'extra', full_name: 'acme/extra' }],
      repositories_removed: [],
    });
    await repos.recordFromDelivery('installation_repositories', {
      action: 'removed',
      installation,
      repositories_added: [],
      repositories_removed: [{ id: 2, name: 'tools', full_name: 'acme/tools' }],
    });
    await repos.recordFromDelivery('push', {
      installation: { id: fx.installationId },
      repository: { id: 1, name: 'agent', owner: { login: 'acme' }, html_url: 'https://github.com/acme/agent', default_branch: 'trunk' },
    });
    await repos.recordFromDelivery('push', 'not an object');
    const listed = await t.api.get(`/v1/integrations/github/${fx.integrationId}/repos`);
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual([
      { host_integration_id: fx.integrationId, id: 1, name: 'agent', owner: 'acme', url: 'https://github.com/acme/agent', default_branch: 'trunk' },
      { host_integration_id: fx.integrationId, id: 3, name: 'extra', owner: 'acme', url: 'https://github.com/acme/extra', default_branch: 'main' },
    ]);
    const ws = await t.api.post('/v1/workspaces', { name: uniqueName('ws') });
    expect((await t.client(t.apiKey, { 'x-tenant-id': ws.body.id }).get(`/v1/integrations/github/${fx.integrationId}/repos`)).status).toBe(404);
    await repos.recordFromDelivery('installation', { action: 'deleted', installation });
    expect((await t.api.get(`/v1/integrations/github/${fx.integrationId}/repos`)).body).toEqual([]);
  });
});
