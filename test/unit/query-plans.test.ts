import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOT_QUERIES } from '../../server/store/queries/hot-paths.ts';
import { LEASE_QUERIES } from '../../server/store/queries/leases.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/**
 * Every hot statement (server/store/queries/) must be an index seek whatever the history:
 * the plans are read on a database where one deployment has 2,000 past revisions, the shape in
 * which the webhook's commit check and the pipeline's in-progress count used to read them all.
 */
describe('query plans of the hot statements', () => {
  let app: App;
  let deploymentId: string;
  const pastCommits: string[] = [];

  beforeAll(async () => {
    // SQLite's query planner is the subject here, whichever backend the suite runs on.
    app = await inProcessApp({ stageMs: 3_600_000, path: ':memory:' });
    const fx = await workspaceFixtures(app.api);
    const created = await app.api.post(
      '/v2/deployments',
      githubBody(uniqueName('plans'), fx.integrationId, {
        source_config: { integration_id: fx.integrationId, repo_url: 'https://github.com/acme/agent', build_on_push: true },
      }),
    );
    expect(created.status).toBe(201);
    deploymentId = created.body.id;
    // 2,000 past push revisions, inserted the way the store inserts them (commit in the JSON and its column).
    const db = app.store.db;
    const first = db.prepare('SELECT * FROM revisions WHERE deployment_id = ?').get(deploymentId) as Record<string, unknown>;
    const insert = db.prepare(
      `INSERT INTO revisions (id, deployment_id, tenant_id, status, source, source_revision_config, commit_sha, secrets, trigger, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'push', ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 2000; i += 1) {
        const sha = randomBytes(20).toString('hex');
        pastCommits.push(sha);
        const config = { ...JSON.parse(first.source_revision_config as string), repo_commit_sha: sha };
        insert.run(
          crypto.randomUUID(),
          deploymentId,
          first.tenant_id,
          i % 2 ? 'DEPLOYED' : 'SKIPPED',
          first.source,
          JSON.stringify(config),
          sha,
          first.secrets,
          first.created_at,
          first.created_at,
        );
      }
    })();
  });
  afterAll(() => app?.close());

  const plan = (sql: string) => {
    // Positional (?) or named (@name) parameters, each bound to a placeholder value.
    const named = Object.fromEntries([...sql.matchAll(/@(\w+)/g)].map((m) => [m[1]!, 'x']));
    const params = Object.keys(named).length > 0 ? [named] : Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 'x');
    return (app.store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((row) => row.detail);
  };

  /**
   * Scans that do not grow with history: the JSON list a statement is given (a stage change's
   * allowed "from" statuses), and the partial index that holds pending deliveries only (the work
   * itself, read in order up to the batch's limit), never the processed ones kept for the log.
   */
  const boundedScan = (step: string) => /^SCAN json_each VIRTUAL TABLE/.test(step) || step === 'SCAN webhook_deliveries USING INDEX webhook_deliveries_pending';

  for (const [name, sql] of Object.entries(HOT_QUERIES)) {
    it(`${name} is an index seek`, () => {
      const steps = plan(sql);
      expect(steps.length).toBeGreaterThan(0);
      for (const step of steps) {
        // A SCAN reads a whole table or index; every hot statement must SEARCH by a key instead.
        if (!boundedScan(step)) expect(step, `${name}: ${steps.join('; ')}`).not.toMatch(/^SCAN/);
        if (/^SEARCH/.test(step)) expect(step).toMatch(/USING (COVERING )?INDEX|USING INTEGER PRIMARY KEY|USING PRIMARY KEY/);
        // A seek on the deployment alone then reads every revision it ever had: that is the scan this test exists to catch.
        expect(step, `${name}: ${steps.join('; ')}`).not.toMatch(/revisions_by_deployment \(deployment_id=\?\)$/);
      }
    });
  }

  // The lease renewals and sweeps of every process: they may walk the partial indexes
  // that hold the work itself (unfinished revisions, deployments being deleted, uploads being
  // received) and the process leases (a row per process alive or dead for less than a lease),
  // never a whole table that grows with history.
  // The stalled-queue sweep's recursive CTE is read too: a row per deployment with a queued revision.
  const workIndexes =
    /^SCAN (\w+ )?USING (COVERING )?INDEX (revisions_unfinished|deployments_deleting|uploads_receiving)\b|^SCAN json_each VIRTUAL TABLE|^SCAN process_leases\b|^SCAN CONSTANT ROW$|^SCAN queued_deployments$/;
  for (const [name, sql] of Object.entries(LEASE_QUERIES)) {
    it(`lease statement ${name} reads only the work, never a whole table`, () => {
      const steps = plan(sql);
      // An INSERT of one row of VALUES reads nothing: SQLite has no plan to show for it.
      if (!/^INSERT INTO \w+ \([^)]*\) VALUES/.test(sql)) expect(steps.length).toBeGreaterThan(0);
      for (const step of steps) if (/^SCAN/.test(step)) expect(step, `${name}: ${steps.join('; ')}`).toMatch(workIndexes);
    });
  }

  it("the push commit check and the in-progress count use the indexes made for them, not the deployment's whole history", () => {
    expect(plan(HOT_QUERIES.revisionOfCommit).join('; ')).toMatch(/USING INDEX revisions_by_commit \(deployment_id=\? AND commit_sha=\?\)/);
    // (deployment_id=? AND status=?): one seek per in-progress status, never the queued backlog.
    expect(plan(HOT_QUERIES.inProgressCount).join('; ')).toMatch(/USING COVERING INDEX revisions_unfinished \(deployment_id=\? AND status=\?\)/);
    expect(plan(HOT_QUERIES.queued).join('; ')).toMatch(/USING INDEX revisions_unfinished \(deployment_id=\? AND status=\?\)/);
    // The stalled-queue sweep seeks from one deployment with a queued revision to the next, never
    // walking the queued revisions themselves (a backlog of queued PATCHes).
    const stalled = plan(LEASE_QUERIES.stalledQueuedDeployments);
    expect(stalled.join('; ')).toMatch(/SEARCH r USING COVERING INDEX revisions_queued \(deployment_id>\?\)/);
    expect(stalled.filter((step) => /^SCAN/.test(step) && /revisions/.test(step))).toEqual([]);
    // The silent-listener sweep and a heartbeat: from the listeners and the workspaces they are the
    // default of, never from every deployment naming no listener.
    expect(plan(LEASE_QUERIES.silentAgentListeners).join('; ')).toMatch(/^SEARCH listeners USING INDEX listeners_agents_by_last_seen/);
    // Migration 25 made both partial (WHERE … IS NOT NULL): a seek by value still uses them.
    expect(plan(HOT_QUERIES.deploymentsByRepo).join('; ')).toMatch(/USING INDEX deployments_by_repo \(repo_url_key=\?\)/);
    expect(plan('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1').join('; ')).toMatch(
      /USING (COVERING )?INDEX deployments_by_listener \(listener_id=\?\)/,
    );
    const served = plan(LEASE_QUERIES.servedInStatus).join('; ');
    expect(served).toMatch(/SEARCH deployments USING INDEX deployments_by_listener \(listener_id=\?\)/);
    expect(served).toMatch(
      /SEARCH w USING (COVERING )?INDEX workspaces_by_default_listener \(default_listener_id=\?\); SEARCH d USING INDEX deployments_by_tenant \(tenant_id=\?\)/,
    );
  });

  it('a commit already in the history is found through its column, and a new one is built', async () => {
    const again = await app.store.createPushRevision({
      deploymentId,
      revisionId: crypto.randomUUID(),
      commitSha: pastCommits[1234]!,
      now: new Date().toISOString(),
    });
    expect(again.outcome).toBe('exists');
    const sha = randomBytes(20).toString('hex');
    const fresh = await app.store.createPushRevision({ deploymentId, revisionId: crypto.randomUUID(), commitSha: sha, now: new Date().toISOString() });
    expect(fresh.outcome).toBe('created');
    const column = app.store.db.prepare('SELECT commit_sha FROM revisions WHERE deployment_id = ? ORDER BY seq DESC LIMIT 1').get(deploymentId) as {
      commit_sha: string;
    };
    expect(column.commit_sha).toBe(sha);
  });
});
