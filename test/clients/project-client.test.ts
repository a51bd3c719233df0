import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, ApiError } from '../../shared/client.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** The project's typed client on the new routes, against the real app in-process. */
describe('the typed client and the hosted API routes', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let client: ApiClient;
  let integrationId: string;
  beforeAll(async () => {
    t = await inProcessApp({ env: { REGISTRY_URL: 'registry.local', REGISTRY_PUSH_TOKEN: 'tok' } });
    integrationId = (await workspaceFixtures(t.api)).integrationId;
    client = new ApiClient({
      baseUrl: '',
      apiKey: t.apiKey,
      retries: 0,
      fetch: ((url: string, init: RequestInit) => t.app.request(url, init)) as typeof fetch,
    });
  });
  afterAll(() => t.close());

  it('creates revisions, asks for upload URLs and push tokens, deletes in bulk (200 and 207)', async () => {
    const github = await client.createDeployment(githubBody('my_agent', integrationId) as never);
    const revision = await client.createRevision(github.id);
    expect(revision).toMatchObject({ deployment_id: github.id, source: 'github' });
    expect(revision.source_revision_config.langgraph_config_path).toBe('langgraph.json');

    const source = await client.createDeployment({ name: uniqueName(), source: 'internal_source' } as never);
    expect(source.latest_revision_id).toBeNull();
    const upload = await client.uploadUrl(source.id);
    expect(upload.upload_url).toMatch(/^http:\/\/localhost\/v1\/uploads\/[0-9a-f-]{36}\?expires=\d+&signature=/);
    await expect(client.pushToken(source.id)).rejects.toBeInstanceOf(ApiError);

    const docker = await client.createDeployment({ name: uniqueName(), source: 'internal_docker' } as never);
    expect(await client.pushToken(docker.id)).toEqual({ token: 'tok', registry_url: 'registry.local' });

    expect(await client.deleteDeployments([github.id, source.id])).toEqual({ deleted: [github.id, source.id], failed: [] });
    const missing = crypto.randomUUID();
    const partial = await client.deleteDeployments([docker.id, missing]);
    expect(partial.deleted).toEqual([docker.id]);
    expect(partial.failed.map((f) => f.id)).toEqual([missing]);
  });
});
