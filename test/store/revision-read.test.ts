import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqliteStore } from '../../server/store/sqlite.ts';
import type { RevisionRecord } from '../../server/store/types.ts';
import { BACKENDS, openTestBackend } from '../helpers/backends.ts';
import { githubBody } from '../helpers/fixtures.ts';

/**
 * `readRevision`, the GET revision fast lane's read: the same record as `getRevision` on both
 * backends, within the tenant only; on SQLite answered in the call itself (no promise), except while
 * a transaction is open, whose uncommitted rows a read from outside must not see.
 */

const NOW = '2026-01-01T00:00:00.000Z';

type Read = { error: unknown; revision: RevisionRecord | null | undefined; inCall: boolean };

/** Calls `readRevision` and tells whether it answered before returning. */
function read(backend: Awaited<ReturnType<typeof openTestBackend>>, tenantId: string, deploymentId: string, revisionId: string): Promise<Read> {
  return new Promise((resolve) => {
    let returned = false;
    backend.core.readRevision(tenantId, deploymentId, revisionId, (error, revision) => resolve({ error, revision, inCall: !returned }));
    returned = true;
  });
}

describe.each(BACKENDS)('readRevision: %s', (kind) => {
  let backend: Awaited<ReturnType<typeof openTestBackend>>;
  let ws: string;
  let deploymentId: string;
  let revisionId: string;

  beforeAll(async () => {
    backend = await openTestBackend(kind);
    ws = (await backend.core.bootstrap({ keyHash: 'hash-of-key', keyId: crypto.randomUUID(), now: NOW })).workspaceId;
    const body = githubBody('read-now', crypto.randomUUID());
    deploymentId = crypto.randomUUID();
    revisionId = crypto.randomUUID();
    await backend.core.createDeployment({
      deployment: {
        id: deploymentId,
        tenant_id: ws,
        name: body.name,
        source: 'github',
        source_config: { ...body.source_config, integration_id: null, deployment_type: 'dev', build_on_push: false },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        secrets: [],
        created_at: NOW,
        updated_at: NOW,
        status: 'AWAITING_DATABASE',
        latest_revision_id: revisionId,
        active_revision_id: null,
        image_version: null,
      } as never,
      revision: {
        id: revisionId,
        trigger: 'create',
        status: 'QUEUED',
        status_message: 'a "quoted" message, ünïcode \u2028 and a \\ backslash',
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' } as never,
        secrets: [],
        resource_spec: null,
      },
      tracingProject: { id: crypto.randomUUID(), name: body.name, tenant_id: ws, deployment_id: deploymentId, created_at: NOW },
    });
  });
  afterAll(async () => {
    await backend?.close();
  });

  it('answers the record getRevision answers', async () => {
    const answered = await read(backend, ws, deploymentId, revisionId);
    expect(answered.error).toBeNull();
    expect(answered.revision).toEqual(await backend.core.getRevision(ws, deploymentId, revisionId));
    expect(answered.revision).toMatchObject({ id: revisionId, deployment_id: deploymentId, status: 'QUEUED', version: 1 });
    // On SQLite in the call itself; on PostgreSQL (a round trip) later.
    expect(answered.inCall).toBe(kind === 'sqlite');
  });

  it('answers null for another tenant, another deployment, or no such revision', async () => {
    for (const [tenant, deployment, revision] of [
      [crypto.randomUUID(), deploymentId, revisionId],
      [ws, crypto.randomUUID(), revisionId],
      [ws, deploymentId, crypto.randomUUID()],
    ] as const) {
      const answered = await read(backend, tenant, deployment, revision);
      expect(answered).toMatchObject({ error: null, revision: null });
    }
  });

  it.runIf(kind === 'sqlite')('waits for an open transaction and then reads what it committed, never its uncommitted rows', async () => {
    const adapter = (backend.core as unknown as SqliteStore).adapter;
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    const transaction = adapter.tx(async (tx) => {
      await tx.run("UPDATE revisions SET status_message = 'inside the transaction', version = version + 1 WHERE id = ?", [revisionId]);
      await committed;
    });
    // Let the transaction take the connection and write.
    await new Promise((resolve) => setImmediate(resolve));
    const reading = read(backend, ws, deploymentId, revisionId);
    let settled = false;
    void reading.then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    commit();
    await transaction;
    const answered = await reading;
    expect(answered).toMatchObject({ error: null, inCall: false, revision: { status_message: 'inside the transaction', version: 2 } });
  });

  it.runIf(kind === 'sqlite')('refuses a statement that writes', () => {
    const adapter = (backend.core as unknown as SqliteStore).adapter;
    expect(() => adapter.rowNow("UPDATE revisions SET status_message = 'x' WHERE id = ? RETURNING id", [revisionId])).toThrow(/reads only/);
  });

  it.runIf(kind === 'sqlite')('refuses a writing statement every time, and reads a read-only one again after it is known', () => {
    const adapter = (backend.core as unknown as SqliteStore).adapter;
    const write = "UPDATE revisions SET status_message = 'y' WHERE id = ? RETURNING id";
    // Known read-only statements are remembered (`rowNow`'s cache); a writing one never joins them.
    for (let i = 0; i < 3; i += 1) expect(() => adapter.rowNow(write, [revisionId])).toThrow(/reads only/);
    const read = 'SELECT id, status_message FROM revisions WHERE id = ?';
    const first = adapter.rowNow<{ id: string; status_message: string | null }>(read, [revisionId]);
    const second = adapter.rowNow<{ id: string; status_message: string | null }>(read, [revisionId]);
    expect(first).toEqual(second);
    expect(first).toMatchObject({ id: revisionId });
    expect(adapter.raw.prepare('SELECT count(*) AS n FROM revisions WHERE id = ? AND status_message = ?').get(revisionId, 'y')).toEqual({ n: 0 });
  });
});
