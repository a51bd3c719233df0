/**
 * What the outboxes' triggers cost a revision change on SQLite: the GitHub status outbox's
 * (migration 017) and the outgoing events' (migration 025, a workspace with one subscription to
 * every event). The
 * same status flip (`UPDATE revisions SET status`, one transaction each, as the pipeline's
 * compare-and-set is) on a revision of a deployment whose integration is proven (the trigger
 * writes an outbox row), of one whose integration is not (the trigger's condition is false), and
 * with the triggers dropped (the cost before them). Run: `node bench/github-outbox-trigger.ts`.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { SecretBox } from '../server/crypto/secret-box.ts';
import { openStore } from '../server/store/open.ts';
import type { SqliteStore } from '../server/store/sqlite.ts';
import { removeTempDirs, tempDir } from './lib/processes.ts';

const ROUNDS = process.argv.includes('--quick') ? 2000 : 20_000;
const now = '2026-01-01T00:00:00.000Z';

async function revisionOf(
  proven: boolean,
  subscribed: boolean,
  dropTriggers: boolean,
): Promise<{ db: Database.Database; revisionId: string; close: () => Promise<void> }> {
  const backend = await openStore(join(tempDir('cp-bench-outbox-'), 'db.sqlite'), { secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL' });
  const core = backend.core as SqliteStore;
  const ws = (await core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now })).workspaceId;
  const integrationId = crypto.randomUUID();
  await core.createIntegration({ id: integrationId, tenant_id: ws, installation_id: 42, name: 'acme', suspended: false, created_at: now });
  if (proven)
    await backend.github.linkInstallation(
      { id: integrationId, tenant_id: ws, installation_id: 42, name: 'acme', suspended: false, created_at: now },
      { login: 'acme', id: 1, type: 'Organization' },
      now,
    );
  if (subscribed)
    await backend.events.create({
      id: crypto.randomUUID(),
      tenant_id: ws,
      url: 'https://hooks.example.com/x',
      events: ['*'],
      format: 'standard',
      secret_enc: 'unused',
      created_at: now,
    });
  const config = {
    repo_ref: 'main',
    graph_config_path: 'langgraph.json',
    langgraph_config_path: 'langgraph.json',
    image_uri: null,
    source_tarball_path: null,
    repo_commit_sha: 'a'.repeat(40),
  } as never;
  const id = crypto.randomUUID();
  const revisionId = crypto.randomUUID();
  await core.createDeployment({
    deployment: {
      id,
      tenant_id: ws,
      name: 'bench',
      source: 'github',
      source_config: {
        integration_id: integrationId,
        repo_url: 'https://github.com/acme/agent',
        deployment_type: 'dev',
        build_on_push: true,
        custom_url: null,
        resource_spec: null,
        listener_id: null,
        listener_config: null,
        install_command: null,
        build_command: null,
      },
      source_revision_config: config,
      secrets: [],
      created_at: now,
      updated_at: now,
      status: 'AWAITING_DATABASE',
      latest_revision_id: revisionId,
      active_revision_id: null,
      image_version: null,
    } as never,
    revision: { id: revisionId, trigger: 'create', source_revision_config: config, secrets: [], resource_spec: null, status: 'BUILDING' },
    tracingProject: { id: crypto.randomUUID(), name: 'bench', tenant_id: ws, deployment_id: id, created_at: now },
  });
  const db = core.db as Database.Database;
  if (dropTriggers)
    for (const name of [
      'github_outbox_revision_created',
      'github_outbox_revision_moved',
      'github_outbox_deployment_deleting',
      'event_deliveries_deployment_created',
      'event_deliveries_deployment_deleted',
      'event_deliveries_revision_status_changed',
    ])
      db.exec(`DROP TRIGGER ${name}`);
  return { db, revisionId, close: () => backend.close() };
}

function measure(db: Database.Database, revisionId: string): number {
  const flip = db.prepare('UPDATE revisions SET status = ?, updated_at = ? WHERE id = ?');
  const step = db.transaction((status: string) => flip.run(status, now, revisionId));
  for (let i = 0; i < 500; i++) step(i % 2 ? 'BUILDING' : 'DEPLOYING');
  const started = process.hrtime.bigint();
  for (let i = 0; i < ROUNDS; i++) step(i % 2 ? 'BUILDING' : 'DEPLOYING');
  return Number(process.hrtime.bigint() - started) / 1000 / ROUNDS;
}

const results: Record<string, number> = {};
for (const [label, proven, subscribed, drop] of [
  ['no triggers', false, false, true],
  ['triggers, integration not proven, no event subscription', false, false, false],
  ['triggers, proven (writes a GitHub outbox row)', true, false, false],
  ['triggers, one event subscription (writes an event delivery row)', false, true, false],
] as const) {
  const { db, revisionId, close } = await revisionOf(proven, subscribed, drop);
  results[label] = measure(db, revisionId);
  const rows = (db.prepare('SELECT count(*) AS n FROM sqlite_master WHERE name = ?').get('github_outbox') as { n: number }).n
    ? (db.prepare('SELECT count(*) AS n FROM github_outbox').get() as { n: number }).n
    : 0;
  console.log(`${label}: ${results[label]!.toFixed(2)} µs per status change (${ROUNDS} changes; outbox rows ${rows})`);
  await close();
}
removeTempDirs();
