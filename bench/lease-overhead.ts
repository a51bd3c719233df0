/**
 * What the work leases shared by several processes cost per call, on SQLite and on PostgreSQL, in one run:
 * the delivery worker's claim (an UPDATE … RETURNING) beside the plain read it replaced, naming
 * 50 started revisions as the process's (done once per revision), a heartbeat's renewal of the
 * process lease that covers them (one row, whatever the number held), and an idle sweep (nothing
 * expired) over a history of finished revisions and processed deliveries. Real databases: an SQLite file, and an embedded
 * PostgreSQL started here. Run: `node bench/lease-overhead.ts` (add `--quick` for fewer rounds).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { SecretBox } from '../server/crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from '../server/domain/store-rules.ts';
import type { StoreBackend } from '../server/store/backend.ts';
import { openStore } from '../server/store/open.ts';
import type { WorkLease } from '../server/store/types.ts';
import { createTestDatabase, startTestPostgres } from '../test/helpers/postgres.ts';
import { removeTempDirs, tempDir } from './lib/processes.ts';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 300 : 2000;
const HISTORY = quick ? 500 : 2000;
const BASE = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(BASE + ms).toISOString();
const lease = (owner: string, ms: number): WorkLease => ({ owner, now: iso(ms), until: iso(ms + 15_000) });

async function seed(backend: StoreBackend): Promise<{ running: string[] }> {
  const ws = (await backend.core.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: iso(0) })).workspaceId;
  const config = {
    repo_ref: 'main',
    graph_config_path: 'langgraph.json',
    langgraph_config_path: 'langgraph.json',
    image_uri: null,
    source_tarball_path: null,
    repo_commit_sha: null,
  } as never;
  const running: string[] = [];
  for (let i = 0; i < HISTORY / 10 + 50; i++) {
    const id = crypto.randomUUID();
    const revisions = i < 50 ? 1 : 10;
    const first = crypto.randomUUID();
    await backend.core.createDeployment({
      deployment: {
        id,
        tenant_id: ws,
        name: `b-${i}`,
        source: 'external_docker',
        source_config: { listener_id: null, resource_spec: null } as never,
        source_revision_config: config,
        secrets: [],
        created_at: iso(0),
        updated_at: iso(0),
        status: 'AWAITING_DATABASE',
        latest_revision_id: first,
        active_revision_id: null,
        image_version: null,
      } as never,
      revision: { id: first, trigger: 'create', source_revision_config: config, secrets: [], resource_spec: null, status: i < 50 ? 'DEPLOYING' : 'DEPLOYED' },
      tracingProject: { id: crypto.randomUUID(), name: `b-${i}`, tenant_id: ws, deployment_id: id, created_at: iso(0) },
    });
    if (i < 50) running.push(first);
    for (let r = 1; r < revisions; r++) {
      await backend.core.updateDeployment(
        ws,
        id,
        (current) => ({
          source_config: current.source_config,
          source_revision_config: config,
          secrets: [],
          revision: { id: crypto.randomUUID(), trigger: 'patch', source_revision_config: config, secrets: [], resource_spec: null, status: 'SKIPPED' },
        }),
        iso(0),
      );
    }
  }
  for (let i = 0; i < HISTORY; i++) {
    const done = i >= 20 ? { outcome: 'push' as const, reason: null } : undefined;
    await backend.webhooks.insertDelivery({
      delivery_id: `d-${i}`,
      event: 'push',
      action: null,
      installation_id: null,
      repository: 'acme/agent',
      ref: 'refs/heads/main',
      after_sha: 'a'.repeat(40),
      workspace_id: ws,
      payload: '{}',
      received_at: iso(0),
      done,
    });
  }
  return { running };
}

async function perCall(rounds: number, call: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(50, rounds); i++) await call(i);
  const started = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) await call(i + 50);
  return Number(process.hrtime.bigint() - started) / 1000 / rounds;
}

async function measure(name: string, backend: StoreBackend): Promise<string[]> {
  const { running } = await seed(backend);
  const webhooks = backend.webhooks;
  // 20 deliveries pending; each claim round starts after the last round's claims have expired.
  const list = await perCall(ROUNDS, () => webhooks.listPending(iso(1), 20));
  const claim = await perCall(ROUNDS, (i) => webhooks.claimPending(iso(1), 20, lease('bench', 20_000 * (i + 1))));
  const hold = await perCall(ROUNDS, () => backend.core.holdRevisions(running, 'bench'));
  const renew = await perCall(ROUNDS, (i) => backend.core.renewProcessLease(lease('bench', 1_000 + i)));
  // Renewed just now: an idle sweep finds nothing to take.
  await backend.core.renewProcessLease(lease('other', 2_000));
  const sweep = await perCall(ROUNDS, () => backend.core.takeOverRevisions(lease('other', 2_000), iso(-13_000), 100));
  const fmt = (us: number) => `${us.toFixed(0)} µs`;
  return [
    `${name}: listPending(20) ${fmt(list)}; claimPending(20) ${fmt(claim)} (× ${(claim / list).toFixed(2)}); ` +
      `hold 50 revisions ${fmt(hold)}; renew the process lease ${fmt(renew)}; idle sweep ${fmt(sweep)} (${HISTORY} finished revisions and processed deliveries, ${ROUNDS} rounds)`,
  ];
}

const box = new SecretBox(randomBytes(32));
const lines: string[] = [];
const dir = tempDir('cp-bench-leases-');
const sqlite = await openStore(join(dir, 'control-plane.db'), { secretBox: box, synchronous: 'FULL', rules: DOMAIN_STORE_RULES });
lines.push(...(await measure('SQLite (synchronous=FULL)', sqlite)));
await sqlite.close();
const postgres = await startTestPostgres();
try {
  const pg = await openStore(await createTestDatabase(postgres.adminUrl), { secretBox: box, rules: DOMAIN_STORE_RULES });
  lines.push(...(await measure('PostgreSQL (embedded, one pool)', pg)));
  await pg.close();
} finally {
  await postgres.stop();
  removeTempDirs();
}
process.stdout.write(`${lines.join('\n')}\n`);
