import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { postgresDialect } from '../../server/store/dialect.ts';
import { migrate, numbered, PgDb } from '../../server/store/postgres/db.ts';
import { hotQueries } from '../../server/store/queries/hot-paths.ts';
import { leaseQueries } from '../../server/store/queries/leases.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * Migration 25 on PostgreSQL: the deployments' listener and repository indexes hold only the rows
 * that name one, and the statements that seek them still can (PostgreSQL proves `column = $1`
 * implies NOT NULL, for a generic plan too). SQLite's plans are test/unit/query-plans.test.ts's.
 */
describe('the partial deployment indexes (migration 25) on PostgreSQL', () => {
  let db: PgDb;
  const hot = hotQueries(postgresDialect);
  const leases = leaseQueries(postgresDialect);

  beforeAll(async () => {
    db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 1 });
    await migrate(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  it('holds only the deployments naming a listener or a repository', async () => {
    const defs = await db.rows<{ indexname: string; indexdef: string }>(
      "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN ('deployments_by_listener', 'deployments_by_repo') ORDER BY indexname",
    );
    expect(defs.map((d) => [d.indexname, d.indexdef.replace(/^.* WHERE /, '')])).toEqual([
      ['deployments_by_listener', '(listener_id IS NOT NULL)'],
      ['deployments_by_repo', '(repo_url_key IS NOT NULL)'],
    ]);
  });

  it('the seeks by listener and by repository use them, as generic (prepared) plans too', async () => {
    // The tables are empty: without sequential scans the plan shows whether the index CAN answer.
    const plan = async (sql: string, values: string[]) => {
      // `?` or `@name` placeholders as `$n`, each name numbered at its first use.
      const names: string[] = [];
      const text = numbered(sql).replace(/@(\w+)/g, (_, name: string) => {
        if (!names.includes(name)) names.push(name);
        return `$${names.indexOf(name) + 1}`;
      });
      return db.tx(async (tx) => {
        await tx.run('SET LOCAL enable_seqscan = off');
        await tx.run("SET LOCAL plan_cache_mode = 'force_generic_plan'");
        await tx.run(`PREPARE probe AS ${text}`);
        try {
          const rows = await tx.rows<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE probe(${values.map((v) => `'${v}'`).join(', ')})`);
          return rows.map((r) => r['QUERY PLAN']).join('\n');
        } finally {
          await tx.run('DEALLOCATE probe');
        }
      });
    };
    expect(await plan(hot.deploymentsByRepo, ['github.com/acme/agent'])).toMatch(/Index Scan using deployments_by_repo/);
    expect(await plan('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1', ['listener-1'])).toMatch(/Index (Only )?Scan using deployments_by_listener/);
    expect(await plan(leases.servedInStatus, ['listener-1', 'READY'])).toMatch(/Index Scan using deployments_by_listener/);
  });
});
