import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { PREVIOUS_SECRET_GRACE_MS, WorkspaceWebhookSecrets } from '../../server/domain/webhooks/workspace-secrets.ts';
import { silentLogger } from '../../server/logger.ts';
import { openSqliteStore } from '../../server/store/sqlite.ts';
import { SqlWebhookSecretStore } from '../../server/store/webhook-secrets.ts';
import { type Api, apiClient } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { openRawSql } from '../helpers/raw-sql.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, pushPayload } from './github.ts';

describe("a workspace's repository-webhook secret", () => {
  let server: ServerProcess;
  let api: Api;
  let workspaceId: string;

  beforeAll(async () => {
    // No GITHUB_WEBHOOK_SECRET: a workspace's repository webhooks do not depend on the App's secret.
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50', RECONCILE_INTERVAL_MS: '0', PUBLIC_URL: 'https://cp.example.com/' });
    api = apiClient(server.url, server.apiKey);
    const created = await api.post('/v1/workspaces', { name: uniqueName('hooks') });
    workspaceId = created.body.id;
    api = apiClient(server.url, server.apiKey, { 'x-tenant-id': workspaceId });
  });
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  const path = () => `/v1/webhooks/github/workspaces/${workspaceId}`;
  const push = (secret: string) => deliver(server.url, 'push', pushPayload({ repo: 'acme/hooked', installationId: null }), { secret, path: path() });

  it('is shown once at creation, with the Payload URL to enter in GitHub, and never again', async () => {
    expect((await api.get('/v1/webhooks/github/secret')).status).toBe(404);
    expect((await push('no-secret-yet')).status).toBe(401);

    const created = await api.post('/v1/webhooks/github/secret', {});
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect(created.body).toEqual({
      secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      payload_url: `https://cp.example.com/v1/webhooks/github/workspaces/${workspaceId}`,
      created_at: expect.any(String),
      previous_secret_valid_until: null,
    });
    const { secret } = created.body;

    const status = await api.get('/v1/webhooks/github/secret');
    expect(status.status).toBe(200);
    expect(status.body).toEqual({ payload_url: created.body.payload_url, created_at: created.body.created_at, previous_secret_valid_until: null });
    expect(JSON.stringify(status.body)).not.toContain(secret);

    expect((await push(secret)).status).toBe(202);
    expect((await push('not-the-secret')).status).toBe(401);
  });

  it('is not in clear in the database file (nor its WAL), nor in the server log; it is stored encrypted', async () => {
    const { secret } = (await api.post('/v1/webhooks/github/secret', {})).body;
    expect((await push(secret)).status).toBe(202);
    // On SQLite the file, its WAL and shared memory; on PostgreSQL every stored row as text.
    const db = openRawSql(server.databaseUrl, { readonly: true });
    try {
      const bytes = await db.storedBytes();
      expect(bytes.length).toBeGreaterThan(0);
      expect(bytes.includes(Buffer.from(secret))).toBe(false);
      expect(bytes.includes(Buffer.from(secret.slice(0, 24)))).toBe(false);
      expect(server.output()).not.toContain(secret);
      // It is stored, though: the row exists and holds a SecretBox value.
      const row = (await db.prepare('SELECT secret_enc FROM webhook_workspace_secrets WHERE tenant_id = ?').get(workspaceId)) as { secret_enc: string };
      expect(row.secret_enc).toMatch(/^v1:/);
    } finally {
      await db.close();
    }
  });

  it('rotation: the previous secret stays valid (for a day) until the next rotation; the one before is refused', async () => {
    const first = (await api.post('/v1/webhooks/github/secret', {})).body.secret;
    const rotated = await api.post('/v1/webhooks/github/secret', {});
    expect(rotated.status).toBe(201);
    const second = rotated.body.secret;
    expect(second).not.toBe(first);
    const graceEnd = Date.parse(rotated.body.previous_secret_valid_until);
    expect(graceEnd - Date.parse(rotated.body.created_at)).toBe(PREVIOUS_SECRET_GRACE_MS);
    expect((await push(first)).status).toBe(202);
    expect((await push(second)).status).toBe(202);

    const third = (await api.post('/v1/webhooks/github/secret', {})).body.secret;
    expect((await push(first)).status).toBe(401);
    expect((await push(second)).status).toBe(202);
    expect((await push(third)).status).toBe(202);
  });

  it("belongs to its workspace: another workspace's key neither reads nor removes it", async () => {
    const secret = (await api.post('/v1/webhooks/github/secret', {})).body.secret;
    const other = apiClient(server.url, server.apiKey); // the default workspace
    expect((await other.get('/v1/webhooks/github/secret')).status).toBe(404);
    expect((await other.delete('/v1/webhooks/github/secret')).status).toBe(404);
    expect((await push(secret)).status).toBe(202);
  });

  it('removal refuses the workspace’s repository webhooks from then on; the secret routes need a key', async () => {
    const secret = (await api.post('/v1/webhooks/github/secret', {})).body.secret;
    expect((await fetch(`${server.url}/v1/webhooks/github/secret`, { method: 'POST' })).status).toBe(401);
    expect((await api.delete('/v1/webhooks/github/secret')).status).toBe(204);
    expect((await push(secret)).status).toBe(401);
    expect((await api.get('/v1/webhooks/github/secret')).status).toBe(404);
  });
});

describe('the grace period of a rotated-out secret (real SQLite file, a clock the test moves)', () => {
  it('ends after PREVIOUS_SECRET_GRACE_MS, even with the decrypted secrets cached', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-hook-secrets-'));
    const secretBox = new SecretBox(randomBytes(32));
    const store = openSqliteStore({ path: join(dir, 'db.sqlite'), secretBox, synchronous: 'NORMAL' });
    try {
      const boot = await store.bootstrap({ keyHash: 'h'.repeat(64), keyId: crypto.randomUUID(), now: new Date().toISOString() });
      let now = Date.parse('2026-11-23T08:00:00.000Z');
      const secrets = new WorkspaceWebhookSecrets({
        store: new SqlWebhookSecretStore(store.adapter),
        secretBox,
        clock: { now: () => new Date(now).toISOString() },
        log: silentLogger,
        payloadUrl: (id) => `http://x/${id}`,
      });
      const first = (await secrets.rotate(boot.workspaceId)).secret;
      const second = (await secrets.rotate(boot.workspaceId)).secret;
      expect(await secrets.accepted(boot.workspaceId)).toEqual([second, first]);
      now += PREVIOUS_SECRET_GRACE_MS - 1;
      expect(await secrets.accepted(boot.workspaceId)).toEqual([second, first]);
      now += 1;
      expect(await secrets.accepted(boot.workspaceId)).toEqual([second]);
      expect((await secrets.status(boot.workspaceId)).previous_secret_valid_until).toBeNull();
    } finally {
      store.close();
    }
  });
});
