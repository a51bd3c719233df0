import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { Conflict } from '../../server/domain/errors.ts';
import { DOMAIN_STORE_RULES } from '../../server/domain/store-rules.ts';
import { GroupCommit } from '../../server/store/group-commit.ts';
import { openSqliteStore, type SqliteStore } from '../../server/store/sqlite.ts';
import type { Deployment, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';

/**
 * SQLite's group commit (server/store/group-commit.ts) on a real database file: creates asked for
 * together share one transaction, so one wait for the disk, and each keeps its own outcome.
 */
const NOW = '2026-01-01T00:00:00.000Z';
const revisionConfig = {
  repo_ref: null,
  graph_config_path: null,
  langgraph_config_path: null,
  image_uri: 'registry.example.com/agent:1',
  source_tarball_path: null,
  repo_commit_sha: null,
} as unknown as SourceRevisionConfig;

describe('group commit', () => {
  const dirs: string[] = [];
  const tempFile = () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-group-'));
    dirs.push(dir);
    return join(dir, 'control-plane.db');
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Counts the outermost transactions begun through any `db.transaction` function made while it is
   * on (a nested one is a savepoint of its outer one): the store makes some of its transaction
   * functions once, when it opens, so the count is set up before the store is opened.
   */
  function countTransactions(): { count: () => number; savepoints: () => number; stop: () => void } {
    let outer = 0;
    let nested = 0;
    const original = Database.prototype.transaction;
    Database.prototype.transaction = function (this: Database.Database, fn: (...args: never[]) => unknown) {
      const tx = original.call(this, fn);
      return Object.assign((...args: never[]) => {
        if (!this.inTransaction) outer += 1;
        else nested += 1;
        return tx(...args);
      }, tx);
    } as typeof original;
    return { count: () => outer, savepoints: () => nested, stop: () => void (Database.prototype.transaction = original) };
  }

  /** The real store on a file of its own, with `synchronous=FULL` as the server opens it. */
  const openStore = () => openSqliteStore({ path: tempFile(), secretBox: new SecretBox(randomBytes(32)), synchronous: 'FULL', rules: DOMAIN_STORE_RULES });
  const workspaceOf = async (store: SqliteStore) => (await store.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: NOW })).workspaceId;

  function create(store: SqliteStore, tenantId: string, name: string) {
    const deploymentId = crypto.randomUUID();
    const revisionId = crypto.randomUUID();
    return store.createDeployment({
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
      revision: { id: revisionId, trigger: 'create', source_revision_config: revisionConfig, secrets: [], resource_spec: null, status: 'AWAITING_DEPLOY' },
      tracingProject: { id: crypto.randomUUID(), name, tenant_id: tenantId, deployment_id: deploymentId, created_at: NOW },
    });
  }

  it('20 creates asked for together commit in one transaction, with no savepoint per create', async () => {
    const transactions = countTransactions();
    const store = openStore();
    try {
      const ws = await workspaceOf(store);
      const before = transactions.count();
      const savepointsBefore = transactions.savepoints();
      const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => create(store, ws, `together-${i}`)));
      expect(outcomes.map((o) => o.status)).toEqual(Array(20).fill('fulfilled'));
      expect(transactions.count() - before).toBe(1);
      expect(transactions.savepoints() - savepointsBefore).toBe(0);
      expect((store.db.prepare('SELECT COUNT(*) AS n FROM revisions').get() as { n: number }).n).toBe(20);
    } finally {
      transactions.stop();
      store.close();
    }
  });

  it('20 creates asked for together, one whose name is taken: it fails alone (the group redone a savepoint per create), the 19 others commit whole', async () => {
    const transactions = countTransactions();
    const store = openStore();
    try {
      const ws = await workspaceOf(store);
      const before = transactions.count();
      const savepointsBefore = transactions.savepoints();
      const names = Array.from({ length: 20 }, (_, i) => (i === 7 ? 'group-3' : `group-${i}`));
      const outcomes = await Promise.allSettled(names.map((name) => create(store, ws, name)));
      // The first pass, rolled back at the refused create, and the pass one savepoint per create that commits.
      expect(transactions.count() - before).toBe(2);
      expect(transactions.savepoints() - savepointsBefore).toBe(20);
      const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [{ i, reason: o.reason as unknown }] : []));
      // The later of the two creates named group-3 (index 7) is the one refused, with the API's 409.
      expect(failed.map((f) => f.i)).toEqual([7]);
      expect(failed[0]!.reason).toBeInstanceOf(Conflict);
      const stored = store.db.prepare('SELECT name FROM deployments ORDER BY name').all() as Array<{ name: string }>;
      expect(stored.map((r) => r.name)).toEqual(names.filter((_, i) => i !== 7).sort());
      expect((store.db.prepare('SELECT COUNT(*) AS n FROM revisions').get() as { n: number }).n).toBe(19);
      expect((store.db.prepare('SELECT COUNT(*) AS n FROM tracing_projects').get() as { n: number }).n).toBe(19);
      // Asked for one after the other, each is its own transaction, as without grouping.
      await create(store, ws, 'alone-1');
      await create(store, ws, 'alone-2');
      expect(transactions.count() - before).toBe(4);
    } finally {
      transactions.stop();
      store.close();
    }
  });

  it('a write that fails after its first statement: none of its statements is stored, every other write of the group is, whatever its place', async () => {
    const db = new Database(tempFile());
    try {
      db.exec('CREATE TABLE t (name TEXT PRIMARY KEY)');
      const group = new GroupCommit(db);
      const insert = db.prepare('INSERT INTO t VALUES (?)');
      // Two rows each; the third write's second row is the first write's: refused after its first row went in.
      const pair = (a: string, b: string) => () => {
        insert.run(a);
        insert.run(b);
      };
      const outcomes = await Promise.allSettled([
        group.run(pair('a1', 'a2')),
        group.run(pair('b1', 'b2')),
        group.run(pair('c1', 'a1')),
        group.run(pair('d1', 'd2')),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
      expect(db.prepare('SELECT name FROM t ORDER BY name').all()).toEqual(['a1', 'a2', 'b1', 'b2', 'd1', 'd2'].map((name) => ({ name })));
      expect(db.inTransaction).toBe(false);
    } finally {
      db.close();
    }
  });

  it('when SQLite abandons the transaction, every write of the group is refused and none is stored; the next group commits', async () => {
    const db = new Database(tempFile());
    try {
      db.exec('CREATE TABLE t (name TEXT PRIMARY KEY)');
      const group = new GroupCommit(db);
      const insert = (name: string) => () => void db.prepare('INSERT INTO t VALUES (?)').run(name);
      // Simulated: what SQLite does on some I/O errors and a full disk mid-transaction, it rolls
      // the whole transaction back, here done by hand before the error is thrown.
      const abandon = () => {
        db.exec('ROLLBACK');
        throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      };
      const outcomes = await Promise.allSettled([group.run(insert('a')), group.run(abandon), group.run(insert('c'))]);
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
      for (const o of outcomes) expect((o as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_FULL' });
      expect(db.prepare('SELECT name FROM t').all()).toEqual([]);
      expect(db.inTransaction).toBe(false);
      const next = await Promise.allSettled([group.run(insert('d')), group.run(insert('e'))]);
      expect(next.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
      expect(db.prepare('SELECT name FROM t ORDER BY name').all()).toEqual([{ name: 'd' }, { name: 'e' }]);
    } finally {
      db.close();
    }
  });
});
