import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import type { StoreBackend } from '../../server/store/backend.ts';
import { openStore } from '../../server/store/open.ts';
import type { SqliteStore } from '../../server/store/sqlite.ts';
import { BACKENDS, testDatabaseUrl } from '../helpers/backends.ts';

/**
 * The `jti` rule in the store itself, on both backends: however many exchanges of one token race,
 * one key is stored. On PostgreSQL they race over two pools (two processes' worth); SQLite serves
 * one process through one connection, whose transactions span awaits, so there they race on it
 * (two connections in one thread would block each other's synchronous lock wait).
 */
describe.each(BACKENDS)('keyless CI storage on %s', (kind) => {
  async function twoConnections(): Promise<[StoreBackend, StoreBackend, string]> {
    const url = kind === 'postgres' ? await testDatabaseUrl('postgres') : join(mkdtempSync(join(tmpdir(), 'jti-')), 'cp.db');
    const secretBox = new SecretBox(randomBytes(32));
    const first = await openStore(url, { secretBox, synchronous: 'NORMAL' });
    const second = kind === 'postgres' ? await openStore(url, { secretBox, synchronous: 'NORMAL' }) : first;
    const boot = await (first.core as SqliteStore).bootstrap({
      keyHash: hashApiKey(`k-${crypto.randomUUID()}`),
      keyId: crypto.randomUUID(),
      now: new Date().toISOString(),
    });
    return [first, second, boot.workspaceId];
  }

  function mintInput(workspace: { id: string; organization_id: string }, jti: string, jtiExpiresAt: string, now = new Date().toISOString()) {
    return {
      jti,
      jtiExpiresAt,
      now,
      key: {
        id: crypto.randomUUID(),
        organization_id: workspace.organization_id,
        workspace_id: workspace.id,
        key_hash: hashApiKey(crypto.randomUUID()),
        description: 'minted',
        created_at: now,
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        minted_for: JSON.stringify({ jti }),
      },
    };
  }

  it('stores one key for one jti across two connections racing, and forgets jtis once their tokens expired', async () => {
    const [first, second, workspaceId] = await twoConnections();
    try {
      const workspace = (await first.core.getWorkspace(workspaceId))!;
      const jti = crypto.randomUUID();
      const later = new Date(Date.now() + 600_000).toISOString();
      const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? first : second).githubTrust.mintKey(mintInput(workspace, jti, later))));
      expect(outcomes.filter((o) => o === 'minted')).toHaveLength(1);
      const minted = (await first.core.listApiKeys(workspace.organization_id)).filter((k) => k.github_actions?.jti === jti);
      expect(minted).toHaveLength(1);
      expect(minted[0]!.expires_at).toBeDefined();

      // A jti whose token expired is forgotten by the next mint (the token itself is refused as expired by then).
      const old = crypto.randomUUID();
      expect(await first.githubTrust.mintKey(mintInput(workspace, old, new Date(Date.now() - 1000).toISOString()))).toBe('minted');
      expect(await second.githubTrust.mintKey(mintInput(workspace, crypto.randomUUID(), later))).toBe('minted');
      expect(await second.githubTrust.mintKey(mintInput(workspace, old, later))).toBe('minted');
      expect(await first.githubTrust.mintKey(mintInput(workspace, jti, later))).toBe('jti-used');
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('keeps trust entries per workspace and finds them by repository id across workspaces', async () => {
    const [first, second, workspaceId] = await twoConnections();
    try {
      const entry = {
        id: crypto.randomUUID(),
        workspace_id: workspaceId,
        repository_id: 9_007_199_254_740_991,
        repository_owner_id: 77,
        ref: 'refs/heads/main',
        environment: null,
        job_workflow_ref: null,
        description: null,
        created_at: new Date().toISOString(),
      };
      await first.githubTrust.create(entry);
      expect(await second.githubTrust.forRepository('9007199254740991')).toEqual([entry]);
      expect(await second.githubTrust.forRepository('9007199254740990')).toEqual([]);
      expect(await second.githubTrust.list(workspaceId)).toEqual([entry]);
      expect(await second.githubTrust.remove(crypto.randomUUID(), entry.id)).toBe(false);
      expect(await second.githubTrust.remove(workspaceId, entry.id)).toBe(true);
      expect(await first.githubTrust.list(workspaceId)).toEqual([]);
    } finally {
      await first.close();
      await second.close();
    }
  });
});
