import type Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { requestScope } from '../../server/lib/request-scope.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/**
 * Each statement the SQLite connection runs from now on for a request (in a request's scope: not the
 * background workers'), as `VERB table` (the SQL's first verb and the table it names).
 */
function traceStatements(db: Database.Database): { seen: string[]; stop: () => void } {
  const seen: string[] = [];
  // Every prepared statement shares one prototype: wrapping its methods sees every statement run.
  const proto = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = proto[method]!;
    originals.set(method, original);
    proto[method] = function (this: Database.Statement, ...args: unknown[]) {
      if (requestScope()) seen.push(described(this.source));
      return original.apply(this, args);
    };
  }
  return { seen, stop: () => originals.forEach((original, method) => (proto[method] = original)) };
}

function described(sql: string): string {
  const text = sql.replace(/\s+/g, ' ').trim();
  const verb = text.split(' ')[0]!.toUpperCase();
  // A SELECT's own table is its last FROM (its scalar subqueries come before it); a write's, the one it names first.
  const table = verb === 'SELECT' ? [...text.matchAll(/\bFROM\s+(\w+)/gi)].at(-1)?.[1] : /\b(?:INTO|FROM|UPDATE)\s+(\w+)/i.exec(text)?.[1];
  return table ? `${verb} ${table}` : verb;
}

/**
 * What one create runs on SQLite, statement for statement: the list the row-for-row bare baseline
 * (bench/baselines/http-sqlite.mjs, BASELINE_SAME_ROWS) is measured against. A statement added to
 * the create fails here, so that the baseline and docs/decisions/hot-paths-round-5-create.md are
 * looked at again, instead of the ratio drifting unexplained.
 */
describe("a create's statements on SQLite", () => {
  let t: App | undefined;
  afterEach(() => t?.close());

  it("one read (the integration, with the serving listener's compute type), then one transaction: the three rows, the first step and its log line, the audit entry", async () => {
    t = await inProcessApp({ stageMs: 3_600_000 });
    const fx = await workspaceFixtures(t.api);
    // The key check and the statements' preparation are behind us: the steady state is measured.
    expect((await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).status).toBe(201);
    const trace = traceStatements(t.store.db);
    try {
      const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
      expect(created.status).toBe(201);
    } finally {
      trace.stop();
    }
    expect(trace.seen).toEqual([
      'SELECT github_integrations',
      'BEGIN',
      'INSERT deployments',
      'INSERT revisions',
      'INSERT revision_logs',
      'INSERT tracing_projects',
      'INSERT audit_events',
      'COMMIT',
    ]);
  });

  it('a name a deployment holds: 409, and its tracing project is left as it was (the adoption of a freed one: test/unit/deleted-names.test.ts)', async () => {
    t = await inProcessApp({ stageMs: 3_600_000 });
    const fx = await workspaceFixtures(t.api);
    const name = uniqueName();
    const first = await t.api.post('/v2/deployments', githubBody(name, fx.integrationId));
    const projects = () => t!.sql.all('SELECT id, deployment_id, created_at FROM tracing_projects WHERE name = ?', name);
    const before = await projects();
    expect(before).toEqual([expect.objectContaining({ deployment_id: first.body.id })]);
    const taken = await t.api.post('/v2/deployments', githubBody(name, fx.integrationId));
    expect(taken.status).toBe(409);
    expect(await projects()).toEqual(before);
    expect(await t.sql.all('SELECT id FROM deployments WHERE name = ?', name)).toEqual([{ id: first.body.id }]);
  });
});
