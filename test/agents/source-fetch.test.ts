import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { agentProject, gzipTarball } from '../helpers/tarball.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/**
 * The fetch route of an `internal_source` revision's tarball (docs/listener-protocol.md): the
 * work item's signed URL, the claiming listener's token and a held claim, all three needed.
 * In process (the route is plain HTTP; the agent's use of it runs for real in remote-deploy-e2e).
 */
describe('the signed source URL of a claimed internal_source revision', () => {
  let t: App;
  const listeners: Record<'a' | 'b', { listenerId: string; token: string }> = {} as never;
  // Incompressible, over 1 MiB: the tarball spans several chunk rows, read back one by one.
  const tarball = gzipTarball({ ...agentProject(), 'weights.bin': randomBytes(3 * 1024 * 1024) });

  beforeAll(async () => {
    // A 2 s URL lifetime, so the expiry case is reached by waiting; a lease long enough to hold the claim meanwhile.
    t = await inProcessApp({ env: { UPLOAD_URL_TTL_SECONDS: '2', AGENT_LEASE_MS: '60000' } });
    for (const name of ['a', 'b'] as const) {
      const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: `machine-${name}` });
      const token = await t.api.post(`/v2/listeners/${listener.body.id}/tokens`);
      listeners[name] = { listenerId: listener.body.id as string, token: token.body.token as string };
    }
  });
  afterAll(() => t?.close());

  const claim = async (who: 'a' | 'b') => {
    const { listenerId, token } = listeners[who];
    const response = await t.app.request(`/v2/listeners/${listenerId}/agent/claim`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: `agent-${who}`, wait_seconds: 0 }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { work: any }).work;
  };
  const fetchAs = (url: string, token: string | null) => {
    const target = new URL(url);
    return t.app.request(target.pathname + target.search, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  };

  it('streams the uploaded bytes only with a fitting, unexpired signature, the claiming listener’s token and a held claim', async () => {
    const bytes = await tarball;
    // internal_source takes no listener_id: it runs on the workspace's default listener, made A here.
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: listeners.a.listenerId })).status).toBe(200);
    const created = await t.api.post('/v2/deployments', { name: uniqueName('remote'), source: 'internal_source' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const issued = await t.api.post(`/v2/deployments/${id}/upload-url`);
    const uploadUrl = new URL(issued.body.upload_url as string);
    const put = await t.app.request(uploadUrl.pathname + uploadUrl.search, { method: 'PUT', headers: { 'content-type': 'application/gzip' }, body: bytes });
    expect(put.status).toBe(200);
    const patched = await t.api.patch(`/v2/deployments/${id}`, {
      revision_source: 'internal_source',
      source_revision_config: { source_tarball_path: issued.body.object_path, langgraph_config_path: 'langgraph.json' },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);

    const work = await claim('a');
    expect(work).toMatchObject({ kind: 'revision', deployment: { id }, revision: { graph_config_path: 'langgraph.json', source: { type: 'tarball' } } });
    const url = work.revision.source.url as string;
    expect(new URL(url).pathname).toBe(`/v2/listeners/${listeners.a.listenerId}/agent/claims/${work.claim_id}/source`);

    const fetched = await fetchAs(url, listeners.a.token);
    expect(fetched.status).toBe(200);
    expect(fetched.headers.get('content-type')).toBe('application/gzip');
    expect(fetched.headers.get('content-length')).toBe(String(bytes.length));
    expect(sha256(Buffer.from(await fetched.arrayBuffer()))).toBe(sha256(bytes));

    // The signature alone is not enough: no token, an API key, another listener's token.
    expect((await fetchAs(url, null)).status).toBe(401);
    expect((await fetchAs(url, t.apiKey)).status).toBe(401);
    expect((await fetchAs(url, listeners.b.token)).status).toBe(404);
    // B's token on B's own path with A's claim and signature: the signature is bound to listener A.
    const onB = url.replace(listeners.a.listenerId, listeners.b.listenerId);
    expect((await fetchAs(onB, listeners.b.token)).status).toBe(403);
    // A signature that does not fit: altered, missing, moved to another expiry, the upload's own.
    const altered = new URL(url);
    altered.searchParams.set('signature', `${altered.searchParams.get('signature')!.slice(0, -2)}AA`);
    expect((await fetchAs(altered.href, listeners.a.token)).status).toBe(403);
    const later = new URL(url);
    later.searchParams.set('expires', String(Number(later.searchParams.get('expires')) + 60_000));
    expect((await fetchAs(later.href, listeners.a.token)).status).toBe(403);
    const bare = new URL(url);
    bare.search = '';
    expect((await fetchAs(bare.href, listeners.a.token)).status).toBe(403);
    const withUploadSignature = new URL(url);
    withUploadSignature.search = uploadUrl.search;
    expect((await fetchAs(withUploadSignature.href, listeners.a.token)).status).toBe(403);
    // Refusals carry the contract's error shape and no tarball bytes.
    const refused = await fetchAs(altered.href, listeners.a.token);
    expect(refused.headers.get('content-type')).toContain('application/json');
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/signature/);

    // Expired: the same URL, once its lifetime has passed, serves nothing.
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const expired = await fetchAs(url, listeners.a.token);
    expect(expired.status).toBe(403);
    expect(((await expired.json()) as { detail: string }).detail).toMatch(/expired/);

    // A claim given back: its URL (even a fresh one) no longer serves; the next claim has its own.
    const release = await t.app.request(`/v2/listeners/${listeners.a.listenerId}/agent/claims/${work.claim_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${listeners.a.token}` },
    });
    expect(release.status).toBe(204);
    const again = await claim('a');
    expect(again.claim_id).not.toBe(work.claim_id);
    const fresh = again.revision.source.url as string;
    expect((await fetchAs(fresh, listeners.a.token)).status).toBe(200);
    await t.app.request(`/v2/listeners/${listeners.a.listenerId}/agent/claims/${again.claim_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${listeners.a.token}` },
    });
    expect((await fetchAs(fresh, listeners.a.token)).status).toBe(409);
  });

  it('answers 404, signature and token fitting, for a claim whose revision is not an uploaded tarball', async () => {
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('image'), listeners.b.listenerId));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const work = await claim('b');
    expect(work.revision.source).toEqual({ type: 'image', image_uri: 'registry.example.com/acme/agent:1.0.0' });
    // A URL this server would sign for B's image claim: signed correctly, but there is no tarball to serve.
    const signed = t.services.uploads.fetchUrl(
      `/v2/listeners/${listeners.b.listenerId}/agent/claims/${work.claim_id}/source`,
      `agent-source:${listeners.b.listenerId}:${work.claim_id}`,
    );
    const response = await fetchAs(signed, listeners.b.token);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/no uploaded source tarball/);
  });
});
