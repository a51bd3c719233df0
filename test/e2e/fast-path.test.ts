import { createServer, type ServerOptions } from 'node:http';
import { connect } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeListener, revisionFastPath } from '../../server/http/revision-fast-lane.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** One raw HTTP/1.1 exchange: the request's lines exactly as given; the answer's bytes, whole. */
function exchange(port: number, lines: string[], body = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write([...lines, 'Host: 127.0.0.1', 'Connection: close', '', body].join('\r\n')));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
  });
}

/** The answer with its Date and request id headers' values blanked (what differs by the second, and by the request). */
const undated = (answer: string) =>
  answer.replace(/\r\nDate: [^\r]*\r\n/, '\r\nDate: -\r\n').replace(/\r\nx-request-id: [0-9a-f-]{36}\r\n/, '\r\nx-request-id: -\r\n');

/**
 * The GET revision fast path (server/http/revision-fast-lane.ts) answers before Hono; it must answer
 * exactly what Hono answers. Two real servers on loopback ports over the same app: one with the
 * fast path in front of Hono (as `startServer` wires it), one with Hono alone. Every request goes
 * to both; the answers must be the same bytes, and the fast path must have answered the cases it
 * is for (the fallback's calls are counted) and handed every other case to Hono.
 */
describe('GET revision fast path: byte for byte what Hono answers', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let fast: ServerType;
  let plain: ServerType;
  let fastPort: number;
  let plainPort: number;
  let fellBack = 0;
  let path: string;
  let deploymentId: string;
  let revisionId: string;

  const listen = (createServerOption?: typeof createServer) =>
    new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1', createServer: createServerOption }, () => resolve(s));
    });

  beforeAll(async () => {
    t = await inProcessApp();
    await workspaceFixtures(t.api);
    // A k8s listener's revision waits in AWAITING_DEPLOY: it holds still under the test.
    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${uniqueName()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id));
    deploymentId = created.body.id;
    revisionId = created.body.latest_revision_id;
    path = `/v2/deployments/${deploymentId}/revisions/${revisionId}`;
    await new Promise((r) => setTimeout(r, 50));
    const withFastPath = ((options: ServerOptions, listener: NodeListener) =>
      createServer(
        options,
        revisionFastPath(t.services, (req, res) => {
          fellBack += 1;
          listener(req, res);
        }),
      )) as typeof createServer;
    fast = await listen(withFastPath);
    plain = await listen();
    fastPort = (fast.address() as { port: number }).port;
    plainPort = (plain.address() as { port: number }).port;
  });
  afterAll(async () => {
    await Promise.all([fast, plain].map((s) => new Promise((r) => s.close(r))));
    await t.close();
  });

  /** Sends `lines` to both servers; answers the fast server's bytes and whether its fast path answered. */
  async function both(lines: string[], body?: string): Promise<{ answer: string; answeredFast: boolean }> {
    const before = fellBack;
    const viaFast = await exchange(fastPort, lines, body);
    const answeredFast = fellBack === before;
    const viaHono = await exchange(plainPort, lines, body);
    expect(undated(viaFast)).toBe(undated(viaHono));
    return { answer: viaFast, answeredFast };
  }

  it('answers a plain GET itself, with the same status line, headers (order and case) and body as Hono', async () => {
    // The first request with a key goes to Hono (nothing cached); from then on the fast path answers.
    await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`]);
    const { answer, answeredFast } = await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`]);
    expect(answeredFast).toBe(true);
    expect(answer.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.id).toBe(revisionId);
    expect(answer).toMatch(/\r\netag: "[^"]+"\r\n/);
    expect(answer).toMatch(/\r\nContent-Length: \d+\r\n/);
  });

  it('answers the other ordinary forms itself too: a bearer key, upper-case ids, a Prefer without If-None-Match', async () => {
    for (const lines of [
      [`GET ${path} HTTP/1.1`, `Authorization: Bearer ${t.apiKey}`],
      [`GET ${path} HTTP/1.1`, `X-Api-Key:   ${t.apiKey}  `],
      [`GET /v2/deployments/${deploymentId.toUpperCase()}/revisions/${revisionId.toUpperCase()} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`],
      // One id in each case: the lower-case test fails, the any-case one passes.
      [`GET /v2/deployments/${deploymentId}/revisions/${revisionId.toUpperCase()} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`],
      [`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, 'Prefer: wait=1'],
    ]) {
      const { answer, answeredFast } = await both(lines);
      expect(answeredFast, lines.join(' | ')).toBe(true);
      expect(answer.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
    }
  });

  it('answers conditional GETs itself: 304 for the current version (also after a wait that passes), 200 for another', async () => {
    const etag = /\r\netag: ("[^"]+")\r\n/.exec((await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`])).answer)![1]!;
    for (const [lines, status] of [
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `If-None-Match: ${etag}`], 304],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `If-None-Match: W/${etag}, "x"`], 304],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, 'If-None-Match: *'], 304],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, 'If-None-Match: "old"'], 200],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, 'If-None-Match: "old"', 'Prefer: wait=30'], 200],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `If-None-Match: ${etag}`, 'Prefer: wait=0.2'], 304],
      [[`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `If-None-Match: ${etag}`, 'Prefer: wait=nonsense'], 304],
    ] as const) {
      const { answer, answeredFast } = await both([...lines]);
      expect(answeredFast, lines.join(' | ')).toBe(true);
      expect(Number(answer.split(' ')[1]), lines.join(' | ')).toBe(status);
    }
  });

  it('hands every other case to Hono, which answers it in full', async () => {
    const etag = /\r\netag: ("[^"]+")\r\n/.exec((await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`])).answer)![1]!;
    const otherWorkspace = await t.api.post('/v1/workspaces', { name: uniqueName('ws') });
    const scopedElsewhere = await t.api.post('/v1/api-keys', { description: 'elsewhere', workspace_id: otherWorkspace.body.id });
    const revoked = await t.api.post('/v1/api-keys', { description: 'revoked' });
    await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${revoked.body.key}`]);
    await both([`GET ${path} HTTP/1.1`, `X-Api-Key: ${scopedElsewhere.body.key}`]);
    expect((await t.api.delete(`/v1/api-keys/${revoked.body.id}`)).status).toBe(204);

    const cases: Array<[string, string[], number, string?]> = [
      ['a key seen for the first time', [`GET ${path} HTTP/1.1`, `X-Api-Key: ${(await t.api.post('/v1/api-keys', { description: 'new' })).body.key}`], 200],
      ['no key', [`GET ${path} HTTP/1.1`], 401],
      ['a wrong key', [`GET ${path} HTTP/1.1`, 'X-Api-Key: nope'], 401],
      ['a revoked key (its hash cached)', [`GET ${path} HTTP/1.1`, `X-Api-Key: ${revoked.body.key}`], 401],
      ['a repeated Authorization', [`GET ${path} HTTP/1.1`, `Authorization: Bearer ${t.apiKey}`, 'Authorization: Bearer other'], 401],
      ["another workspace's key (the row is not its)", [`GET ${path} HTTP/1.1`, `X-Api-Key: ${scopedElsewhere.body.key}`], 404],
      ['X-Tenant-Id', [`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `X-Tenant-Id: ${t.workspaceId}`], 200],
      ['X-Tenant-Id of another organization', [`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `X-Tenant-Id: ${crypto.randomUUID()}`], 403],
      ['an unknown revision', [`GET /v2/deployments/${deploymentId}/revisions/${crypto.randomUUID()} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 404],
      ['an unknown deployment', [`GET /v2/deployments/${crypto.randomUUID()}/revisions/${revisionId} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 404],
      ['an id that is no UUID', [`GET /v2/deployments/${deploymentId}/revisions/not-a-uuid HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 422],
      // 36 characters, dashes in place, one not hex: neither the lower-case nor the any-case test passes.
      ['an id with a letter past f', [`GET /v2/deployments/${deploymentId}/revisions/${revisionId.slice(0, 35)}G HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 422],
      ['a query string', [`GET ${path}?x=1 HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 200],
      ['a trailing slash', [`GET ${path}/ HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 404],
      [
        'If-None-Match of an unknown revision',
        [`GET /v2/deployments/${deploymentId}/revisions/${crypto.randomUUID()} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, `If-None-Match: ${etag}`, 'Prefer: wait=5'],
        404,
      ],
      ['HEAD', [`HEAD ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 200],
      ['a body on the GET', [`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`, 'Content-Length: 2'], 200, '{}'],
      ['another method', [`DELETE ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`], 404],
    ];
    for (const [name, lines, status, body] of cases) {
      const { answer, answeredFast } = await both(lines, body);
      expect(answeredFast, name).toBe(false);
      expect(Number(answer.split(' ')[1]), name).toBe(status);
    }
  });
});

describe('the fast path holds long-polls and answers them on a change as Hono does', () => {
  it('both servers hold the same long-poll; one change answers both with the same bytes', async () => {
    const t = await inProcessApp();
    try {
      await workspaceFixtures(t.api);
      const k8s = await t.api.post('/v2/listeners', {
        compute_type: 'k8s',
        compute_id: `k8s-${uniqueName()}`,
        compute_config: { k8s_license_secret: 'langgraph-license' },
      });
      const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id));
      const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
      await new Promise((r) => setTimeout(r, 50));
      const etag = (await t.api.get(path)).headers.get('etag')!;
      let fellBack = 0;
      const servers = await Promise.all(
        [true, false].map(
          (withFast) =>
            new Promise<ServerType>((resolve) => {
              const createServerOption = withFast
                ? (((options: ServerOptions, listener: NodeListener) =>
                    createServer(
                      options,
                      revisionFastPath(t.services, (req, res) => {
                        fellBack += 1;
                        listener(req, res);
                      }),
                    )) as typeof createServer)
                : undefined;
              const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1', createServer: createServerOption }, () => resolve(s));
            }),
        ),
      );
      try {
        const [fastPort, plainPort] = servers.map((s) => (s.address() as { port: number }).port) as [number, number];
        const lines = [`GET ${path} HTTP/1.1`, `X-Api-Key: ${t.apiKey}`];
        await exchange(fastPort, lines); // the key's first request goes to Hono and caches its check
        const before = fellBack;
        const waitingBefore = t.services.watch.size;
        const held = [fastPort, plainPort].map((port) => exchange(port, [...lines, `If-None-Match: ${etag}`, 'Prefer: wait=30']));
        for (let i = 0; t.services.watch.size < waitingBefore + 2; i += 1) {
          if (i > 500) throw new Error('the long-polls were not held');
          await new Promise((r) => setTimeout(r, 10));
        }
        expect((await t.api.post(`${path}/interrupt`)).status).toBe(200);
        const [viaFast, viaHono] = await Promise.all(held);
        expect(fellBack).toBe(before);
        expect(viaFast!.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
        expect(JSON.parse(viaFast!.slice(viaFast!.indexOf('\r\n\r\n') + 4)).status).toBe('INTERRUPTED');
        expect(undated(viaFast!)).toBe(undated(viaHono!));
        expect(t.services.watch.size).toBe(waitingBefore);
      } finally {
        await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
      }
    } finally {
      await t.close();
    }
  });
});
