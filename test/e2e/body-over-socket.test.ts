import { connect } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** A raw request with a chunked body (no Content-Length); answers the status. */
function chunked(port: number, path: string, key: string, chunks: Buffer[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(
        [
          `POST ${path} HTTP/1.1`,
          'Host: 127.0.0.1',
          `X-Api-Key: ${key}`,
          'Content-Type: application/json',
          'Transfer-Encoding: chunked',
          'Connection: close',
          '',
          '',
        ].join('\r\n'),
      );
      for (const chunk of chunks) socket.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`, 'latin1');
      socket.write('0\r\n\r\n');
    });
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve(Number(data.split(' ')[1])));
    socket.on('error', reject);
  });
}

/**
 * JSON bodies of requests over a socket are read from Node's request stream (server/http/node-request.ts
 * `readNodeBody`), not from the WHATWG Request's body as in process: the same requests must get
 * the same answers both ways.
 */
describe('request bodies over a socket are read as in process', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let server: ServerType;
  let port: number;
  let remote: Api;
  let integrationId: string;
  let listenerId: string;

  beforeAll(async () => {
    t = await inProcessApp({ stageMs: 3_600_000 });
    const fx = await workspaceFixtures(t.api);
    integrationId = fx.integrationId;
    listenerId = fx.listenerId;
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    port = (server.address() as { port: number }).port;
    remote = apiClient(`http://127.0.0.1:${port}`, t.apiKey);
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await t.close();
  });

  it('a create, and each framing error, answer the same status and body both ways', async () => {
    const created = await remote.post('/v2/deployments', githubBody(uniqueName('sock'), integrationId));
    expect(created.status).toBe(201);
    expect((await t.api.get(`/v2/deployments/${created.body.id}`)).body.name).toBe(created.body.name);
    const cases: Array<[string, string, Record<string, string>?]> = [
      ['malformed JSON', '{"name": '],
      ['wrong content type', 'name=x', { 'content-type': 'text/plain' }],
      ['a body over the limit', JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) })],
      ['deep nesting', '['.repeat(5000) + ']'.repeat(5000)],
      ['an empty body', ''],
      ['a schema error', JSON.stringify({ name: 'x', source: 'nope' })],
    ];
    for (const [why, body, headers] of cases) {
      const [viaSocket, inProcess] = [await remote.call('POST', '/v2/deployments', body, headers), await t.api.call('POST', '/v2/deployments', body, headers)];
      expect(viaSocket.status, why).toBe(inProcess.status);
      expect(viaSocket.body, why).toEqual(inProcess.body);
    }
  });

  it('a chunked body (no Content-Length): read whole under the limit, refused with 413 over it', async () => {
    const body = Buffer.from(JSON.stringify(githubBody(uniqueName('chunked'), integrationId)));
    expect(await chunked(port, '/v2/deployments', t.apiKey, [body.subarray(0, 10), body.subarray(10, 40), body.subarray(40)])).toBe(201);
    const big = Buffer.from(JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }));
    const pieces = Array.from({ length: Math.ceil(big.length / 65536) }, (_, i) => big.subarray(i * 65536, (i + 1) * 65536));
    expect(await chunked(port, '/v2/deployments', t.apiKey, pieces)).toBe(413);
  });

  it('a route that read a header through the Request before the body (the revisions POST) still gets the whole body', async () => {
    const created = await remote.post('/v2/deployments', dockerBody(uniqueName('rev'), listenerId));
    expect(created.status).toBe(201);
    const revision = await remote.post(`/v2/deployments/${created.body.id}/revisions`, { source_revision_config: { image_uri: 'registry.example/app:v2' } });
    expect(revision.status).toBe(201);
    expect(revision.body.source_revision_config.image_uri).toBe('registry.example/app:v2');
  });

  it('a client that goes away mid-body leaves the server answering the next request', async () => {
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          [
            `POST /v2/deployments HTTP/1.1`,
            'Host: 127.0.0.1',
            `X-Api-Key: ${t.apiKey}`,
            'Content-Type: application/json',
            'Content-Length: 1000',
            '',
            '{"name":',
          ].join('\r\n'),
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
      socket.on('error', reject);
    });
    expect((await remote.post('/v2/deployments', githubBody(uniqueName('after'), integrationId))).status).toBe(201);
  });
});
