import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { openRawSql } from '../helpers/raw-sql.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

describe('secrets and keys at rest and in logs', () => {
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.kill();
  });

  it('the database file and the log hold no secret value and no API key in clear text', async () => {
    server = await startServerProcess({ LOG_LEVEL: 'debug' });
    const api = apiClient(server.url, server.apiKey);
    const fx = await workspaceFixtures(api);
    const secretValue = `s3cr3t-${crypto.randomUUID()}`;
    const created = await api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId, { secrets: [{ name: 'TOKEN', value: secretValue }] }));
    expect(created.status).toBe(201);
    await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED']);
    const minted = await api.post('/v1/api-keys', { description: 'probe' });
    await server.kill('SIGKILL'); // no checkpoint: the WAL file holds the recent writes

    // On SQLite the file and its WAL; on PostgreSQL every stored row as text.
    const db = openRawSql(server.databaseUrl, { readonly: true });
    const bytes = await db.storedBytes();
    await db.close();
    expect(bytes.length).toBeGreaterThan(0);
    // The test must be able to see plain text in the file: the deployment name is stored as is.
    expect(bytes.includes(Buffer.from(created.body.name))).toBe(true);
    expect(bytes.includes(Buffer.from(secretValue))).toBe(false);
    expect(bytes.includes(Buffer.from(server.apiKey))).toBe(false);
    expect(bytes.includes(Buffer.from(minted.body.key))).toBe(false);
    expect(server.output()).not.toContain(secretValue);
    expect(server.output()).not.toContain(server.apiKey);
  });
});
