import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp } from '../helpers/in-process.ts';
import { pushPayload, signature } from './github.ts';

describe('without GITHUB_WEBHOOK_SECRET', () => {
  let app: Awaited<ReturnType<typeof inProcessApp>>;
  beforeAll(async () => {
    app = await inProcessApp({ env: { RECONCILE_INTERVAL_MS: '0' } });
  });
  afterAll(() => app?.close());

  it('the webhook endpoint answers 503 with a detail that says what to set, and stores nothing', async () => {
    const body = JSON.stringify(pushPayload({ repo: 'acme/agent', installationId: 1 }));
    const response = await app.app.request('/v1/webhooks/github', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': 'd-1',
        'x-hub-signature-256': await signature('anything', body),
      },
      body,
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/GITHUB_WEBHOOK_SECRET/);
    const log = await app.api.get('/v1/webhooks/github/deliveries');
    expect(log.status).toBe(200);
    expect(log.body).toEqual({ resources: [], offset: 0 });
  });

  it('the OpenAPI document lists the webhook without an API key and the delivery log with one', async () => {
    const doc = (await (await app.app.request('/openapi.json')).json()) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    expect(doc.paths['/v1/webhooks/github']?.post).toBeDefined();
    expect(doc.paths['/v1/webhooks/github/deliveries']?.get).toBeDefined();
    expect(doc.paths['/v1/webhooks/github']!.post!.security).toEqual([]);
  });
});
