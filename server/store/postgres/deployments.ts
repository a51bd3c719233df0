import type { SecretBox } from '../../crypto/secret-box.ts';
import { type CreateStatements, SqlDeploymentStore } from '../deployments.ts';
import type { StoreRules } from '../rules.ts';
import type { PgDb } from './db.ts';

/**
 * Deployments on PostgreSQL, with the create sent as one pipeline (`PgDb.batch`): its statements,
 * the audit entry and the commit in one round trip instead of eight. A create is the API's most
 * frequent write, and on PostgreSQL each round trip is a socket write that wakes a backend process
 * and a read that wakes ours; with several server processes on few cores those wake-ups were most
 * of the difference (docs/decisions/postgresql-pipelined-create.md). Its texts are fixed, so they
 * go as prepared statements: parsed and planned once per connection, not once per create.
 */
export class PgDeploymentStore extends SqlDeploymentStore {
  readonly #db: PgDb;

  constructor(db: PgDb, box: SecretBox, rules?: StoreRules) {
    super(db, box, rules);
    this.#db = db;
  }

  protected override async writeCreate(statements: CreateStatements): Promise<boolean> {
    const results = await this.#db.batch(statements, { prepared: true });
    const revision = statements.revision ? results[statements.indexOf(statements.revision)] : undefined;
    return (revision?.rows[0] as { runner_id: string | null } | undefined)?.runner_id != null;
  }
}
