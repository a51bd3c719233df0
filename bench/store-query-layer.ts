/**
 * The store's query layer on its hottest reads and writes, in-process on SQLite, against Kysely
 * (the typed query builder with dialects for both drivers) on the same database:
 *
 *   node bench/store-query-layer.ts [--kysely=/path/to/kysely/dist/esm/index.js] [--before=/path/to/other/checkout]
 *
 * `--before` adds the rows of another checkout's store (its `server/store/sqlite.ts`) on the same
 * file, so a change of the store is measured against the store it replaces in one run.
 * Kysely is not a dependency: install it in a scratch folder (`npm i kysely` there) and name its
 * entry; without it the Kysely rows are skipped. Each round runs every case once; a figure is the
 * median over the rounds of µs per call, and its ratio the median of the per-round ratios to the
 * floor measured in the same round, which holds on a busy machine better than the figures do.
 */

import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SecretBox } from '../server/crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from '../server/domain/store-rules.ts';
import { HOT_QUERIES } from '../server/store/queries/hot-paths.ts';
import { openSqliteStore } from '../server/store/sqlite.ts';

const kyselyArg = process.argv.find((arg) => arg.startsWith('--kysely='))?.slice('--kysely='.length) ?? '/tmp/kysely/node_modules/kysely/dist/esm/index.js';
const before = process.argv.find((arg) => arg.startsWith('--before='))?.slice('--before='.length);
const CALLS = 5_000;
const ROUNDS = 31;

const path = join(mkdtempSync(join(tmpdir(), 'cp-query-layer-')), 'control-plane.db');
const store = openSqliteStore({ path, secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL', rules: DOMAIN_STORE_RULES });
const boot = await store.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: new Date().toISOString() });
const tenant = boot.workspaceId;
const deploymentId = crypto.randomUUID();
const revisionId = crypto.randomUUID();
const now = new Date().toISOString();
await store.createDeployment({
  deployment: {
    id: deploymentId,
    tenant_id: tenant,
    name: 'bench',
    source: 'external_docker',
    source_config: { listener_id: null, resource_spec: null } as never,
    source_revision_config: { repo_ref: null } as never,
    secrets: [],
    created_at: now,
    updated_at: now,
    status: 'AWAITING_DATABASE',
    latest_revision_id: revisionId,
    active_revision_id: null,
    image_version: null,
  },
  revision: { id: revisionId, trigger: 'create', source_revision_config: { repo_ref: null } as never, secrets: [], resource_spec: null, status: 'DEPLOYING' },
  tracingProject: { id: crypto.randomUUID(), name: 'bench', tenant_id: tenant, deployment_id: deploymentId, created_at: now },
});

type Case = { name: string; call: () => unknown };
const raw = store.db.prepare(HOT_QUERIES.revision);
const cases: Case[] = [
  { name: 'GET revision read: better-sqlite3 prepared statement (floor)', call: () => raw.get(revisionId, deploymentId, tenant) },
  { name: 'GET revision read: the store (Db adapter, same statement)', call: () => store.getRevision(tenant, deploymentId, revisionId) },
  {
    name: 'transition + log line in one transaction: the store',
    call: () => store.transitionRevision({ revisionId, from: ['DEPLOYING'], to: 'DEPLOYING', logs: [{ type: 'deploy', level: 'info', message: 'x' }] }, now),
  },
];

if (before) {
  type StoreLike = { getRevision: typeof store.getRevision; transitionRevision: typeof store.transitionRevision };
  const { openSqliteStore: openBefore } = (await import(join(before, 'server/store/sqlite.ts'))) as {
    openSqliteStore: (options: { path: string; secretBox: SecretBox; synchronous: 'NORMAL' }) => StoreLike;
  };
  const old = openBefore({ path, secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL' });
  cases.push(
    { name: `GET revision read: the store of ${before}`, call: () => old.getRevision(tenant, deploymentId, revisionId) },
    {
      name: `transition + log line in one transaction: the store of ${before}`,
      call: () => old.transitionRevision({ revisionId, from: ['DEPLOYING'], to: 'DEPLOYING', logs: [{ type: 'deploy', level: 'info', message: 'x' }] }, now),
    },
  );
}

if (existsSync(kyselyArg)) {
  const { Kysely, SqliteDialect } = (await import(kyselyArg)) as {
    Kysely: new (config: { dialect: unknown }) => KyselyLike;
    SqliteDialect: new (config: { database: Database.Database }) => unknown;
  };
  const kysely = new Kysely({ dialect: new SqliteDialect({ database: new Database(path) }) });
  cases.push(
    {
      name: 'GET revision read: Kysely (query built per call)',
      call: () =>
        kysely
          .selectFrom('revisions')
          .selectAll()
          .where('id', '=', revisionId)
          .where('deployment_id', '=', deploymentId)
          .where('tenant_id', '=', tenant)
          .executeTakeFirst(),
    },
    {
      name: 'transition + log line in one transaction: Kysely',
      call: () =>
        kysely.transaction().execute(async (tx: KyselyLike) => {
          await tx
            .updateTable('revisions')
            .set({ status: 'DEPLOYING', updated_at: now })
            .where('id', '=', revisionId)
            .where('status', 'in', ['DEPLOYING'])
            .execute();
          await tx.insertInto('revision_logs').values({ revision_id: revisionId, type: 'deploy', level: 'info', message: 'x', timestamp: now }).execute();
        }),
    },
  );
} else {
  console.log(`Kysely not found at ${kyselyArg}: its rows are skipped.`);
}

type KyselyLike = any;

const results = new Map<string, number[]>();
const ratios = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  let floorMicros = 0;
  for (const { name, call } of cases) {
    for (let i = 0; i < 200; i++) await call();
    const start = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) await call();
    const micros = Number(process.hrtime.bigint() - start) / 1000 / CALLS;
    if (name === cases[0]!.name) floorMicros = micros;
    results.set(name, [...(results.get(name) ?? []), micros]);
    ratios.set(name, [...(ratios.get(name) ?? []), micros / floorMicros]);
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(
  `SQLite (synchronous=NORMAL), ${CALLS} calls × ${ROUNDS} rounds; median µs per call, median per-round ratio to the floor; load average ${(await import('node:os')).loadavg()[0]!.toFixed(2)}`,
);
for (const [name, values] of results) console.log(`${median(values).toFixed(2).padStart(8)} µs  ${median(ratios.get(name)!).toFixed(2)}× floor  ${name}`);
store.close();
