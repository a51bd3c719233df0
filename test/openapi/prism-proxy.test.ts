import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { type PrismProxy, startPrismProxy } from './tools.ts';

type Exchange = { request: string; status: number; violations: string | null; prismProblem: boolean };
type Operation = { parameters?: Array<{ in: string; required?: boolean }>; requestBody?: unknown };

/**
 * Prism (`prism proxy --errors`) in front of a real server while a whole flow runs through it:
 * every request the flow sends and every answer the server gives must match the served
 * document. A mismatch shows as an `sl-violations` header, a Prism problem answer (422 for a
 * request, 500 for an answer) in place of the server's, and a line in Prism's log.
 */
describe('Prism proxy: the traffic of a real flow matches the OpenAPI document', () => {
  const WEBHOOK_SECRET = 'prism-webhook-secret';
  let server: ServerProcess;
  let prism: PrismProxy;
  let api: Api;
  let doc: { paths: Record<string, Record<string, Operation>> };
  const exchanges: Exchange[] = [];

  /** fetch through Prism, recording what Prism thought of each exchange. */
  const recordingFetch = async (url: string, init: RequestInit): Promise<Response> => {
    const response = await fetch(url, init);
    const type = response.headers.get('content-type') ?? '';
    const prismProblem = type.includes('application/problem+json') && (await response.clone().text()).includes('stoplight.io/prism/errors');
    exchanges.push({
      request: `${init.method ?? 'GET'} ${new URL(url).pathname}`,
      status: response.status,
      violations: response.headers.get('sl-violations'),
      prismProblem,
    });
    return response;
  };

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50', GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET });
    const text = await (await fetch(`${server.url}/openapi.json`)).text();
    doc = JSON.parse(text);
    const file = join(mkdtempSync(join(tmpdir(), 'cp-prism-')), 'openapi.json');
    writeFileSync(file, text);
    prism = await startPrismProxy(file, server.url);
    api = apiClient(prism.url, server.apiKey, {}, recordingFetch);
  });
  afterAll(async () => {
    await prism?.stop();
    await server?.kill();
  });

  it('create, get, patch, list revisions, long-poll to 304, logs, errors, delete: no violation', async () => {
    const fixtures = await workspaceFixtures(api);
    const name = uniqueName('prism');
    const created = await api.post('/v2/deployments', githubBody(name, fixtures.integrationId));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const firstRevision = created.body.latest_revision_id as string;

    expect((await api.get(`/v2/deployments/${id}`)).status).toBe(200);
    expect((await api.get(`/v2/deployments?limit=5&name_contains=prism`)).status).toBe(200);

    // Follow the first revision with conditional GETs until it is DEPLOYED.
    const revisionPath = `/v2/deployments/${id}/revisions/${firstRevision}`;
    let read = await api.get(revisionPath);
    expect(read.status).toBe(200);
    let etag = read.headers.get('etag')!;
    expect(etag).toBeTruthy();
    await eventually(
      async () => {
        const next = await api.get(revisionPath, { 'if-none-match': etag, prefer: 'wait=2' });
        if (next.status === 200) {
          etag = next.headers.get('etag')!;
          read = next;
        } else expect(next.status).toBe(304);
        return read.body.status === 'DEPLOYED' ? true : undefined;
      },
      30_000,
      0,
    );
    // Nothing changes any more: the held request ends in a 304.
    const unchanged = await api.get(revisionPath, { 'if-none-match': etag, prefer: 'wait=1' });
    expect(unchanged.status).toBe(304);

    const logs = await api.get(`${revisionPath}/logs?type=build&limit=10`);
    expect(logs.status).toBe(200);
    expect(logs.body.logs.length).toBeGreaterThan(0);
    expect((await api.get(`${revisionPath}/logs?type=deploy`)).status).toBe(200);

    const patched = await api.patch(`/v2/deployments/${id}`, { secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-rotated' }] });
    expect(patched.status).toBe(200);
    const revisions = await api.get(`/v2/deployments/${id}/revisions?limit=10`);
    expect(revisions.status).toBe(200);
    expect(revisions.body.resources[0].id).toBe(patched.body.latest_revision_id);
    expect((await api.get(`/v1/tracing-projects?name=${name}`)).status).toBe(200);

    // Error answers the document declares.
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await api.get(`/v2/deployments/${unknown}`)).status).toBe(404);
    expect((await api.get(`/v2/deployments/${id}/revisions/${unknown}`)).status).toBe(404);
    expect((await api.post('/v2/deployments', githubBody(name, fixtures.integrationId))).status).toBe(409);
    expect((await api.patch(`/v2/deployments/${id}`, { source_config: { integration_id: unknown } })).status).toBe(400);
    expect((await apiClient(prism.url, 'not-a-key', {}, recordingFetch).get('/v2/deployments')).status).toBe(401);

    expect((await api.delete(`/v2/deployments/${id}`)).status).toBe(204);

    // The GitHub webhook: a signed ping, a push, a bad signature.
    const delivery = async (event: string, payload: unknown, secret = WEBHOOK_SECRET) => {
      const body = JSON.stringify(payload);
      const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
      const headers = { 'x-github-event': event, 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': signature };
      return api.call('POST', '/v1/webhooks/github', body, { 'content-type': 'application/json', ...headers });
    };
    expect((await delivery('ping', { zen: 'Keep it logically awesome.', hook_id: 1 })).status).toBe(200);
    expect((await delivery('push', { ref: 'refs/heads/main', after: 'a'.repeat(40), repository: { html_url: 'https://github.com/acme/none' } })).status).toBe(
      202,
    );
    expect((await delivery('push', { ref: 'refs/heads/main' }, 'wrong-secret')).status).toBe(401);

    // The OAuth callback's HTML page for a state it does not know.
    const callback = await api.get('/v2/auth/callback?state=unknown&code=x');
    expect(callback.status).toBe(400);
  });

  it('the other write routes: workspaces, API keys, listeners, redeploy, interrupt, integrations', async () => {
    expect((await api.post('/v1/workspaces', { name: uniqueName('ws') })).status).toBe(201);
    const key = await api.post('/v1/api-keys', { description: 'prism' });
    expect(key.status).toBe(201);
    expect((await api.delete(`/v1/api-keys/${key.body.id}`)).status).toBe(204);
    // A body that names a workspace that is not the organization's: 404, though the path names none.
    expect((await api.post('/v1/api-keys', { workspace_id: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);

    const listener = await api.post('/v2/listeners', { compute_type: 'k8s', compute_id: uniqueName('k8s'), compute_config: { k8s_namespaces: ['agents'] } });
    expect(listener.status).toBe(201);
    expect((await api.get(`/v2/listeners/${listener.body.id}`)).status).toBe(200);
    expect((await api.patch(`/v2/listeners/${listener.body.id}`, { compute_config: { k8s_namespaces: ['agents', 'more'] } })).status).toBe(200);
    expect((await api.post('/v2/listeners', { compute_type: 'k8s', compute_id: listener.body.compute_id })).status).toBe(409);
    expect((await api.delete(`/v2/listeners/${listener.body.id}`)).status).toBe(204);

    const fixtures = await workspaceFixtures(api);
    const created = await api.post('/v2/deployments', githubBody(uniqueName('prism'), fixtures.integrationId));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const first = created.body.latest_revision_id as string;
    // These take no body (the document declares none, as the hosted one does for redeploy).
    // 200, or 400 if the (50 ms per stage) revision already ended on a busy machine.
    expect([200, 400]).toContain((await api.call('POST', `/v2/deployments/${id}/revisions/${first}/interrupt`)).status);
    // Interrupting a revision that has ended is a rule of stored state: 400.
    expect((await api.call('POST', `/v2/deployments/${id}/revisions/${first}/interrupt`)).status).toBe(400);
    expect((await api.call('POST', `/v2/deployments/${id}/revisions/${first}/redeploy`)).status).toBe(200);
    expect((await api.get(`/v1/tracing-projects/${(await api.get(`/v1/tracing-projects?name=${created.body.name}`)).body.resources[0].id}`)).status).toBe(200);
    expect((await api.delete(`/v2/deployments/${id}?delete_tracing_project=true`)).status).toBe(204);
    expect((await api.delete(`/v1/integrations/github/${fixtures.integrationId}`)).status).toBe(204);
  });

  it('every GET that needs no parameter answers as documented (covers routes added later)', async () => {
    const simple = Object.entries(doc.paths).filter(([, ops]) => ops.get && !ops.get.parameters?.some((p) => p.required));
    expect(simple.length).toBeGreaterThan(5);
    for (const [path] of simple) {
      const answer = await api.get(path);
      expect(answer.status, path).toBeLessThan(500);
    }
  });

  afterAll(() => {
    // Checked last, over both tests, so a violation names its request.
    const bad = exchanges.filter((e) => e.violations || e.prismProblem);
    const log = prism
      .output()
      .split('\n')
      .filter((line) => /violation|✖/i.test(line));
    expect({ bad, log }).toEqual({ bad: [], log: [] });
    expect(exchanges.length).toBeGreaterThan(25);
  });
});
