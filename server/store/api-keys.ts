import type { ApiKey } from '../../shared/schemas/api-key.ts';
import { hotQueries } from './queries/hot-paths.ts';
import { toApiKey } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { ApiKeyRecord } from './types.ts';

/** An organization's API keys, stored by hash (the bootstrap key is written by `WorkspaceStore.bootstrap`). */
export interface ApiKeyStore {
  findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  createApiKey(input: ApiKey & { key_hash: string }): Promise<void>;
  listApiKeys(organizationId: string): Promise<ApiKey[]>;
  revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean>;
}

export class SqlApiKeyStore extends SqlStore implements ApiKeyStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = await this.sql.row(this.#hot.apiKeyByHash, [keyHash]);
    return row ? { ...toApiKey(row), revoked: row.revoked_at !== null, key_hash: row.key_hash as string } : null;
  }

  async createApiKey(input: ApiKey & { key_hash: string }): Promise<void> {
    await this.sql.run('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      input.id,
      input.organization_id,
      input.workspace_id,
      input.key_hash,
      input.description,
      input.created_at,
    ]);
  }

  async listApiKeys(organizationId: string): Promise<ApiKey[]> {
    const rows = await this.sql.rows('SELECT * FROM api_keys WHERE organization_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, rowid DESC', [
      organizationId,
    ]);
    return rows.map(toApiKey);
  }

  async revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean> {
    return (
      (await this.sql.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND organization_id = ? AND revoked_at IS NULL', [now, id, organizationId])) === 1
    );
  }
}
