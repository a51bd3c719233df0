import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { openStore } from '../../server/store/open.ts';
import { PgDb } from '../../server/store/postgres/db.ts';
import type { RevisionRunner, Store, WorkLease } from '../../server/store/types.ts';
import type { Deployment, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import { BACKENDS, openTestBackend } from '../helpers/backends.ts';
import { rawSql } from '../helpers/raw-sql.ts';

/**
 * Leases on work shared by several server processes (issue 12 part two), on both backends with
 * real databases: started revisions, teardowns, webhook delivery claims, uploads being received.
 * The "processes" are owners named in the calls; the races are real (calls issued together, on
 * PostgreSQL each on its own pooled connection). Each test has a database of its own, since a
 * sweep takes whatever is expired in the whole database.
 */

const NOW = '2026-01-01T00:00:00.000Z';
const at = (second: number) => new Date(Date.parse(NOW) + second * 1000).toISOString();
/** A lease of `owner` taken at `second`, for 15 s. */
const lease = (owner: string, second: number): WorkLease => ({ owner, now: at(second), until: at(second + 15) });

const revisionConfig: SourceRevisionConfig = {
  repo_ref: 'main',
  graph_config_path: 'langgraph.json',
  langgraph_config_path: 'langgraph.json',
  image_uri: null,
  source_tarball_path: null,
  repo_commit_sha: null,
} as SourceRevisionConfig;

describe.each(BACKENDS)('work leases: %s', (kind) => {
  let backend: Awaited<ReturnType<typeof openTestBackend>>;
  let ws: string;

  beforeEach(async () => {
    backend = await openTestBackend(kind);
    ws = (await backend.core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: NOW })).workspaceId;
  });
  afterEach(async () => {
    await backend?.close();
  });

  /**
   * A deployment whose one revision is stored in `status` (as a create stores a started one: no
   * owner yet, unless `runner` is given and its lease live: then `held`).
   */
  async function deploymentWith(status: RevisionStatus, runner?: RevisionRunner): Promise<{ deploymentId: string; revisionId: string; held: boolean }> {
    const deploymentId = crypto.randomUUID();
    const revisionId = crypto.randomUUID();
    const name = `d-${deploymentId.slice(0, 8)}`;
    const { revisionHeld } = await backend.core.createDeployment({
      deployment: {
        id: deploymentId,
        tenant_id: ws,
        name,
        source: 'github',
        source_config: {
          integration_id: null,
          repo_url: 'https://github.com/acme/agent',
          deployment_type: 'dev',
          build_on_push: false,
          custom_url: null,
          resource_spec: null,
          listener_id: null,
          listener_config: null,
          install_command: null,
          build_command: null,
        },
        source_revision_config: revisionConfig,
        secrets: [],
        created_at: NOW,
        updated_at: NOW,
        status: 'AWAITING_DATABASE',
        latest_revision_id: revisionId,
        active_revision_id: null,
        image_version: null,
      } as Deployment,
      revision: { id: revisionId, trigger: 'create', source_revision_config: revisionConfig, secrets: [], resource_spec: null, status },
      tracingProject: { id: crypto.randomUUID(), name, tenant_id: ws, deployment_id: deploymentId, created_at: NOW },
      runner,
    });
    return { deploymentId, revisionId, held: revisionHeld };
  }

  it('two owners racing for the same expired revisions: each revision goes to exactly one, and its row names it', async () => {
    const started = await Promise.all(Array.from({ length: 30 }, (_, i) => deploymentWith(i % 2 ? 'DEPLOYING' : 'BUILDING')));
    // Queued and ended revisions are nobody's work: never taken over.
    const queued = await deploymentWith('QUEUED');
    const ended = await deploymentWith('DEPLOYED');
    // Never held, unchanged for longer than a lease (staleBefore): free. A sweeping process's own lease must be live.
    await backend.core.renewProcessLease(lease('process-a', 100));
    await backend.core.renewProcessLease(lease('process-b', 100));
    const [a, b] = await Promise.all([
      backend.core.takeOverRevisions(lease('process-a', 100), at(85), 100),
      backend.core.takeOverRevisions(lease('process-b', 100), at(85), 100),
    ]);
    const ids = [...a, ...b].map((r) => r.id);
    expect(ids.sort()).toEqual(started.map((s) => s.revisionId).sort());
    expect(ids).not.toContain(queued.revisionId);
    expect(ids).not.toContain(ended.revisionId);
    const sql = rawSql(backend.url, backend.core);
    try {
      for (const [owner, taken] of [
        ['process-a', a],
        ['process-b', b],
      ] as const) {
        for (const revision of taken) {
          expect(await sql.get('SELECT runner_id FROM revisions WHERE id = ?', revision.id)).toEqual({ runner_id: owner });
          expect(revision.deployment_id).toBe(started.find((s) => s.revisionId === revision.id)!.deploymentId);
        }
      }
    } finally {
      await sql.close();
    }
    // Taken, they are held by live processes: a third sweep at once finds nothing.
    await backend.core.renewProcessLease(lease('process-c', 101));
    expect(await backend.core.takeOverRevisions(lease('process-c', 101), at(86), 100)).toEqual([]);
  });

  it('a started revision not yet leased is not taken while it changed within a lease', async () => {
    const { revisionId } = await deploymentWith('DEPLOYING');
    await backend.core.renewProcessLease(lease('process-b', 10));
    expect(await backend.core.takeOverRevisions(lease('process-b', 10), at(-5), 100)).toEqual([]);
    expect((await backend.core.takeOverRevisions(lease('process-b', 20), at(5), 100)).map((r) => r.id)).toEqual([revisionId]);
  });

  it('one process lease covers all its revisions; once its owner stops renewing, another takes them, and the old owner learns it lapsed and holds none', async () => {
    const held = await Promise.all(['BUILDING', 'DEPLOYING', 'BUILDING'].map((status) => deploymentWith(status as RevisionStatus)));
    const ids = held.map((h) => h.revisionId);
    // The starting process's first renewal: no lease yet (false), then it names itself on what it started.
    expect(await backend.core.renewProcessLease(lease('process-a', 1))).toBe(false);
    expect((await backend.core.holdRevisions(ids, 'process-a')).sort()).toEqual([...ids].sort());
    // One row renewed at 10 (until 25) keeps all three: nobody takes them at 20, nor holds them.
    expect(await backend.core.renewProcessLease(lease('process-a', 10))).toBe(true);
    expect(await backend.core.renewProcessLease(lease('process-b', 20))).toBe(false);
    expect(await backend.core.takeOverRevisions(lease('process-b', 20), at(5), 100)).toEqual([]);
    expect(await backend.core.holdRevisions(ids, 'process-b')).toEqual([]);
    // process-a stops renewing (it died or stalled): after 25 all three are taken.
    expect((await backend.core.takeOverRevisions(lease('process-b', 26), at(11), 100)).map((r) => r.id).sort()).toEqual([...ids].sort());
    // process-a comes back: its lease had lapsed, and it holds none of them any more.
    expect(await backend.core.renewProcessLease(lease('process-a', 27))).toBe(false);
    expect(await backend.core.holdRevisions(ids, 'process-a')).toEqual([]);
    expect((await backend.core.holdRevisions(ids, 'process-b')).sort()).toEqual([...ids].sort());
    // Live again, process-a takes nothing back while process-b renews.
    expect(await backend.core.renewProcessLease(lease('process-b', 30))).toBe(true);
    expect(await backend.core.takeOverRevisions(lease('process-a', 31), at(16), 100)).toEqual([]);
    // An ended revision is held no more.
    await backend.core.transitionRevision({ revisionId: ids[0]!, from: ['BUILDING'], to: 'BUILD_FAILED' }, at(32));
    expect((await backend.core.holdRevisions(ids, 'process-b')).sort()).toEqual(ids.slice(1).sort());
  });

  it('a sweeping process whose own lease lapsed takes nothing until it has renewed it', async () => {
    const { revisionId } = await deploymentWith('DEPLOYING');
    expect(await backend.core.renewProcessLease(lease('process-b', 10))).toBe(false);
    // At 30 process-b's lease (until 25) has lapsed: it must first learn so, and re-check what it holds.
    expect(await backend.core.takeOverRevisions(lease('process-b', 30), at(15), 100)).toEqual([]);
    expect(await backend.core.renewProcessLease(lease('process-b', 31))).toBe(false);
    expect((await backend.core.takeOverRevisions(lease('process-b', 31), at(16), 100)).map((r) => r.id)).toEqual([revisionId]);
  });

  it('a dead process is forgotten once its revisions are taken; coming back, it holds nothing, and holds nothing new before it renews', async () => {
    const held = await Promise.all([deploymentWith('BUILDING'), deploymentWith('DEPLOYING')]);
    const ids = held.map((h) => h.revisionId);
    await backend.core.renewProcessLease(lease('process-a', 1));
    expect((await backend.core.holdRevisions(ids, 'process-a')).sort()).toEqual([...ids].sort());
    await backend.core.renewProcessLease(lease('process-b', 20));
    // In batches of one: process-a keeps its row until the last of its revisions is taken.
    const sql = rawSql(backend.url, backend.core);
    const rowOf = async (owner: string) => Number((await sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM process_leases WHERE process_id = ?', owner))!.n);
    try {
      const first = await backend.core.takeOverRevisions(lease('process-b', 20), at(5), 1);
      expect(first).toHaveLength(1);
      expect(await rowOf('process-a')).toBe(1);
      const second = await backend.core.takeOverRevisions(lease('process-b', 21), at(6), 1);
      expect([...first, ...second].map((r) => r.id).sort()).toEqual([...ids].sort());
      expect(await backend.core.takeOverRevisions(lease('process-b', 22), at(7), 1)).toEqual([]);
      expect(await rowOf('process-a')).toBe(0);
      // process-a comes back: no lease, nothing of its own. Before it renews it cannot name itself on
      // a revision (its row is gone: a revision never names a process with no lease).
      const fresh = await deploymentWith('DEPLOYING');
      expect(await backend.core.holdRevisions([fresh.revisionId], 'process-a')).toEqual([]);
      expect(await backend.core.renewProcessLease(lease('process-a', 23))).toBe(false);
      expect(await backend.core.holdRevisions([...ids, fresh.revisionId], 'process-a')).toEqual([fresh.revisionId]);
    } finally {
      await sql.close();
    }
  });

  it("a create names its runner in its own write only while the runner's lease is live; a sweep leaves such a revision alone until then", async () => {
    const runnerRow = async (revisionId: string) => {
      const sql = rawSql(backend.url, backend.core);
      try {
        return (await sql.get<{ runner_id: string | null }>('SELECT runner_id FROM revisions WHERE id = ?', revisionId))!.runner_id;
      } finally {
        await sql.close();
      }
    };
    // No lease row yet: nobody is named (a revision never names a process with no row).
    const before = await deploymentWith('BUILDING', { owner: 'process-a', now: at(0) });
    expect(before.held).toBe(false);
    expect(await runnerRow(before.revisionId)).toBeNull();
    // A live lease (until 16): named at once, no hold needed.
    await backend.core.renewProcessLease(lease('process-a', 1));
    const live = await deploymentWith('DEPLOYING', { owner: 'process-a', now: at(5) });
    expect(live.held).toBe(true);
    expect(await runnerRow(live.revisionId)).toBe('process-a');
    // Another process sweeping at 10 with every unheld revision stale takes the unnamed one only.
    await backend.core.renewProcessLease(lease('process-b', 10));
    expect((await backend.core.takeOverRevisions(lease('process-b', 10), at(10), 100)).map((r) => r.id)).toEqual([before.revisionId]);
    // By its own clock process-a's lease has lapsed at 20: it names itself on nothing new.
    const lapsed = await deploymentWith('BUILDING', { owner: 'process-a', now: at(20) });
    expect(lapsed.held).toBe(false);
    expect(await runnerRow(lapsed.revisionId)).toBeNull();
    // Dead to the others too: the revision it was named on goes to the sweeper with the unnamed one.
    await backend.core.renewProcessLease(lease('process-b', 21));
    expect((await backend.core.takeOverRevisions(lease('process-b', 21), at(21), 100)).map((r) => r.id).sort()).toEqual(
      [live.revisionId, lapsed.revisionId].sort(),
    );
  });

  it.runIf(kind === 'postgres')("postgres: a create racing a sweep that deletes its runner's lease row waits for it, then names no one", async () => {
    await backend.core.renewProcessLease(lease('process-a', 1));
    const sweep = new PgDb(backend.url, { max: 1 });
    try {
      let created: Promise<{ held: boolean; revisionId: string }> | undefined;
      let settled = false;
      await sweep.tx(async (c) => {
        // What a sweep does to a process it found dead: lock its row, and delete it once its revisions are taken.
        await sweep.rows("SELECT process_id FROM process_leases WHERE process_id = 'process-a' FOR UPDATE", [], c);
        await sweep.run("DELETE FROM process_leases WHERE process_id = 'process-a'", [], c);
        created = deploymentWith('BUILDING', { owner: 'process-a', now: at(5) });
        void created.then(
          () => (settled = true),
          () => (settled = true),
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        // The create waits on the locked row rather than naming a process whose row is going away.
        expect(settled).toBe(false);
      });
      const outcome = await created!;
      expect(outcome.held).toBe(false);
      expect((await sweep.row<{ runner_id: string | null }>('SELECT runner_id FROM revisions WHERE id = ?', [outcome.revisionId]))!.runner_id).toBeNull();
    } finally {
      await sweep.close();
    }
  });

  it('a released revision is taken over once it has been unchanged for a lease', async () => {
    const { revisionId } = await deploymentWith('DEPLOYING');
    await backend.core.renewProcessLease(lease('process-a', 10));
    expect(await backend.core.holdRevisions([revisionId], 'process-a')).toEqual([revisionId]);
    // Another process cannot release it.
    await backend.core.releaseRevisions([revisionId], 'process-b');
    await backend.core.renewProcessLease(lease('process-b', 20));
    expect(await backend.core.takeOverRevisions(lease('process-b', 20), at(5), 100)).toEqual([]);
    await backend.core.releaseRevisions([revisionId], 'process-a');
    expect((await backend.core.takeOverRevisions(lease('process-b', 21), at(6), 100)).map((r) => r.id)).toEqual([revisionId]);
  });

  it('a process lease ended at shutdown frees its revisions at the next sweep', async () => {
    const { revisionId } = await deploymentWith('BUILDING');
    await backend.core.renewProcessLease(lease('process-a', 1));
    await backend.core.holdRevisions([revisionId], 'process-a');
    await backend.core.endProcessLease('process-a', at(2));
    await backend.core.renewProcessLease(lease('process-b', 3));
    expect((await backend.core.takeOverRevisions(lease('process-b', 3), at(-12), 100)).map((r) => r.id)).toEqual([revisionId]);
  });

  it('deployments whose queued revision was never started are found, each once; those with a revision in progress are not', async () => {
    const queueOne = (deploymentId: string) =>
      backend.core.updateDeployment(
        ws,
        deploymentId,
        (current) => ({
          source_config: current.source_config,
          source_revision_config: current.source_revision_config,
          secrets: [],
          revision: { id: crypto.randomUUID(), trigger: 'patch', source_revision_config: current.source_revision_config, secrets: [], resource_spec: null },
        }),
        at(1),
      );
    // Interleaved, so that the sweep's seek from one deployment with a queued revision to the next
    // passes over busy ones and over several queued revisions of one deployment.
    const stalled: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const quiet = await deploymentWith('QUEUED');
      if (i % 2 === 0) for (let k = 0; k < 3; k += 1) await queueOne(quiet.deploymentId);
      stalled.push(quiet.deploymentId);
      const busy = await deploymentWith(i % 2 ? 'DEPLOYING' : 'BUILDING');
      for (let k = 0; k < 2; k += 1) await queueOne(busy.deploymentId);
    }
    await deploymentWith('DEPLOYED');
    expect((await backend.core.listStalledQueuedDeployments()).sort()).toEqual(stalled.sort());
  });

  it('teardowns: of two processes claiming one deletion exactly one runs it; another takes it only after the lease', async () => {
    const { deploymentId } = await deploymentWith('DEPLOYED');
    // Not being deleted: nobody's teardown.
    expect(await backend.core.claimTeardown(deploymentId, lease('process-a', 1))).toBe(false);
    await backend.core.markDeploymentDeleting(ws, deploymentId, false, at(1));
    const claims = await Promise.all(['process-a', 'process-b', 'process-c'].map((owner) => backend.core.claimTeardown(deploymentId, lease(owner, 2))));
    expect(claims.filter(Boolean)).toHaveLength(1);
    const owner = ['process-a', 'process-b', 'process-c'][claims.indexOf(true)]!;
    const other = owner === 'process-a' ? 'process-b' : 'process-a';
    // The owner claiming again (a repeated DELETE) keeps it; another does not get it while it lasts.
    expect(await backend.core.claimTeardown(deploymentId, lease(owner, 3))).toBe(true);
    expect(await backend.core.takeOverTeardowns(lease(other, 10), 100)).toEqual([]);
    expect(await backend.core.renewTeardownLeases([deploymentId], lease(owner, 15))).toEqual([deploymentId]);
    expect(await backend.core.takeOverTeardowns(lease(other, 25), 100)).toEqual([]);
    expect(await backend.core.renewTeardownLeases([deploymentId], lease(other, 25))).toEqual([]);
    // The owner died after its renewal at 15: at 31 the lease has passed.
    const raced = await Promise.all([backend.core.takeOverTeardowns(lease(other, 31), 100), backend.core.takeOverTeardowns(lease('process-d', 31), 100)]);
    expect(raced.flat().map((d) => d.id)).toEqual([deploymentId]);
    expect(raced.flat()[0]).toMatchObject({ id: deploymentId, status: 'AWAITING_DELETE' });
    expect(await backend.core.renewTeardownLeases([deploymentId], lease(owner, 32))).toEqual([]);
    // A deletion nobody claimed yet (its process died between marking and claiming) is free at once.
    const second = await deploymentWith('DEPLOYED');
    await backend.core.markDeploymentDeleting(ws, second.deploymentId, false, at(40));
    expect((await backend.core.takeOverTeardowns(lease(other, 40), 100)).map((d) => d.id)).toEqual([second.deploymentId]);
  });

  it("claimPending: 200 pending deliveries, 4 claimers at once, each delivery claimed exactly once; a dead claimer's deliveries return after its lease", async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `delivery-${String(i).padStart(3, '0')}-${crypto.randomUUID()}`);
    for (const id of ids) {
      await backend.webhooks.insertDelivery({
        delivery_id: id,
        event: 'push',
        action: null,
        installation_id: null,
        repository: 'acme/agent',
        ref: 'refs/heads/main',
        after_sha: 'a'.repeat(40),
        workspace_id: ws,
        payload: '{}',
        received_at: at(1),
      });
    }
    const claimed = new Map<string, string[]>();
    await Promise.all(
      ['w1', 'w2', 'w3', 'w4'].map(async (owner) => {
        const mine: string[] = [];
        claimed.set(owner, mine);
        for (;;) {
          const batch = await backend.webhooks.claimPending(at(2), 7, lease(owner, 2));
          if (batch.length === 0) return;
          // Oldest first within a batch.
          expect(batch.map((d) => d.delivery_id)).toEqual([...batch.map((d) => d.delivery_id)].sort());
          mine.push(...batch.map((d) => d.delivery_id));
        }
      }),
    );
    const all = [...claimed.values()].flat();
    expect(all).toHaveLength(200);
    expect(new Set(all).size).toBe(200);
    expect(new Set(all)).toEqual(new Set(ids));
    // Processed ones are gone; the rest stay with their claimer until the lease (17) has passed.
    const done = all.slice(0, 100);
    for (const id of done) await backend.webhooks.completeDelivery(id, { outcome: 'push', reason: null, results: [], now: at(3) });
    expect(await backend.webhooks.claimPending(at(10), 500, lease('w5', 10))).toEqual([]);
    const retaken = await backend.webhooks.claimPending(at(18), 500, lease('w5', 18));
    expect(new Set(retaken.map((d) => d.delivery_id))).toEqual(new Set(all.filter((id) => !done.includes(id))));
    expect(retaken[0]).toMatchObject({ event: 'push', workspace_id: ws, payload: '{}', attempts: 0, received_at: at(1) });
    // Not yet due (received after dueBy): not claimed (and w5's claims still hold at 30).
    await backend.webhooks.insertDelivery({
      delivery_id: `late-${crypto.randomUUID()}`,
      event: 'push',
      action: null,
      installation_id: null,
      repository: 'acme/agent',
      ref: 'refs/heads/main',
      after_sha: 'b'.repeat(40),
      workspace_id: ws,
      payload: '{}',
      received_at: at(50),
    });
    expect(await backend.webhooks.claimPending(at(30), 500, lease('w6', 30))).toEqual([]);
  });

  it('uploads: released only when the receiving process has stopped renewing, and only that process may complete or release it', async () => {
    const { deploymentId } = await deploymentWith('DEPLOYED');
    const id = crypto.randomUUID();
    await backend.uploads.createUpload({
      id,
      deployment_id: deploymentId,
      tenant_id: ws,
      object_path: `uploads/${id}.tar.gz`,
      expires_at: at(900),
      created_at: NOW,
    });
    expect(await backend.uploads.claimUpload(id, lease('process-a', 1))).toBe('claimed');
    await backend.uploads.writeChunk(id, 0, Buffer.from('partial'));
    // Another process starting (or sweeping) while process-a streams leaves the upload alone.
    expect(await backend.uploads.releaseInterruptedUploads(at(10))).toBe(0);
    expect(await backend.uploads.renewUploadLeases(lease('process-a', 10))).toBe(1);
    expect(await backend.uploads.renewUploadLeases(lease('process-b', 10))).toBe(0);
    expect(await backend.uploads.releaseInterruptedUploads(at(20))).toBe(0);
    // Another process's failure path cannot release it, nor complete it.
    await backend.uploads.releaseUpload(id, 'process-b');
    expect(await backend.uploads.completeUpload(id, 7, at(21), 'process-b')).toBe(false);
    expect((await backend.uploads.readChunk(id, 0))!.toString()).toBe('partial');
    // process-a died after its renewal at 10: at 26 its upload is released, the chunks dropped.
    expect(await backend.uploads.releaseInterruptedUploads(at(26))).toBe(1);
    expect(await backend.uploads.readChunk(id, 0)).toBeNull();
    expect((await backend.uploads.getUpload(id))!.state).toBe('issued');
    // Too late for process-a: its completion is refused, and the URL can be used again.
    expect(await backend.uploads.completeUpload(id, 7, at(27), 'process-a')).toBe(false);
    expect(await backend.uploads.claimUpload(id, lease('process-b', 28))).toBe('claimed');
  });
});

/** Stores an `external_docker` deployment whose one revision is in `status`, as a create stores it (no owner yet). */
async function storeDeployment(core: Store, tenantId: string, name: string, status: RevisionStatus): Promise<{ id: string; deployment_id: string }> {
  const deploymentId = crypto.randomUUID();
  const revisionId = crypto.randomUUID();
  await core.createDeployment({
    deployment: {
      id: deploymentId,
      tenant_id: tenantId,
      name,
      source: 'external_docker',
      source_config: { listener_id: null, resource_spec: null } as never,
      source_revision_config: revisionConfig,
      secrets: [],
      created_at: NOW,
      updated_at: NOW,
      status: 'AWAITING_DATABASE',
      latest_revision_id: revisionId,
      active_revision_id: null,
      image_version: null,
    } as Deployment,
    revision: { id: revisionId, trigger: 'create', source_revision_config: revisionConfig, secrets: [], resource_spec: null, status },
    tracingProject: { id: crypto.randomUUID(), name, tenant_id: tenantId, deployment_id: deploymentId, created_at: NOW },
  });
  return { id: revisionId, deployment_id: deploymentId };
}

describe('SQLite: one process per file', () => {
  it('upgrading to process leases (migration 10): revisions in progress keep their process, whose work a restart then takes over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-leases-upgrade-'));
    const path = join(dir, 'control-plane.db');
    const box = new SecretBox(randomBytes(32));
    try {
      // A database as migration 9 left it: revisions carry their own leases, there are no process leases.
      const first = await openStore(path, { secretBox: box, synchronous: 'NORMAL' });
      const ws = (await first.core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: NOW })).workspaceId;
      const running = await storeDeployment(first.core, ws, 'upgrade-running', 'DEPLOYING');
      const ended = await storeDeployment(first.core, ws, 'upgrade-ended', 'DEPLOYED');
      const sql = rawSql(path, first.core);
      await sql.run('DROP INDEX revisions_running');
      await sql.run('DROP TABLE process_leases');
      await sql.run('DELETE FROM schema_migrations WHERE version = 10');
      await sql.run("UPDATE revisions SET runner_id = 'old-a', lease_expires_at = ? WHERE id = ?", at(15), running.id);
      await sql.run("UPDATE revisions SET runner_id = 'old-b', lease_expires_at = ? WHERE id = ?", at(10), ended.id);
      await first.close();
      const second = await openStore(path, { secretBox: box, synchronous: 'NORMAL' });
      try {
        const after = rawSql(path, second.core);
        // Only the process with work in progress gets a row (expired at once here: SQLite is one process).
        expect(await after.all('SELECT process_id FROM process_leases')).toEqual([{ process_id: 'old-a' }]);
        await second.core.renewProcessLease(lease('new-run', 3));
        expect(await second.core.takeOverRevisions(lease('new-run', 3), at(-12), 100)).toEqual([running]);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a restart resumes at once: leases left in the file by the previous run are expired when it is opened', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-leases-'));
    const path = join(dir, 'control-plane.db');
    const box = new SecretBox(randomBytes(32));
    try {
      const first = await openStore(path, { secretBox: box, synchronous: 'NORMAL' });
      const ws = (await first.core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: NOW })).workspaceId;
      const { id: revisionId, deployment_id: deploymentId } = await storeDeployment(first.core, ws, 'restart', 'DEPLOYING');
      const upload = crypto.randomUUID();
      await first.uploads.createUpload({
        id: upload,
        deployment_id: deploymentId,
        tenant_id: ws,
        object_path: `uploads/${upload}.tar.gz`,
        expires_at: at(900),
        created_at: NOW,
      });
      expect(await first.uploads.claimUpload(upload, lease('old-run', 1))).toBe('claimed');
      await first.core.renewProcessLease(lease('old-run', 1));
      expect(await first.core.holdRevisions([revisionId], 'old-run')).toEqual([revisionId]);
      // Started by the old run and not held yet when it died (changed at 0: not stale before 3).
      const { id: unheldRevisionId, deployment_id: unheldDeploymentId } = await storeDeployment(first.core, ws, 'restart-unheld', 'DEPLOYING');
      // Within the lease, in the same run, nobody else takes either.
      await first.core.renewProcessLease(lease('new-run', 2));
      expect(await first.core.takeOverRevisions(lease('new-run', 2), at(-13), 100)).toEqual([]);
      await first.close();
      // The process died at 2 and restarts at once: its work is resumed without waiting until 16.
      const second = await openStore(path, { secretBox: box, synchronous: 'NORMAL' });
      try {
        await second.core.renewProcessLease(lease('new-run', 3));
        const taken = await second.core.takeOverRevisions(lease('new-run', 3), at(-12), 100);
        expect(taken.sort((x, y) => x.id.localeCompare(y.id))).toEqual(
          [
            { id: revisionId, deployment_id: deploymentId },
            { id: unheldRevisionId, deployment_id: unheldDeploymentId },
          ].sort((x, y) => x.id.localeCompare(y.id)),
        );
        expect(await second.uploads.releaseInterruptedUploads(at(3))).toBe(1);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
