import type { ApiKey } from '../../shared/schemas/api-key.ts';
import type { GithubTrust } from '../../shared/schemas/github-trust.ts';
import { SqlStore } from './sql-store.ts';

/** A key minted from an ID token, as stored: its hash, when it ends, and the claims (JSON) it was minted for. */
export type MintedKeyRow = Omit<ApiKey, 'expires_at' | 'github_actions'> & { key_hash: string; expires_at: string; minted_for: string };

/** What `mintKey` did: the key was stored, or the token's `jti` had been exchanged before (nothing stored). */
export type MintOutcome = 'minted' | 'jti-used';

/**
 * Storage of keyless CI (contract section 13): the trust entries of each workspace, the `jti`s
 * already exchanged, and the keys minted from them (in `api_keys`, where every key lives, so the
 * ordinary look-up, listing and revocation apply to them).
 */
export interface GithubTrustStore {
  create(entry: GithubTrust): Promise<void>;
  list(tenantId: string): Promise<GithubTrust[]>;
  /** False when the workspace has no such entry. */
  remove(tenantId: string, id: string): Promise<boolean>;
  /** Every workspace's entries for this repository id (a decimal string, as the token carries it). */
  forRepository(repositoryId: string): Promise<GithubTrust[]>;
  /**
   * In one transaction: records `jti` as used until `jtiExpiresAt` and stores the key, or stores
   * nothing when the `jti` was recorded before (by any process on the database). Forgets `jti`s
   * whose tokens expired before `now`.
   */
  mintKey(input: { jti: string; jtiExpiresAt: string; now: string; key: MintedKeyRow }): Promise<MintOutcome>;
}

/** A stored entry row as the API shows it (ids are kept as text: 64-bit numbers, compared exactly). */
export function toGithubTrust(row: Record<string, unknown>): GithubTrust {
  return {
    id: row.id as string,
    workspace_id: row.tenant_id as string,
    repository_id: Number(row.repository_id),
    repository_owner_id: Number(row.repository_owner_id),
    ref: (row.ref as string | null) ?? null,
    environment: (row.environment as string | null) ?? null,
    job_workflow_ref: (row.job_workflow_ref as string | null) ?? null,
    description: (row.description as string | null) ?? null,
    created_at: row.created_at as string,
  };
}

const TRUST_SQL = {
  insert: `INSERT INTO github_trust_entries (id, tenant_id, repository_id, repository_owner_id, ref, environment, job_workflow_ref, description, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  list: 'SELECT * FROM github_trust_entries WHERE tenant_id = ? ORDER BY created_at, id',
  remove: 'DELETE FROM github_trust_entries WHERE tenant_id = ? AND id = ?',
  forRepository: 'SELECT * FROM github_trust_entries WHERE repository_id = ? ORDER BY created_at, id',
  forgetExpiredJtis: 'DELETE FROM github_oidc_used_jti WHERE expires_at < ?',
  useJti: 'INSERT INTO github_oidc_used_jti (jti, expires_at) VALUES (?, ?) ON CONFLICT (jti) DO NOTHING',
  insertKey: `INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at, expires_at, minted_for)
              VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
} as const;

function trustValues(entry: GithubTrust): unknown[] {
  return [
    entry.id,
    entry.workspace_id,
    String(entry.repository_id),
    String(entry.repository_owner_id),
    entry.ref,
    entry.environment,
    entry.job_workflow_ref,
    entry.description,
    entry.created_at,
  ];
}

function keyValues(key: MintedKeyRow): unknown[] {
  return [key.id, key.organization_id, key.workspace_id, key.key_hash, key.description, key.created_at, key.expires_at, key.minted_for];
}

/** Keyless CI's storage, on either database. */
export class SqlGithubTrustStore extends SqlStore implements GithubTrustStore {
  async create(entry: GithubTrust): Promise<void> {
    await this.sql.run(TRUST_SQL.insert, trustValues(entry));
  }

  async list(tenantId: string): Promise<GithubTrust[]> {
    return (await this.sql.rows(TRUST_SQL.list, [tenantId])).map(toGithubTrust);
  }

  async remove(tenantId: string, id: string): Promise<boolean> {
    return (await this.sql.run(TRUST_SQL.remove, [tenantId, id])) > 0;
  }

  async forRepository(repositoryId: string): Promise<GithubTrust[]> {
    return (await this.sql.rows(TRUST_SQL.forRepository, [repositoryId])).map(toGithubTrust);
  }

  async mintKey(input: { jti: string; jtiExpiresAt: string; now: string; key: MintedKeyRow }): Promise<MintOutcome> {
    // The primary key on `jti` decides between processes: of two exchanges of one token, the
    // second's insert waits for the first's commit and then inserts nothing.
    return this.sql.tx(async (tx) => {
      await tx.run(TRUST_SQL.forgetExpiredJtis, [input.now]);
      if ((await tx.run(TRUST_SQL.useJti, [input.jti, input.jtiExpiresAt])) === 0) return 'jti-used';
      await tx.run(TRUST_SQL.insertKey, keyValues(input.key));
      return 'minted';
    });
  }
}
