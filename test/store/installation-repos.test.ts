import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreBackend } from '../../server/store/backend.ts';
import { BACKENDS, openTestBackend } from '../helpers/backends.ts';

/** The repositories GitHub reported per installation, on both databases (ids are 64-bit integers). */
for (const kind of BACKENDS) {
  describe(`installation repositories: ${kind}`, () => {
    let backend: StoreBackend;
    beforeAll(async () => {
      backend = await openTestBackend(kind);
    });
    afterAll(async () => {
      await backend?.close();
    });

    const repo = (id: number, name: string) => ({ repo_id: id, name, owner: 'acme', url: `https://github.com/acme/${name}`, default_branch: 'main' });

    it('removes the repositories named by id, keeps the others, and lists them in byte order', async () => {
      const installation = 9_007_199_254_740; // beyond 32 bits
      await backend.installationRepos.upsertRepos(installation, [repo(3, 'b'), repo(2, 'B'), repo(4_294_967_297, 'a')], '2026-11-26T00:00:00.000Z', false);
      await backend.installationRepos.removeRepos(installation, [2]);
      expect((await backend.installationRepos.listRepos(installation)).map((r) => [r.repo_id, r.name])).toEqual([
        [4_294_967_297, 'a'],
        [3, 'b'],
      ]);
      await backend.installationRepos.removeRepos(installation, [4_294_967_297, 3]);
      expect(await backend.installationRepos.listRepos(installation)).toEqual([]);
    });
  });
}
