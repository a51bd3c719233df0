import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** Each rule of the specification and the contract: one case that passes, one that fails. */
describe('request validation', () => {
  let t: App;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;

  beforeAll(async () => {
    t = await inProcessApp();
    fx = await workspaceFixtures(t.api);
  });
  afterAll(() => t.close());

  async function expect422(body: unknown, loc: Array<string | number>, type?: string) {
    const response = await t.api.post('/v2/deployments', body);
    expect(response.status, JSON.stringify(response.body)).toBe(422);
    const issue = response.body.detail.find((d: { loc: unknown[] }) => JSON.stringify(d.loc) === JSON.stringify(loc));
    expect(issue, `no issue at ${JSON.stringify(loc)} in ${JSON.stringify(response.body)}`).toBeDefined();
    expect(typeof issue.msg).toBe('string');
    if (type) expect(issue.type).toBe(type);
    return response;
  }

  it('accepts valid github and external_docker bodies', async () => {
    expect((await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).status).toBe(201);
    expect((await t.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId))).status).toBe(201);
  });

  it('name: letters, digits, - and _, starting with a letter or digit, 1-63 long (the hosted example creates my_deployment)', async () => {
    for (const good of ['a', 'agent-1', 'a'.repeat(63), 'my_deployment', '1agent', 'Agent', 'agent-']) {
      const response = await t.api.post('/v2/deployments', githubBody(good, fx.integrationId, { name: good }));
      expect(response.status, good).toBe(201);
      expect(response.body.name).toBe(good);
      // The URL uses a DNS-safe form of the name: lower case, no underscores.
      expect(new URL(response.body.source_config.custom_url).hostname.split('.')[0]).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
    for (const bad of ['', '-agent', '_agent', 'a b', 'a.b', 'ä', 'a'.repeat(64)]) {
      await expect422(githubBody(bad, fx.integrationId), ['body', 'name']);
    }
  });

  it('required fields by source', async () => {
    await expect422(
      { ...githubBody(uniqueName(), fx.integrationId), source_config: { repo_url: 'https://github.com/a/b' } },
      ['body', 'source_config', 'integration_id'],
      'missing',
    );
    await expect422(
      { ...githubBody(uniqueName(), fx.integrationId), source_config: { integration_id: fx.integrationId } },
      ['body', 'source_config', 'repo_url'],
      'missing',
    );
    await expect422(
      { ...githubBody(uniqueName(), fx.integrationId), source_revision_config: { graph_config_path: 'g.json' } },
      ['body', 'source_revision_config', 'repo_ref'],
      'missing',
    );
    await expect422(
      { ...githubBody(uniqueName(), fx.integrationId), source_revision_config: { repo_ref: 'main' } },
      ['body', 'source_revision_config', 'graph_config_path'],
      'missing',
    );
    await expect422({ ...dockerBody(uniqueName(), fx.listenerId), source_config: {} }, ['body', 'source_config', 'listener_id'], 'missing');
    await expect422({ ...dockerBody(uniqueName(), fx.listenerId), source_revision_config: {} }, ['body', 'source_revision_config', 'image_uri'], 'missing');
    const { name: _name, ...noName } = githubBody(uniqueName(), fx.integrationId);
    await expect422(noName, ['body', 'name'], 'missing');
  });

  it('source: required and an enum', async () => {
    const { source: _s, ...noSource } = githubBody(uniqueName(), fx.integrationId);
    await expect422(noSource, ['body', 'source'], 'missing');
    await expect422({ ...githubBody(uniqueName(), fx.integrationId), source: 'gitlab' }, ['body', 'source'], 'enum');
  });

  it('fields a source does not allow are 422 on create', async () => {
    await expect422(
      githubBody(uniqueName(), fx.integrationId, { source_revision_config: { repo_ref: 'main', graph_config_path: 'g.json', image_uri: 'x:1' } }),
      ['body', 'source_revision_config', 'image_uri'],
      'value_error',
    );
    await expect422(
      {
        ...githubBody(uniqueName(), fx.integrationId),
        source_config: { integration_id: fx.integrationId, repo_url: 'https://github.com/a/b', custom_url: 'https://x.dev' },
      },
      ['body', 'source_config', 'custom_url'],
      'value_error',
    );
    await expect422(
      {
        ...githubBody(uniqueName(), fx.integrationId),
        source_config: { integration_id: fx.integrationId, repo_url: 'https://github.com/a/b', listener_id: fx.listenerId },
      },
      ['body', 'source_config', 'listener_id'],
      'value_error',
    );
    await expect422(
      { ...dockerBody(uniqueName(), fx.listenerId), source_config: { listener_id: fx.listenerId, build_on_push: true } },
      ['body', 'source_config', 'build_on_push'],
      'value_error',
    );
    await expect422(
      { ...dockerBody(uniqueName(), fx.listenerId), source_revision_config: { image_uri: 'x:1', repo_ref: 'main' } },
      ['body', 'source_revision_config', 'repo_ref'],
      'value_error',
    );
    // null is the same as absent
    const withNulls = dockerBody(uniqueName(), fx.listenerId, { source_revision_config: { image_uri: 'x:1', repo_ref: null } });
    expect((await t.api.post('/v2/deployments', withNulls)).status).toBe(201);
  });

  it('a tag repo_ref with build_on_push true in one body is 422; a branch is fine', async () => {
    const tagged = githubBody(uniqueName(), fx.integrationId, { source_revision_config: { repo_ref: 'refs/tags/v1', graph_config_path: 'g.json' } });
    (tagged.source_config as Record<string, unknown>).build_on_push = true;
    await expect422(tagged, ['body', 'source_config', 'build_on_push'], 'value_error');
    (tagged.source_config as Record<string, unknown>).build_on_push = false;
    expect((await t.api.post('/v2/deployments', tagged)).status).toBe(201);
  });

  it('types, uuids, enums, unknown fields', async () => {
    await expect422(
      { ...githubBody(uniqueName(), fx.integrationId), source_config: { integration_id: 'not-a-uuid', repo_url: 'https://github.com/a/b' } },
      ['body', 'source_config', 'integration_id'],
      'uuid_parsing',
    );
    await expect422(
      {
        ...githubBody(uniqueName(), fx.integrationId),
        source_config: { integration_id: fx.integrationId, repo_url: 'https://github.com/a/b', deployment_type: 'huge' },
      },
      ['body', 'source_config', 'deployment_type'],
      'enum',
    );
    await expect422(
      {
        ...githubBody(uniqueName(), fx.integrationId),
        source_config: { integration_id: fx.integrationId, repo_url: 'https://github.com/a/b', build_on_push: 'yes' },
      },
      ['body', 'source_config', 'build_on_push'],
      'bool_type',
    );
    await expect422({ ...githubBody(uniqueName(), fx.integrationId), name: 42 }, ['body', 'name'], 'string_type');
    await expect422({ ...githubBody(uniqueName(), fx.integrationId), source_config: { integration_id: fx.integrationId, repo_url: 'not a url' } }, [
      'body',
      'source_config',
      'repo_url',
    ]);
  });

  it('repo_url: git URLs without credentials; file:// only when the server allows it', async () => {
    const withUrl = (repo_url: string) => ({ ...githubBody(uniqueName(), fx.integrationId), source_config: { integration_id: fx.integrationId, repo_url } });
    for (const good of ['https://github.com/acme/agent.git', 'git@github.com:acme/agent.git', 'ssh://git@github.com/acme/agent']) {
      expect((await t.api.post('/v2/deployments', withUrl(good))).status, good).toBe(201);
    }
    for (const bad of [
      'https://user:ghp_secret@github.com/acme/agent',
      'https://ghp_token@github.com/acme/agent',
      'http://169.254.169.254/latest',
      'ssh://user:pw@host/repo',
      'file:///etc',
    ]) {
      const response = await t.api.post('/v2/deployments', withUrl(bad));
      expect(response.status, bad).toBe(422);
      expect(response.body.detail[0].loc).toEqual(['body', 'source_config', 'repo_url']);
      expect(JSON.stringify(response.body)).not.toContain('ghp_');
    }
  });

  it('secrets: C identifiers, unique names; may be omitted', async () => {
    await expect422(githubBody(uniqueName(), fx.integrationId, { secrets: [{ name: '1BAD', value: 'x' }] }), ['body', 'secrets', 0, 'name']);
    await expect422(
      githubBody(uniqueName(), fx.integrationId, {
        secrets: [
          { name: 'A', value: 'x' },
          { name: 'A', value: 'y' },
        ],
      }),
      ['body', 'secrets', 1, 'name'],
      'value_error',
    );
    await expect422(githubBody(uniqueName(), fx.integrationId, { secrets: [{ name: 'A' }] }), ['body', 'secrets', 0, 'value'], 'missing');
    const { secrets: _s, ...noSecrets } = githubBody(uniqueName(), fx.integrationId);
    const created = await t.api.post('/v2/deployments', noSecrets);
    expect(created.status).toBe(201);
    expect(created.body.secrets).toEqual([]);
  });

  it('resource_spec rules reach the API with their loc', async () => {
    await expect422(dockerBody(uniqueName(), fx.listenerId, { source_config: { listener_id: fx.listenerId, resource_spec: { min_scale: 3, max_scale: 1 } } }), [
      'body',
      'source_config',
      'resource_spec',
      'max_scale',
    ]);
    await expect422(
      dockerBody(uniqueName(), fx.listenerId, {
        source_config: { listener_id: fx.listenerId, resource_spec: { volume_mounts: [{ name: 'data', mountPath: '/d' }] } },
      }),
      ['body', 'source_config', 'resource_spec', 'volume_mounts', 0, 'name'],
    );
    await expect422(dockerBody(uniqueName(), fx.listenerId, { source_config: { listener_id: fx.listenerId, resource_spec: { cpu: -1 } } }), [
      'body',
      'source_config',
      'resource_spec',
      'cpu',
    ]);
  });

  it('references to stored state are 400: unknown integration or listener, k8s namespace rules', async () => {
    const unknown = crypto.randomUUID();
    expect((await t.api.post('/v2/deployments', githubBody(uniqueName(), unknown))).status).toBe(400);
    expect((await t.api.post('/v2/deployments', dockerBody(uniqueName(), unknown))).status).toBe(400);
    const onSandbox = dockerBody(uniqueName(), fx.listenerId, { source_config: { listener_id: fx.listenerId, listener_config: { k8s_namespace: 'agents' } } });
    const refused = await t.api.post('/v2/deployments', onSandbox);
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/k8s/);

    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `cluster-${uniqueName()}`,
      compute_config: { k8s_namespaces: ['agents'], k8s_license_secret: 'langgraph-license' },
    });
    expect(k8s.status).toBe(201);
    const allowed = dockerBody(uniqueName(), k8s.body.id, { source_config: { listener_id: k8s.body.id, listener_config: { k8s_namespace: 'agents' } } });
    const created = await t.api.post('/v2/deployments', allowed);
    expect(created.status).toBe(201);
    // Until a listener agent claims it, the revision waits in AWAITING_DEPLOY.
    await new Promise((r) => setTimeout(r, 50));
    const revision = await t.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    expect(revision.body.status).toBe('AWAITING_DEPLOY');
    const elsewhere = dockerBody(uniqueName(), k8s.body.id, { source_config: { listener_id: k8s.body.id, listener_config: { k8s_namespace: 'other' } } });
    expect((await t.api.post('/v2/deployments', elsewhere)).status).toBe(400);
  });

  it('PATCH: immutable fields and disallowed fields are 400; same values are fine; unknown fields 422', async () => {
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const id = created.body.id;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ source_config: { repo_url: 'https://github.com/acme/other' } }, /repo_url cannot be changed/],
      [{ source_config: { integration_id: crypto.randomUUID() } }, /integration_id cannot be changed/],
      [{ source_config: { deployment_type: 'prod' } }, /deployment_type cannot be changed/],
      [{ source_config: { custom_url: 'https://x.dev' } }, /read-only/],
      [{ source_config: { resource_spec: { cpu: 1 } } }, /resource_spec is not allowed/],
      [{ source_config: { listener_id: fx.listenerId } }, /listener_id is not allowed/],
      [{ source_revision_config: { image_uri: 'x:1' } }, /image_uri is not allowed/],
      [{ source_revision_config: { repo_ref: 'refs/tags/v1' }, source_config: null }, /build_on_push|tag/],
    ];
    await t.api.patch(`/v2/deployments/${id}`, { source_config: { build_on_push: true } });
    for (const [body, message] of cases) {
      const response = await t.api.patch(`/v2/deployments/${id}`, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.detail).toMatch(message);
    }
    const before = await t.api.get(`/v2/deployments/${id}/revisions`);
    const same = await t.api.patch(`/v2/deployments/${id}`, { source_config: { repo_url: 'https://github.com/acme/agent', deployment_type: 'dev' } });
    expect(same.status).toBe(200);
    const after = await t.api.get(`/v2/deployments/${id}/revisions`);
    expect(after.body.resources.length).toBe(before.body.resources.length);

    // An unknown field is ignored with a Warning (contract §2), so `name` cannot be changed by a PATCH.
    const unknownField = await t.api.patch(`/v2/deployments/${id}`, { name: 'renamed' });
    expect(unknownField.status).toBe(200);
    expect(unknownField.headers.get('warning')).toBe('299 - "Unknown field ignored: body.name"');
    expect(unknownField.body.name).not.toBe('renamed');
    const tagInBody = await t.api.patch(`/v2/deployments/${id}`, {
      source_config: { build_on_push: true },
      source_revision_config: { repo_ref: 'refs/tags/v2' },
    });
    expect(tagInBody.status).toBe(422);
    expect((await t.api.patch(`/v2/deployments/${crypto.randomUUID()}`, {})).status).toBe(404);
    const notFound = await t.api.patch(`/v2/deployments/${crypto.randomUUID()}`, {});
    expect(notFound.body.detail).toMatch(/^Deployment ID .* not found\.$/);
  });

  it('PATCH: a secret sent back masked keeps its stored value', async () => {
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const id = created.body.id;
    const patched = await t.api.patch(`/v2/deployments/${id}`, { secrets: [...created.body.secrets, { name: 'EXTRA', value: 'e' }] });
    expect(patched.status).toBe(200);
    const stored = await t.store.getDeployment(t.workspaceId, id);
    expect(stored?.secrets).toEqual([
      { name: 'OPENAI_API_KEY', value: 'sk-test-secret-value' },
      { name: 'EXTRA', value: 'e' },
    ]);
    const unknownMasked = await t.api.patch(`/v2/deployments/${id}`, { secrets: [{ name: 'NEVER_SET', value: '********' }] });
    expect(unknownMasked.status).toBe(400);
  });

  it('bad framing: malformed JSON, wrong content type, huge bodies, deep nesting, invalid UTF-8, bad uuids', async () => {
    const malformed = await t.api.call('POST', '/v2/deployments', '{"name": ');
    expect(malformed.status).toBe(422);
    expect(malformed.body.detail[0].type).toBe('json_invalid');
    const wrongType = await t.api.call('POST', '/v2/deployments', 'name=x', { 'content-type': 'text/plain' });
    expect(wrongType.status).toBe(415);
    const huge = await t.api.call('POST', '/v2/deployments', JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }));
    expect(huge.status).toBe(413);
    const deep = await t.api.call('POST', '/v2/deployments', '['.repeat(5000) + ']'.repeat(5000));
    expect(deep.status).toBe(422);
    const invalidUtf8 = await t.app.request('/v2/deployments', {
      method: 'POST',
      headers: { 'x-api-key': t.apiKey, 'content-type': 'application/json' },
      body: new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    });
    expect(invalidUtf8.status).toBe(422);
    const prototypeKey = await t.api.call('POST', '/v2/deployments', '{"name":"x","source_config":{"resource_spec":{"labels":{"__proto__":"x"}}}}');
    expect(prototypeKey.status).toBe(422);
    expect(prototypeKey.body.detail[0]).toMatchObject({ loc: ['body', 'source_config', 'resource_spec', 'labels', '__proto__'], type: 'value_error' });
    // 64 levels of nesting pass the shape walk (the schema refuses the body then), 65 do not.
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    const deepest = await t.api.call('POST', '/v2/deployments', nested(64));
    expect(deepest.status).toBe(422);
    expect(deepest.body.detail[0].type).not.toBe('json_invalid');
    expect((await t.api.call('POST', '/v2/deployments', nested(65))).body.detail).toEqual([expect.objectContaining({ loc: ['body'], type: 'json_invalid' })]);
    // A NUL in a string right inside an array, below an array of objects: the path ends with its index.
    const nulInArray = await t.api.call('POST', '/v2/deployments', '{"name":"x","secrets":[{"name":"A","value":"v"}],"tags":[["ok","b\\u0000"]]}');
    expect(nulInArray.body.detail[0]).toMatchObject({ loc: ['body', 'tags', 0, 1], type: 'string_pattern_mismatch' });
    const badId = await t.api.get('/v2/deployments/not-a-uuid');
    expect(badId.status).toBe(422);
    expect(badId.body.detail[0]).toMatchObject({ loc: ['path', 'deployment_id'], type: 'uuid_parsing' });
    const badLimit = await t.api.get('/v2/deployments?limit=1000');
    expect(badLimit.status).toBe(422);
    expect(badLimit.body.detail[0].loc).toEqual(['query', 'limit']);
  });

  it('upper-case UUIDs name the same resources as lower-case ones', async () => {
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const id: string = created.body.id;
    expect((await t.api.get(`/v2/deployments/${id.toUpperCase()}`)).body.id).toBe(id);
    const same = await t.api.patch(`/v2/deployments/${id}`, { source_config: { integration_id: fx.integrationId.toUpperCase() } });
    expect(same.status).toBe(200);
    expect((await t.api.get('/v2/deployments', { 'x-tenant-id': t.workspaceId.toUpperCase() })).status).toBe(200);
  });

  it('authentication: missing, unknown and revoked keys are 401; bearer works', async () => {
    expect((await t.client('').get('/v2/deployments')).status).toBe(401);
    expect((await t.client('nope').get('/v2/deployments')).status).toBe(401);
    const bearer = await t.app.request('/v2/deployments', { headers: { authorization: `Bearer ${t.apiKey}` } });
    expect(bearer.status).toBe(200);
    const key = await t.api.post('/v1/api-keys', { description: 'temporary' });
    expect(key.status).toBe(201);
    const temp = t.client(key.body.key);
    expect((await temp.get('/v2/deployments')).status).toBe(200);
    expect((await t.api.get('/v1/api-keys')).body.some((k: { key?: string }) => k.key !== undefined)).toBe(false);
    expect((await t.api.delete(`/v1/api-keys/${key.body.id}`)).status).toBe(204);
    expect((await temp.get('/v2/deployments')).status).toBe(401);
  });

  it('health, readiness and the OpenAPI document need no key', async () => {
    expect((await t.app.request('/healthz')).status).toBe(200);
    expect((await t.app.request('/readyz')).status).toBe(200);
    const doc = (await (await t.app.request('/openapi.json')).json()) as any;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.paths['/v2/deployments'].post.requestBody).toBeDefined();
    expect(doc.paths['/v2/deployments/{deployment_id}'].patch.responses['422']).toBeDefined();
  });
});
