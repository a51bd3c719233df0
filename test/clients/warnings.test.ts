import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { ApiClient, type WarningEvent, warningTexts } from '../../shared/client.ts';
import { runAction } from '../action/harness.ts';
import { apiClient } from '../helpers/api.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

/**
 * A loopback proxy in front of the real server that adds `"tracked_packages"` to every JSON body
 * it forwards: it stands in for a newer client setting (or a mismatched version) sending a field
 * the server does not know, so the real server answers with a real `Warning` header.
 */
async function startFieldAddingProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const server: Server = createServer(async (req, res) => {
    let body = Buffer.alloc(0);
    for await (const chunk of req) body = Buffer.concat([body, chunk as Buffer]);
    const headers = { ...req.headers };
    if (body.length > 0 && /json/.test(String(req.headers['content-type']))) {
      body = Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), tracked_packages: ['langgraph'] }));
      headers['content-length'] = String(body.length);
    }
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer: IncomingMessage) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.writeHead(502).end());
    forward.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('Warning headers reach the user of the project client, CLI and Action', () => {
  it('warningTexts reads one value, several folded values, and escaped quotes', () => {
    expect(warningTexts(null)).toEqual([]);
    expect(warningTexts('299 - "Unknown field ignored: body.a"')).toEqual(['Unknown field ignored: body.a']);
    expect(warningTexts('299 - "Unknown field ignored: body.a", 299 - "say \\"hi\\""')).toEqual(['Unknown field ignored: body.a', 'say "hi"']);
    expect(warningTexts('something else')).toEqual(['something else']);
  });

  it('the typed client reports each Warning of an answer', async () => {
    const t = await inProcessApp();
    try {
      const fx = await workspaceFixtures(t.api);
      const seen: WarningEvent[] = [];
      const client = new ApiClient({
        baseUrl: '',
        apiKey: t.apiKey,
        fetch: ((url: string, init: RequestInit) => t.app.request(url, init)) as typeof fetch,
        onWarning: (event) => seen.push(event),
      });
      const body = { ...dockerBody(uniqueName(), fx.listenerId), tracked_packages: ['x'], source_config: { listener_id: fx.listenerId, extra: 1 } };
      const created = await client.createDeployment(body as never);
      expect(created.source).toBe('external_docker');
      expect(seen.map((event) => event.text).sort()).toEqual([
        'Unknown field ignored: body.source_config.extra',
        'Unknown field ignored: body.tracked_packages',
      ]);
      expect(seen[0]!.what).toBe(`POST deployment ${body.name}`);
      seen.length = 0;
      await client.getDeployment(created.id);
      expect(seen).toEqual([]);
    } finally {
      t.close();
    }
  });

  describe('CLI and Action, against the server in a child process', () => {
    let server: ServerProcess;
    let proxy: Awaited<ReturnType<typeof startFieldAddingProxy>>;
    let listenerId: string;
    beforeAll(async () => {
      server = await startServerProcess({ SANDBOX_STAGE_MS: '20' });
      proxy = await startFieldAddingProxy(server.url);
      listenerId = (await workspaceFixtures(apiClient(server.url, server.apiKey))).listenerId;
    });
    afterAll(async () => {
      await proxy?.close();
      await server?.kill();
    });

    it('the CLI prints every Warning on stderr', async () => {
      const stderr: string[] = [];
      const name = uniqueName('cli');
      const code = await main(
        [
          'deploy',
          '--api-url',
          proxy.url,
          '--api-key',
          server.apiKey,
          '--name',
          name,
          '--image-uri',
          'registry.example.com/a:1',
          '--listener-id',
          listenerId,
          '--no-wait',
        ],
        {},
        { stdout: () => {}, stderr: (text) => stderr.push(text) },
      );
      expect(code, stderr.join('\n')).toBe(0);
      expect(stderr).toContain(`warning: POST deployment ${name}: Unknown field ignored: body.tracked_packages`);
    });

    it('the Action turns every Warning into a workflow warning', async () => {
      const run = await runAction({
        'api-url': proxy.url,
        'api-key': server.apiKey,
        name: uniqueName('action'),
        'image-uri': 'registry.example.com/a:1',
        'listener-id': listenerId,
        wait: 'false',
      });
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(/::warning::POST deployment .*: Unknown field ignored: body\.tracked_packages/);
    });
  });
});
