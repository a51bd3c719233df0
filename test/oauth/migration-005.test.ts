import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { sqliteDialect } from '../../server/store/dialect.ts';
import { MIGRATIONS } from '../../server/store/migrations/index.ts';
import { openSqliteStore } from '../../server/store/sqlite.ts';

/**
 * Migration 5 rebuilds the three OAuth tables (nullable client secret, tokens and flows per
 * workspace). A database made by migrations 1–3 with real rows in them is upgraded in a real
 * SQLite file, and every row must still be there, in its organization's default workspace, with
 * its references intact.
 */
describe('migration 5 (OAuth tokens and flows per workspace)', () => {
  it('keeps every provider, token and flow, puts them in the default workspace, and keeps the references', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cp-mig5-')), 'db.sqlite');
    const db = new Database(path);
    db.pragma('foreign_keys = ON');
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const migration of MIGRATIONS.filter((m) => m.version <= 3)) {
      db.exec(migration.sql(sqliteDialect.schema));
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.version, migration.name, new Date().toISOString());
    }
    const now = new Date().toISOString();
    db.prepare("INSERT INTO organizations VALUES ('org', 'org', ?)").run(now);
    db.prepare("INSERT INTO workspaces VALUES ('ws-default', 'org', 'default', 1, ?)").run(now);
    db.prepare("INSERT INTO workspaces VALUES ('ws-other', 'org', 'other', 0, ?)").run(now);
    db.prepare(
      `INSERT INTO oauth_providers VALUES ('prov', 'org', 'github', 'GitHub', 'cid', 'v1:sealed', 'https://idp.example/a', 'https://idp.example/t', 1, 'S256', 'client_secret_post', ?, ?)`,
    ).run(now, now);
    db.prepare(`INSERT INTO oauth_tokens VALUES ('tok', 'org', 'prov', 'alice', '', '["repo"]', 'v1:at', 'v1:rt', 'Bearer', NULL, ?, ?)`).run(now, now);
    db.prepare(
      `INSERT INTO oauth_flows VALUES ('flow', 'org', 'prov', 'hash', 'alice', '', '["repo"]', 'http://localhost/v2/auth/callback', NULL, 'completed', NULL, NULL, 'tok', ?, ?, ?)`,
    ).run(now, now, now);
    db.close();

    const store = openSqliteStore({ path, secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL' });
    try {
      const after = store.db;
      expect(after.prepare('SELECT version FROM schema_migrations WHERE version = 5').get()).toBeDefined();
      expect(after.prepare('SELECT provider_id, client_secret_sealed, provider_type FROM oauth_providers').all()).toEqual([
        { provider_id: 'github', client_secret_sealed: 'v1:sealed', provider_type: null },
      ]);
      expect(after.prepare('SELECT id, workspace_id, user_id, is_default, provider_account_label FROM oauth_tokens').all()).toEqual([
        { id: 'tok', workspace_id: 'ws-default', user_id: 'alice', is_default: 1, provider_account_label: null },
      ]);
      expect(after.prepare('SELECT id, workspace_id, status, token_ref FROM oauth_flows').all()).toEqual([
        { id: 'flow', workspace_id: 'ws-default', status: 'completed', token_ref: 'tok' },
      ]);
      expect(after.pragma('foreign_key_check')).toEqual([]);
      // The references point at the new tables: deleting the provider still takes its tokens and flows.
      const sql = (after.prepare("SELECT group_concat(sql, ' ') AS s FROM sqlite_master WHERE name IN ('oauth_tokens', 'oauth_flows')").get() as { s: string })
        .s;
      expect(sql).not.toMatch(/_v5/);
      after.prepare("DELETE FROM oauth_providers WHERE id = 'prov'").run();
      expect(after.prepare('SELECT count(*) AS n FROM oauth_tokens').get()).toEqual({ n: 0 });
      expect(after.prepare('SELECT count(*) AS n FROM oauth_flows').get()).toEqual({ n: 0 });
      // One token per (provider, workspace, user, agent): the same user in two workspaces is allowed now.
      after
        .prepare(
          `INSERT INTO oauth_providers (id, organization_id, provider_id, name, client_id, client_secret_sealed, auth_url, token_url, uses_pkce, code_challenge_method, token_endpoint_auth_method, created_at, updated_at)
         VALUES ('p2', 'org', 'p2', 'p2', 'c', NULL, 'https://a', 'https://t', 1, 'S256', 'none', ?, ?)`,
        )
        .run(now, now);
      const insert = after.prepare(
        `INSERT INTO oauth_tokens (id, organization_id, workspace_id, provider_ref, user_id, agent_id, scopes, access_token_sealed, created_at, updated_at) VALUES (?, 'org', ?, 'p2', 'alice', '', '[]', 'v1:x', ?, ?)`,
      );
      insert.run('t1', 'ws-default', now, now);
      insert.run('t2', 'ws-other', now, now);
      expect(() => insert.run('t3', 'ws-other', now, now)).toThrow(/UNIQUE/);
    } finally {
      store.close();
    }
  });
});
