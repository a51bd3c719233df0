import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreBackend } from '../../server/store/backend.ts';
import { createdRevisionWork } from '../../server/store/rows.ts';
import type { DeploymentRecord, NewRevision } from '../../server/store/types.ts';
import type { Deployment, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import { BACKENDS, openTestBackend } from '../helpers/backends.ts';
import { rawSql } from '../helpers/raw-sql.ts';

/**
 * Every store-level behaviour, run against both backends on real databases (an SQLite file in
 * memory; a fresh database on the run's real PostgreSQL). Concurrency is real too: the calls are
 * issued together, and on PostgreSQL each runs on its own pooled connection.
 */

const NOW = '2026-01-01T00:00:00.000Z';
const at = (second: number) => new Date(Date.parse(NOW) + second * 1000).toISOString();

function revisionConfigOf(fields: Partial<SourceRevisionConfig> = {}): SourceRevisionConfig {
  return {
    repo_ref: 'main',
    graph_config_path: 'langgraph.json',
    langgraph_config_path: 'langgraph.json',
    image_uri: null,
    source_tarball_path: null,
    repo_commit_sha: null,
    ...fields,
  };
}

function deploymentOf(tenantId: string, fields: { id?: string; name?: string; listenerId?: string | null; buildOnPush?: boolean } = {}): Deployment {
  return {
    id: fields.id ?? crypto.randomUUID(),
    tenant_id: tenantId,
    name: fields.name ?? `d-${crypto.randomUUID().slice(0, 8)}`,
    source: 'github',
    source_config: {
      integration_id: null,
      repo_url: 'https://github.com/acme/agent',
      deployment_type: 'dev',
      build_on_push: fields.buildOnPush ?? true,
      custom_url: null,
      resource_spec: null,
      listener_id: fields.listenerId ?? null,
      listener_config: null,
      install_command: null,
      build_command: null,
    },
    source_revision_config: revisionConfigOf(),
    secrets: [{ name: 'API_TOKEN', value: 's3cret' }],
    created_at: NOW,
    updated_at: NOW,
    status: 'AWAITING_DATABASE',
    latest_revision_id: null,
    active_revision_id: null,
    image_version: null,
  } as Deployment;
}

function revisionOf(fields: Partial<NewRevision> = {}): NewRevision {
  return {
    id: crypto.randomUUID(),
    trigger: 'patch',
    source_revision_config: revisionConfigOf(),
    secrets: [{ name: 'API_TOKEN', value: 's3cret' }],
    resource_spec: null,
    ...fields,
  };
}

async function newDeployment(
  backend: StoreBackend,
  tenantId: string,
  options: { revision?: NewRevision | null; listenerId?: string | null; id?: string; name?: string } = {},
): Promise<DeploymentRecord> {
  const deployment = deploymentOf(tenantId, { listenerId: options.listenerId, id: options.id, name: options.name });
  const revision = options.revision === undefined ? null : options.revision;
  const { deployment: created } = await backend.core.createDeployment({
    deployment: { ...deployment, latest_revision_id: revision?.id ?? null },
    revision,
    tracingProject: { id: crypto.randomUUID(), name: deployment.name, tenant_id: tenantId, deployment_id: deployment.id, created_at: NOW },
  });
  return created;
}

describe.each(BACKENDS)('store conformance: %s', (kind) => {
  let backend: Awaited<ReturnType<typeof openTestBackend>>;
  let org: string;
  let ws: string;

  beforeAll(async () => {
    backend = await openTestBackend(kind);
    const boot = await backend.core.bootstrap({ keyHash: 'hash-of-bootstrap-key', keyId: crypto.randomUUID(), now: NOW });
    org = boot.organizationId;
    ws = boot.workspaceId;
  });
  afterAll(async () => {
    await backend?.close();
  });

  it('bootstraps once: a second bootstrap finds the same organization and workspace, and a key', async () => {
    const again = await backend.core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: NOW });
    expect(again).toEqual({ organizationId: org, workspaceId: ws, wasEmpty: false });
    const key = await backend.core.findApiKeyByHash('hash-of-bootstrap-key');
    expect(key).toMatchObject({ organization_id: org, revoked: false });
    expect(await backend.core.revokeApiKey(org, key!.id, NOW)).toBe(true);
    expect((await backend.core.findApiKeyByHash('hash-of-bootstrap-key'))!.revoked).toBe(true);
    // Bootstrapping with the key again un-revokes it.
    await backend.core.bootstrap({ keyHash: 'hash-of-bootstrap-key', keyId: crypto.randomUUID(), now: NOW });
    expect((await backend.core.findApiKeyByHash('hash-of-bootstrap-key'))!.revoked).toBe(false);
    // Bootstrapping with a key that is there and not revoked writes nothing (every start does it, and
    // a commit waits for the disk): PostgreSQL keeps the row's version, SQLite counts no change.
    const sql = rawSql(backend.url, backend.core);
    const written =
      kind === 'postgres' ? "SELECT xmin::text AS version FROM api_keys WHERE key_hash = 'hash-of-bootstrap-key'" : 'SELECT total_changes() AS version';
    const before = await sql.get<{ version: unknown }>(written);
    await backend.core.bootstrap({ keyHash: 'hash-of-bootstrap-key', keyId: crypto.randomUUID(), now: NOW });
    expect(await sql.get<{ version: unknown }>(written)).toEqual(before);
    await sql.close();
    // The default workspace got its sandbox listener, which is its default listener.
    const listeners = await backend.core.listListeners(ws, 10, 0);
    expect(listeners.resources.map((l) => l.compute_type)).toEqual(['sandbox']);
    expect((await backend.core.getWorkspace(ws))!.default_listener_id).toBe(listeners.resources[0]!.id);
  });

  it('deployment and revision lifecycle: create, read (secrets decrypted, not in revisions), list, transition to DEPLOYED, remove', async () => {
    const first = revisionOf({ trigger: 'create', status: 'QUEUED' });
    const created = await newDeployment(backend, ws, { revision: first });
    const read = await backend.core.getDeployment(ws, created.id);
    expect(read).toEqual({ ...created, delete_tracing_project: false });
    expect(await backend.core.getDeployment(crypto.randomUUID(), created.id)).toBeNull();
    const revision = await backend.core.getRevision(ws, created.id, first.id);
    expect(revision).toMatchObject({ id: first.id, status: 'QUEUED', trigger: 'create', version: 1 });
    expect(JSON.stringify(revision)).not.toContain('s3cret');
    expect((await backend.core.getRevisionWork(first.id))!.secrets).toEqual([{ name: 'API_TOKEN', value: 's3cret' }]);

    const moved = await backend.core.transitionRevision(
      { revisionId: first.id, from: ['QUEUED'], to: 'DEPLOYED', logs: [{ type: 'build', level: 'info', message: 'built' }] },
      at(1),
    );
    expect(moved).toMatchObject({ status: 'DEPLOYED', version: 2 });
    // From a status it is no longer in: nothing happens.
    expect(await backend.core.transitionRevision({ revisionId: first.id, from: ['QUEUED'], to: 'BUILD_FAILED' }, at(2))).toBeNull();
    const deployed = (await backend.core.getDeploymentById(created.id))!;
    expect(deployed).toMatchObject({ status: 'READY', active_revision_id: first.id });
    expect((await backend.core.readLogs(first.id, 'build', 0, 10)).logs).toEqual([{ timestamp: at(1), level: 'info', message: 'built' }]);

    const list = await backend.core.listDeployments(ws, { limit: 50, offset: 0, name_contains: created.name.slice(2).toUpperCase() } as never);
    expect(list.resources.map((d) => d.id)).toEqual([created.id]);

    const marked = await backend.core.markDeploymentDeleting(ws, created.id, true, at(3));
    expect(marked).toMatchObject({ marked: true, deployment: { status: 'AWAITING_DELETE', delete_tracing_project: true } });
    expect((await backend.core.markDeploymentDeleting(ws, created.id, false, at(4)))!.marked).toBe(false);
    await backend.core.removeDeployment(created.id);
    expect(await backend.core.getDeploymentById(created.id)).toBeNull();
    expect(await backend.core.getRevisionById(first.id)).toBeNull();
    expect((await backend.core.listTracingProjects(ws, created.name, 10, 0)).resources).toEqual([]);
  });

  it('rejects a second deployment of the same name in a workspace with a Conflict', async () => {
    const d = await newDeployment(backend, ws);
    await expect(newDeployment(backend, ws, { name: d.name })).rejects.toMatchObject({ name: 'Conflict' });
  });

  it('PATCH is one read-modify-write: 20 concurrent updates that each add a secret all survive', async () => {
    const d = await newDeployment(backend, ws);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        backend.core.updateDeployment(
          ws,
          d.id,
          (current) => ({
            source_config: current.source_config,
            source_revision_config: current.source_revision_config,
            secrets: [...current.secrets, { name: `S${i}`, value: String(i) }],
            revision: revisionOf(),
          }),
          at(i),
        ),
      ),
    );
    // Each answer is the deployment as that update left it: its own revision is the latest one.
    for (const answer of answers) expect(answer.deployment.latest_revision_id).toBe(answer.revision!.id);
    expect(new Set(answers.map((a) => a.revision!.id)).size).toBe(20);
    const after = (await backend.core.getDeploymentById(d.id))!;
    expect(after.secrets).toHaveLength(21);
    expect(new Set(after.secrets.map((s) => s.name)).size).toBe(21);
    const revisions = await backend.core.listRevisions(ws, d.id, { limit: 100, offset: 0 } as never);
    expect(revisions.resources).toHaveLength(20);
    expect(after.latest_revision_id).toBe(revisions.resources[0]!.id);
  });

  it('a plan that throws changes nothing', async () => {
    const d = await newDeployment(backend, ws);
    await expect(
      backend.core.updateDeployment(
        ws,
        d.id,
        () => {
          throw new Error('refused by the plan');
        },
        NOW,
      ),
    ).rejects.toThrow('refused by the plan');
    await expect(backend.core.updateDeployment(crypto.randomUUID(), d.id, (c) => ({ ...c, revision: null }), NOW)).rejects.toMatchObject({ name: 'NotFound' });
    expect(await backend.core.getDeploymentById(d.id)).toEqual({ ...d, delete_tracing_project: false });
  });

  it('startNextRevision starts one revision at a time, the newest queued one, and skips the older ones as superseded', async () => {
    const d = await newDeployment(backend, ws);
    const queued: string[] = [];
    for (let i = 0; i < 5; i++) {
      const revision = revisionOf();
      queued.push(revision.id);
      await backend.core.updateDeployment(
        ws,
        d.id,
        (c) => ({ source_config: c.source_config, source_revision_config: c.source_revision_config, secrets: c.secrets, revision }),
        at(i),
      );
    }
    const results = await Promise.all(Array.from({ length: 10 }, () => backend.core.startNextRevision(d.id, () => 'AWAITING_BUILD', at(10))));
    const started = results.filter((r) => r.started !== null);
    expect(started).toHaveLength(1);
    expect(started[0]!.started!.id).toBe(queued[4]);
    expect(started[0]!.skipped.sort()).toEqual(queued.slice(0, 4).sort());
    for (const id of queued.slice(0, 4)) {
      const skipped = (await backend.core.getRevisionById(id))!;
      expect(skipped.status).toBe('SKIPPED');
      expect(skipped.status_message).toBe(`Superseded by revision ${queued[4]}, which was created later.`);
    }
    // While it is in progress, a newly queued revision waits.
    const next = revisionOf();
    await backend.core.updateDeployment(
      ws,
      d.id,
      (c) => ({ source_config: c.source_config, source_revision_config: c.source_revision_config, secrets: c.secrets, revision: next }),
      at(11),
    );
    expect(await backend.core.startNextRevision(d.id, () => 'AWAITING_BUILD', at(12))).toEqual({ started: null, skipped: [] });
    await backend.core.transitionRevision({ revisionId: queued[4]!, from: ['AWAITING_BUILD'], to: 'BUILD_FAILED' }, at(13));
    expect((await backend.core.startNextRevision(d.id, () => 'AWAITING_BUILD', at(14))).started!.id).toBe(next.id);
    expect((await backend.core.listUnfinishedRevisions()).map((r) => r.id)).toContain(next.id);
  });

  it('createPushRevision makes one revision per pushed commit under concurrency, and again only after it failed', async () => {
    const d = await newDeployment(backend, ws);
    const sha = 'a'.repeat(40);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => backend.core.createPushRevision({ deploymentId: d.id, revisionId: crypto.randomUUID(), commitSha: sha, now: at(1) })),
    );
    const created = results.filter((r) => r.outcome === 'created');
    expect(created).toHaveLength(1);
    const revision = (created[0] as { revision: { id: string; source_revision_config: SourceRevisionConfig } }).revision;
    expect(revision.source_revision_config.repo_commit_sha).toBe(sha);
    for (const r of results.filter((x) => x.outcome !== 'created')) expect(r).toEqual({ outcome: 'exists', revisionId: revision.id, status: 'QUEUED' });
    expect((await backend.core.getDeploymentById(d.id))!.latest_revision_id).toBe(revision.id);
    // A failed build of the commit may be retried by the next delivery.
    await backend.core.transitionRevision({ revisionId: revision.id, from: ['QUEUED'], to: 'CREATE_FAILED' }, at(2));
    expect((await backend.core.createPushRevision({ deploymentId: d.id, revisionId: crypto.randomUUID(), commitSha: sha, now: at(3) })).outcome).toBe(
      'created',
    );
    await backend.core.markDeploymentDeleting(ws, d.id, false, at(4));
    expect(await backend.core.createPushRevision({ deploymentId: d.id, revisionId: crypto.randomUUID(), commitSha: 'b'.repeat(40), now: at(5) })).toEqual({
      outcome: 'not_buildable',
      reason: 'the deployment is being deleted',
    });
  });

  it('createPushRevision records the branch head it is given in the same transaction, whatever it builds, and not when that transaction fails', async () => {
    const d = await newDeployment(backend, ws);
    const head = (sha: string, second: number) => ({
      deploymentId: d.id,
      revisionId: crypto.randomUUID(),
      commitSha: sha,
      now: at(second),
      headSeen: { repoRef: 'main' },
    });
    const built = await backend.core.createPushRevision(head('1'.repeat(40), 1));
    expect(built.outcome).toBe('created');
    expect(await backend.webhooks.getReconcileHead(d.id)).toEqual({ repo_ref: 'main', sha: '1'.repeat(40), seen_at: at(1) });
    // A commit built already: no revision, the head still recorded.
    await backend.webhooks.setReconcileHead(d.id, 'main', '0'.repeat(40), at(2));
    expect((await backend.core.createPushRevision(head('1'.repeat(40), 3))).outcome).toBe('exists');
    expect(await backend.webhooks.getReconcileHead(d.id)).toEqual({ repo_ref: 'main', sha: '1'.repeat(40), seen_at: at(3) });
    // The revision's insert fails (its id is taken): the head rolls back with it.
    const taken = (built as { revision: { id: string } }).revision.id;
    await expect(backend.core.createPushRevision({ ...head('2'.repeat(40), 4), revisionId: taken })).rejects.toThrow();
    expect((await backend.webhooks.getReconcileHead(d.id))!.sha).toBe('1'.repeat(40));
    // Being deleted: nothing built, the head recorded; a deployment that is gone: nothing at all.
    await backend.core.markDeploymentDeleting(ws, d.id, false, at(5));
    expect((await backend.core.createPushRevision(head('3'.repeat(40), 6))).outcome).toBe('not_buildable');
    expect((await backend.webhooks.getReconcileHead(d.id))!.sha).toBe('3'.repeat(40));
    const gone = crypto.randomUUID();
    expect(await backend.core.createPushRevision({ ...head('4'.repeat(40), 7), deploymentId: gone })).toEqual({
      outcome: 'not_buildable',
      reason: 'the deployment no longer exists',
    });
    expect(await backend.webhooks.getReconcileHead(gone)).toBeNull();
  });

  it('webhook intake is idempotent: one delivery id stored once however often it arrives at once, seen only by its workspace', async () => {
    const deliveryId = `delivery-${crypto.randomUUID()}`;
    const delivery = {
      delivery_id: deliveryId,
      event: 'push',
      action: null,
      installation_id: null,
      repository: 'acme/agent',
      ref: 'refs/heads/main',
      after_sha: 'c'.repeat(40),
      workspace_id: ws,
      payload: '{"ref":"refs/heads/main"}',
      received_at: at(1),
    };
    const inserted = await Promise.all(Array.from({ length: 6 }, () => backend.webhooks.insertDelivery(delivery)));
    expect(inserted.filter(Boolean)).toHaveLength(1);
    const pending = await backend.webhooks.listPending(at(2), 10);
    expect(pending.filter((p) => p.delivery_id === deliveryId)).toEqual([
      { delivery_id: deliveryId, event: 'push', workspace_id: ws, payload: delivery.payload, attempts: 0, received_at: at(1) },
    ]);
    await backend.webhooks.completeDelivery(deliveryId, {
      outcome: 'push',
      reason: null,
      results: [
        {
          tenant_id: ws,
          deployment_id: null,
          deployment_name: null,
          integration_id: null,
          result: 'ignored',
          revision_id: null,
          reason: 'no deployment',
        } as never,
      ],
      now: at(3),
    });
    const listed = await backend.webhooks.listForTenant(ws, { limit: 10, offset: 0 } as never);
    expect(listed.resources.find((r) => r.delivery_id === deliveryId)).toMatchObject({
      status: 'processed',
      outcome: 'push',
      processed_at: at(3),
      results: [{ result: 'ignored', reason: 'no deployment' }],
    });
    const other = crypto.randomUUID();
    await backend.core.createWorkspace({ id: other, organization_id: org, name: `other-${other}`, created_at: NOW, default_listener_id: null });
    expect((await backend.webhooks.listForTenant(other, { limit: 10, offset: 0 } as never)).resources).toEqual([]);
    expect((await backend.webhooks.listPending(at(4), 10)).some((p) => p.delivery_id === deliveryId)).toBe(false);
  });

  it('OAuth tokens belong to the workspace whose flow obtained them', async () => {
    const wsB = crypto.randomUUID();
    await backend.core.createWorkspace({ id: wsB, organization_id: org, name: `b-${wsB}`, created_at: NOW, default_listener_id: null });
    const providerRef = crypto.randomUUID();
    await backend.oauth.createProvider({
      id: providerRef,
      organization_id: org,
      provider_id: `p-${providerRef}`,
      name: 'P',
      client_id: 'c',
      client_secret_sealed: 'sealed',
      auth_url: 'https://p.example/auth',
      token_url: 'https://p.example/token',
      uses_pkce: true,
      code_challenge_method: 'S256',
      token_endpoint_auth_method: 'client_secret_post',
      provider_type: null,
      created_at: NOW,
      updated_at: NOW,
    } as never);
    await expect(
      backend.oauth.createProvider({
        id: crypto.randomUUID(),
        organization_id: org,
        provider_id: `p-${providerRef}`,
        name: 'P',
        client_id: 'c',
        client_secret_sealed: null,
        auth_url: 'https://p.example/auth',
        token_url: 'https://p.example/token',
        uses_pkce: true,
        code_challenge_method: 'S256',
        token_endpoint_auth_method: 'none',
        provider_type: null,
        created_at: NOW,
        updated_at: NOW,
      } as never),
    ).rejects.toMatchObject({ name: 'Conflict' });
    const tokenIds: Record<string, string> = {};
    for (const workspace of [ws, wsB]) {
      const flowId = crypto.randomUUID();
      await backend.oauth.createFlow(
        {
          id: flowId,
          organization_id: org,
          workspace_id: workspace,
          provider_ref: providerRef,
          state_hash: `state-${flowId}`,
          user_id: 'u1',
          agent_id: '',
          scopes: ['read'],
          redirect_uri: 'https://cb',
          code_verifier_sealed: 'v',
          is_default: true,
          status: 'pending',
          error: null,
          error_description_sealed: null,
          token_ref: null,
          created_at: NOW,
          expires_at: at(600),
          updated_at: NOW,
        } as never,
        at(-86400),
      );
      const claims = await Promise.all([backend.oauth.claimFlow(flowId, at(1)), backend.oauth.claimFlow(flowId, at(1))]);
      expect(claims.filter(Boolean)).toHaveLength(1);
      const stored = await backend.oauth.completeFlow(
        flowId,
        {
          id: crypto.randomUUID(),
          organization_id: org,
          workspace_id: workspace,
          provider_ref: providerRef,
          user_id: 'u1',
          agent_id: '',
          scopes: ['read'],
          access_token_sealed: `token-of-${workspace}`,
          refresh_token_sealed: null,
          token_type: 'bearer',
          expires_at: null,
          is_default: true,
          provider_account_label: null,
          created_at: at(2),
          updated_at: at(2),
        },
        at(2),
      );
      tokenIds[workspace] = stored.id;
      expect(await backend.oauth.findFlowByState(`state-${flowId}`)).toMatchObject({ status: 'completed', token_ref: stored.id, code_verifier_sealed: null });
    }
    expect((await backend.oauth.getToken(providerRef, ws, 'u1', ''))!.access_token_sealed).toBe(`token-of-${ws}`);
    expect((await backend.oauth.getToken(providerRef, wsB, 'u1', ''))!.access_token_sealed).toBe(`token-of-${wsB}`);
    expect((await backend.oauth.listTokens(wsB, null)).map((t) => t.id)).toEqual([tokenIds[wsB]]);
    expect(await backend.oauth.updateTokenMetadata(tokenIds[ws]!, wsB, { is_default: false, provider_account_label: 'x', updated_at: at(3) })).toBe(false);
    expect(await backend.oauth.deleteTokens(wsB, providerRef)).toBe(1);
    expect(await backend.oauth.getToken(providerRef, ws, 'u1', '')).not.toBeNull();
  });

  it('uploads stream in chunks: one claim at a time, chunks read back byte for byte, a used URL stays used', async () => {
    const d = await newDeployment(backend, ws);
    const id = crypto.randomUUID();
    await backend.uploads.createUpload({ id, deployment_id: d.id, tenant_id: ws, object_path: `uploads/${id}.tar.gz`, expires_at: at(600), created_at: NOW });
    const lease = { owner: 'process-1', now: NOW, until: at(60) };
    const claims = await Promise.all([backend.uploads.claimUpload(id, lease), backend.uploads.claimUpload(id, lease), backend.uploads.claimUpload(id, lease)]);
    expect(claims.sort()).toEqual(['claimed', 'in_use', 'in_use']);
    const chunks = [Buffer.from([0, 1, 2, 255, 254]), Buffer.alloc(1 << 20, 7)];
    for (const [seq, chunk] of chunks.entries()) await backend.uploads.writeChunk(id, seq, chunk);
    expect(await backend.uploads.completeUpload(id, chunks[0]!.length + chunks[1]!.length, at(1), 'process-1')).toBe(true);
    expect(await backend.uploads.readChunk(id, 0)).toEqual(chunks[0]);
    // Compared as bytes (a deep equality of a megabyte element by element would take seconds).
    expect((await backend.uploads.readChunk(id, 1))!.equals(chunks[1]!)).toBe(true);
    expect(await backend.uploads.readChunk(id, 2)).toBeNull();
    expect(await backend.uploads.claimUpload(id, lease)).toBe('used');
    expect(await backend.uploads.findCompleteUpload(d.id, `uploads/${id}.tar.gz`)).toMatchObject({ id, state: 'complete', size: 5 + (1 << 20) });
    // An interrupted upload goes back to issued, its chunks dropped.
    const other = crypto.randomUUID();
    await backend.uploads.createUpload({
      id: other,
      deployment_id: d.id,
      tenant_id: ws,
      object_path: `uploads/${other}.tar.gz`,
      expires_at: at(600),
      created_at: NOW,
    });
    await backend.uploads.claimUpload(other, lease);
    await backend.uploads.writeChunk(other, 0, Buffer.from('partial'));
    expect(await backend.uploads.releaseInterruptedUploads(at(61))).toBeGreaterThanOrEqual(1);
    expect(await backend.uploads.readChunk(other, 0)).toBeNull();
    expect((await backend.uploads.getUpload(other))!.state).toBe('issued');
  });

  it("silent agent listeners: their READY deployments become UNKNOWN (their own and their workspaces' by default), and READY when heard again", async () => {
    const workspace = crypto.randomUUID();
    await backend.core.createWorkspace({ id: workspace, organization_id: org, name: `silent-${workspace.slice(0, 8)}`, created_at: NOW } as never);
    const newListener = async (computeType: 'local' | 'k8s') => {
      const id = crypto.randomUUID();
      await backend.core.createListener({
        id,
        tenant_id: workspace,
        version: null,
        compute_type: computeType,
        compute_id: `${computeType}-${id}`,
        compute_config: { k8s_namespaces: [] },
        created_at: NOW,
        updated_at: NOW,
      } as never);
      return id;
    };
    const silent = await newListener('k8s');
    const lively = await newListener('local');
    const neverHeard = await newListener('local');
    expect(await backend.agents.setDefaultListener(workspace, silent)).toBe(true);
    /** A deployment whose revision was deployed: READY, with a live revision. */
    const ready = async (listenerId: string | null) => {
      const revision = revisionOf({ trigger: 'create', status: 'DEPLOYING' });
      const deployment = await newDeployment(backend, workspace, { revision, listenerId });
      await backend.core.transitionRevision({ revisionId: revision.id, from: ['DEPLOYING'], to: 'DEPLOYED' }, NOW);
      expect(await backend.core.getDeploymentById(deployment.id)).toMatchObject({ status: 'READY', active_revision_id: revision.id });
      return deployment;
    };
    const own = await ready(silent);
    const byDefault = await ready(null);
    const onLively = await ready(lively);
    const onNeverHeard = await ready(neverHeard);
    await backend.agents.recordHeartbeat({ listenerId: silent, now: at(0) });
    await backend.agents.recordHeartbeat({ listenerId: lively, now: at(100) });

    const moved = await backend.agents.markSilent(at(50), at(101));
    expect(moved).toEqual(expect.arrayContaining([own.id, byDefault.id]));
    expect(moved).not.toContain(onLively.id);
    expect(moved).not.toContain(onNeverHeard.id);
    const status = async (id: string) => (await backend.core.getDeploymentById(id))!.status;
    expect([await status(own.id), await status(byDefault.id), await status(onLively.id), await status(onNeverHeard.id)]).toEqual([
      'UNKNOWN',
      'UNKNOWN',
      'READY',
      'READY',
    ]);
    // Marked once: the next sweep finds the listener silent still, and nothing left to mark.
    expect(await backend.agents.markSilent(at(50), at(102))).not.toEqual(expect.arrayContaining([own.id]));

    expect((await backend.agents.recordHeartbeat({ listenerId: silent, now: at(103) })).sort()).toEqual([own.id, byDefault.id].sort());
    expect([await status(own.id), await status(byDefault.id)]).toEqual(['READY', 'READY']);
  });

  it("servingComputeType: the named listener of the workspace, else the workspace's default; never another workspace's", async () => {
    const other = crypto.randomUUID();
    await backend.core.createWorkspace({ id: other, organization_id: org, name: `serving-${other.slice(0, 8)}`, created_at: NOW, default_listener_id: null });
    const k8s = crypto.randomUUID();
    await backend.core.createListener({
      id: k8s,
      tenant_id: other,
      version: null,
      compute_type: 'k8s',
      compute_id: `k8s-${k8s}`,
      compute_config: { k8s_namespaces: [] },
      created_at: NOW,
      updated_at: NOW,
    } as never);
    // A new workspace's default is its sandbox listener.
    expect(await backend.core.servingComputeType(other, null)).toBe('sandbox');
    expect(await backend.core.servingComputeType(other, k8s)).toBe('k8s');
    const sql = rawSql(backend.url, backend.core);
    try {
      await sql.run('UPDATE workspaces SET default_listener_id = ? WHERE id = ?', k8s, other);
      expect(await backend.core.servingComputeType(other, null)).toBe('k8s');
      // No default at all: nothing serves but the built-in sandbox (null).
      await sql.run('UPDATE workspaces SET default_listener_id = NULL WHERE id = ?', other);
      expect(await backend.core.servingComputeType(other, null)).toBeNull();
    } finally {
      await sql.close();
    }
    // Another workspace's listener, or one that does not exist, is none of this workspace's.
    expect(await backend.core.servingComputeType(ws, k8s)).toBeNull();
    expect(await backend.core.servingComputeType(ws, crypto.randomUUID())).toBeNull();
    expect(await backend.core.servingComputeType(ws, null)).toBe('sandbox');
  });

  it('agent claims: one agent holds a piece of work until its lease lapses, then another may take it', async () => {
    const listenerId = crypto.randomUUID();
    await backend.core.createListener({
      id: listenerId,
      tenant_id: ws,
      version: null,
      compute_type: 'local',
      compute_id: `local-${listenerId}`,
      compute_config: { k8s_namespaces: [] },
      created_at: NOW,
      updated_at: NOW,
    } as never);
    const revision = revisionOf({ trigger: 'create', status: 'AWAITING_BUILD' });
    const d = await newDeployment(backend, ws, { revision, listenerId });
    expect((await backend.agents.servingListener(d.id))!.id).toBe(listenerId);
    const claims = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        backend.agents.claimNext({ listenerId, agentId: `agent-${i}`, claimId: crypto.randomUUID(), now: at(1), leaseUntil: at(31) }),
      ),
    );
    const held = claims.filter((c) => c !== null);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ work_key: `revision:${revision.id}`, kind: 'revision', revision_id: revision.id, deployment_id: d.id });
    expect(await backend.agents.getClaim(listenerId, held[0]!.claim_id)).toMatchObject({ agent_id: held[0]!.agent_id });
    expect(await backend.agents.renewClaim(held[0]!.claim_id, at(61))).toBe(true);
    expect(await backend.agents.claimNext({ listenerId, agentId: 'late', claimId: crypto.randomUUID(), now: at(60), leaseUntil: at(90) })).toBeNull();
    const retaken = await backend.agents.claimNext({ listenerId, agentId: 'late', claimId: crypto.randomUUID(), now: at(62), leaseUntil: at(92) });
    expect(retaken).toMatchObject({ work_key: `revision:${revision.id}`, agent_id: 'late' });
    expect(await backend.agents.getClaim(listenerId, held[0]!.claim_id)).toBeNull();
    await backend.agents.setRevisionCommit(revision.id, 'd'.repeat(40), at(63));
    expect((await backend.core.getRevisionById(revision.id))!.source_revision_config.repo_commit_sha).toBe('d'.repeat(40));
    expect((await backend.core.getDeploymentById(d.id))!.source_revision_config.repo_commit_sha).toBe('d'.repeat(40));
  });

  it('a first revision reads back as `createdRevisionWork` says: what the pipeline hands on without reading it', async () => {
    const spec = { min_scale: 1, max_scale: 2, cpu: 1, memory_mb: 512 } as NonNullable<NewRevision['resource_spec']>;
    const firsts = [
      revisionOf({ trigger: 'create', status: 'BUILDING', resource_spec: spec, logs: [{ type: 'build', level: 'info', message: 'first step' }] }),
      revisionOf({
        trigger: 'create',
        status: 'AWAITING_DEPLOY',
        secrets: [],
        source_revision_config: { ...revisionConfigOf(), image_uri: 'docker.io/acme/agent:1' },
      }),
      revisionOf({ trigger: 'create' }),
    ];
    for (const revision of firsts) {
      const deployment = { ...deploymentOf(ws), latest_revision_id: revision.id };
      await backend.core.createDeployment({
        deployment,
        revision,
        tracingProject: { id: crypto.randomUUID(), name: deployment.name, tenant_id: ws, deployment_id: deployment.id, created_at: NOW },
      });
      expect(createdRevisionWork(deployment, revision)).toEqual(await backend.core.getRevisionWork(revision.id));
    }
  });

  it('a teardown reported done is stored on the deployment, its claim ended, and it is offered to no agent again', async () => {
    const listenerId = crypto.randomUUID();
    await backend.core.createListener({
      id: listenerId,
      tenant_id: ws,
      version: null,
      compute_type: 'local',
      compute_id: `local-${listenerId}`,
      compute_config: { k8s_namespaces: [] },
      created_at: NOW,
      updated_at: NOW,
    } as never);
    const d = await newDeployment(backend, ws, { revision: revisionOf({ trigger: 'create', status: 'DEPLOYED' }), listenerId });
    // Not being deleted: a report for it is not stored.
    await backend.agents.recordTeardownDone(d.id, at(1), crypto.randomUUID());
    expect(await backend.agents.teardownReported(d.id)).toBe(false);
    expect((await backend.core.markDeploymentDeleting(ws, d.id, false, at(2)))!.marked).toBe(true);
    const claim = await backend.agents.claimNext({ listenerId, agentId: 'a1', claimId: crypto.randomUUID(), now: at(3), leaseUntil: at(33) });
    expect(claim).toMatchObject({ kind: 'teardown', deployment_id: d.id });
    expect(await backend.agents.teardownReported(d.id)).toBe(false);
    await backend.agents.recordTeardownDone(d.id, at(4), claim!.claim_id);
    expect(await backend.agents.teardownReported(d.id)).toBe(true);
    expect(await backend.agents.getClaim(listenerId, claim!.claim_id)).toBeNull();
    // Its claim is gone, yet no agent is given the teardown again, now or once any lease has passed.
    expect(await backend.agents.claimNext({ listenerId, agentId: 'a2', claimId: crypto.randomUUID(), now: at(5), leaseUntil: at(35) })).toBeNull();
    expect(await backend.agents.claimNext({ listenerId, agentId: 'a2', claimId: crypto.randomUUID(), now: at(100), leaseUntil: at(130) })).toBeNull();
  });
});

describe('both backends answer byte-identical records', () => {
  it('the same writes read back as the same JSON text on SQLite and PostgreSQL', async () => {
    const [sqlite, postgres] = await Promise.all(BACKENDS.map((kind) => openTestBackend(kind)));
    try {
      const texts: string[] = [];
      const ids = { deployment: crypto.randomUUID(), revision: crypto.randomUUID(), key: crypto.randomUUID() };
      for (const backend of [sqlite!, postgres!]) {
        const boot = await backend.core.bootstrap({ keyHash: 'k', keyId: ids.key, now: NOW });
        const d = deploymentOf(boot.workspaceId, { id: ids.deployment, name: 'same' });
        // The tenant differs (generated by bootstrap); everything else is the same input.
        await backend.core.createDeployment({
          deployment: { ...d, latest_revision_id: ids.revision },
          revision: revisionOf({ id: ids.revision, trigger: 'create' }),
          tracingProject: { id: ids.deployment, name: 'same', tenant_id: boot.workspaceId, deployment_id: ids.deployment, created_at: NOW },
        });
        await backend.core.transitionRevision({ revisionId: ids.revision, from: ['QUEUED'], to: 'DEPLOYED' }, at(5));
        const text = JSON.stringify([
          await backend.core.getDeploymentById(ids.deployment),
          await backend.core.getRevisionById(ids.revision),
          await backend.core.listRevisions(boot.workspaceId, ids.deployment, { limit: 10, offset: 0 } as never),
        ]);
        texts.push(text.replaceAll(boot.workspaceId, '<workspace>'));
      }
      expect(texts[1]).toBe(texts[0]);
    } finally {
      await Promise.all([sqlite?.close(), postgres?.close()]);
    }
  });
});
