import type { GithubTrust } from '../../../shared/schemas/github-trust.ts';
import { keyValues, toGithubTrust, TRUST_SQL, trustValues, type GithubTrustStore, type MintedKeyRow, type MintOutcome } from '../github-trust.ts';
import type { PgDb } from './db.ts';

/** Keyless CI's storage on PostgreSQL (mirrors `../github-trust.ts`; the same statements). */
export class PgGithubTrustStore implements GithubTrustStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async create(entry: GithubTrust): Promise<void> {
    await this.#db.run(TRUST_SQL.insert, trustValues(entry));
  }

  async list(tenantId: string): Promise<GithubTrust[]> {
    return (await this.#db.rows(TRUST_SQL.list, [tenantId])).map(toGithubTrust);
  }

  async remove(tenantId: string, id: string): Promise<boolean> {
    return (await this.#db.run(TRUST_SQL.remove, [tenantId, id])) > 0;
  }

  async forRepository(repositoryId: string): Promise<GithubTrust[]> {
    return (await this.#db.rows(TRUST_SQL.forRepository, [repositoryId])).map(toGithubTrust);
  }

  async mintKey(input: { jti: string; jtiExpiresAt: string; now: string; key: MintedKeyRow }): Promise<MintOutcome> {
    const db = this.#db;
    // The primary key on `jti` decides between processes: of two exchanges of one token, the
    // second's insert waits for the first's commit and then inserts nothing.
    return db.tx(async (c) => {
      await db.run(TRUST_SQL.forgetExpiredJtis, [input.now], c);
      if ((await db.run(TRUST_SQL.useJti, [input.jti, input.jtiExpiresAt], c)) === 0) return 'jti-used';
      await db.run(TRUST_SQL.insertKey, keyValues(input.key), c);
      return 'minted';
    });
  }
}
