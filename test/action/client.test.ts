import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiClient, ApiError, ResponseShapeError, retryAfterMs, TransientError } from '../../shared/client.ts';

type Reply = (req: IncomingMessage, res: ServerResponse) => void;
const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Reply =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };

const deployment = {
  id: '7d0a3f4e-6a43-4c33-9f5e-3f8a3b8a1c11',
  tenant_id: '7d0a3f4e-6a43-4c33-9f5e-3f8a3b8a1c12',
  name: 'agent',
  source: 'external_docker',
  source_config: {
    integration_id: null,
    repo_url: null,
    deployment_type: null,
    build_on_push: null,
    custom_url: null,
    resource_spec: null,
    listener_id: null,
    listener_config: null,
    install_command: null,
    build_command: null,
  },
  source_revision_config: { repo_ref: null, graph_config_path: null, image_uri: 'img', repo_commit_sha: null },
  secrets: [],
  created_at: '2026-11-22T10:00:00.000Z',
  updated_at: '2026-11-22T10:00:00.000Z',
  status: 'READY',
  latest_revision_id: null,
  active_revision_id: null,
  image_version: null,
};

// A stub HTTP server that answers from a script, to see what the client does with each answer.
describe('the REST client', () => {
  let server: Server;
  let url: string;
  let script: Reply[];
  let seen: string[];
  let sleeps: number[];
  const client = (retries = 4) =>
    new ApiClient({ baseUrl: url, apiKey: 'key', workspaceId: '7d0a3f4e-6a43-4c33-9f5e-3f8a3b8a1c12', retries, sleep: async (ms) => void sleeps.push(ms) });

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url} key=${req.headers['x-api-key']} tenant=${req.headers['x-tenant-id']}`);
      req.resume();
      const reply = script.shift();
      if (!reply) return res.writeHead(599).end();
      reply(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    script = [];
    seen = [];
    sleeps = [];
  });

  it('retries 429 after the Retry-After it was given, and parses the answer with the schema', async () => {
    script = [json(429, { detail: 'slow down' }, { 'retry-after': '2' }), json(200, deployment)];
    const got = await client().getDeployment(deployment.id);
    expect(got.name).toBe('agent');
    expect(sleeps).toEqual([2000]);
    expect(seen).toHaveLength(2);
    expect(seen[0]).toContain(`key=key tenant=${deployment.tenant_id}`);
  });

  it('shortens a Retry-After that would stall the run (at most 10 s)', async () => {
    script = [json(503, {}, { 'retry-after': '3600' }), json(200, deployment)];
    await client().getDeployment(deployment.id);
    expect(sleeps).toEqual([10_000]);
  });

  it('backs off exponentially on 5xx of a GET, then gives up as a transient error', async () => {
    script = [json(503, {}), json(502, {}), json(500, {})];
    await expect(client(2).getDeployment(deployment.id)).rejects.toThrow(TransientError);
    expect(seen).toHaveLength(3);
    expect(sleeps[0]).toBeGreaterThanOrEqual(250);
    expect(sleeps[0]).toBeLessThanOrEqual(500);
    expect(sleeps[1]).toBeGreaterThanOrEqual(500);
    expect(sleeps[1]).toBeLessThanOrEqual(1000);
  });

  it('sends a POST again after 503 (not acted on) but never after a 500 (it may have acted)', async () => {
    const body = {
      name: 'agent',
      source: 'external_docker' as const,
      source_config: { listener_id: deployment.tenant_id },
      source_revision_config: { image_uri: 'img' },
    };
    script = [json(503, {}), json(201, deployment)];
    expect((await client().createDeployment(body)).id).toBe(deployment.id);
    script = [json(500, { detail: 'Internal server error' })];
    seen = [];
    await expect(client().createDeployment(body)).rejects.toThrow(ApiError);
    expect(seen).toHaveLength(1);
    // A proxy's 502/504 may come after the server acted: a create is not sent twice.
    for (const status of [502, 504]) {
      script = [json(status, {}), json(201, deployment)];
      seen = [];
      await expect(client().createDeployment(body)).rejects.toThrow(ApiError);
      expect(seen, String(status)).toHaveLength(1);
    }
  });

  it('does not retry a 4xx, and turns the body into a sentence', async () => {
    script = [json(404, { detail: `Deployment ID ${deployment.id} not found.` })];
    await expect(client().getDeployment(deployment.id)).rejects.toThrow(`failed with HTTP 404: Deployment ID ${deployment.id} not found.`);
    script = [json(422, { detail: [{ loc: ['body', 'name'], msg: 'bad name', type: 'value_error' }] })];
    await expect(client().getDeployment(deployment.id)).rejects.toThrow('HTTP 422: body.name: bad name');
    expect(sleeps).toEqual([]);
  });

  it('refuses an answer of the wrong shape rather than guessing', async () => {
    script = [json(200, { id: 'not-a-uuid' })];
    await expect(client().getDeployment(deployment.id)).rejects.toThrow(ResponseShapeError);
  });

  it('long-polls with If-None-Match and Prefer: wait, and reads 304 as "no change"', async () => {
    let headers: IncomingMessage['headers'] = {};
    script = [
      (req, res) => {
        headers = req.headers;
        res.writeHead(304, { etag: '"r.1"' }).end();
      },
    ];
    const poll = await client().pollRevision(deployment.id, deployment.tenant_id, '"r.1"', 12.5);
    expect(poll).toEqual({ changed: false, etag: '"r.1"' });
    expect(headers['if-none-match']).toBe('"r.1"');
    expect(headers.prefer).toBe('wait=12.5');
  });

  it('reports a refused connection as transient after its retries', async () => {
    const closed = new ApiClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', retries: 1, sleep: async () => {} });
    await expect(closed.getDeployment(deployment.id)).rejects.toThrow(TransientError);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(retryAfterMs(null)).toBeNull();
    expect(retryAfterMs('soon')).toBeNull();
  });
});
