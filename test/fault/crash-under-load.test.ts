import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const TERMINAL = ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED'];
const TERMINAL_SQL = TERMINAL.map((s) => `'${s}'`).join(',');

/** What the client was told: a deployment it created, and the revisions its PATCHes created. */
type Acknowledged = { id: string; name: string; revisionIds: string[] };

function integrityCheck(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

function unfinishedRevisionIds(path: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare(`SELECT id FROM revisions WHERE status NOT IN (${TERMINAL_SQL})`).all() as Array<{ id: string }>).map((r) => r.id);
  } finally {
    db.close();
  }
}

/** Creates and patches deployments as fast as the server answers, until `stop()` says so. */
function loadClient(api: Api, ids: { integrationId: string; listenerId: string }, workers: number) {
  const acknowledged = new Map<string, Acknowledged>();
  let running = true;
  let failures = 0;
  const worker = async (w: number) => {
    for (let i = 0; running; i += 1) {
      try {
        const name = uniqueName(`crash${w}`);
        const created = await api.post('/v2/deployments', i % 2 === 0 ? githubBody(name, ids.integrationId) : dockerBody(name, ids.listenerId));
        if (created.status !== 201) throw new Error(`create answered ${created.status}`);
        const record: Acknowledged = { id: created.body.id, name, revisionIds: [created.body.latest_revision_id] };
        acknowledged.set(record.id, record);
        for (let p = 0; p < 2 && running; p += 1) {
          const patched = await api.patch(`/v2/deployments/${record.id}`, { secrets: [{ name: 'ROUND', value: `${w}-${i}-${p}` }] });
          if (patched.status !== 200) throw new Error(`patch answered ${patched.status}`);
          record.revisionIds.push(patched.body.latest_revision_id);
        }
      } catch {
        // The kill cuts requests off mid-flight; their outcome is unknown, so nothing is claimed for them.
        failures += 1;
        if (failures > 1000) return;
      }
    }
  };
  const done = Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  return {
    acknowledged,
    count: () => [...acknowledged.values()].reduce((n, a) => n + a.revisionIds.length, 0),
    stop: async () => {
      running = false;
      await done;
    },
  };
}

describe('SIGKILL under load', () => {
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill('SIGKILL');
  });

  it('keeps every acknowledged write, stays consistent, and finishes every unfinished revision', async () => {
    const first = await startServerProcess({ SANDBOX_STAGE_MS: '300' });
    servers.push(first);
    const api = apiClient(first.url, first.apiKey);
    const fx = await workspaceFixtures(api);

    const client = loadClient(api, fx, 8);
    // Kill while requests are in flight, once enough writes were acknowledged to be a real test.
    await eventually(async () => (client.count() >= 150 ? true : undefined), 20_000, 10);
    await first.kill('SIGKILL');
    await client.stop();
    const acknowledged = [...client.acknowledged.values()];
    expect(acknowledged.length).toBeGreaterThan(10);

    expect(integrityCheck(first.databasePath)).toBe('ok');
    const unfinished = unfinishedRevisionIds(first.databasePath);
    expect(unfinished.length).toBeGreaterThan(0);
    console.log(
      `crash under load: killed after ${client.count()} acknowledged writes on ${acknowledged.length} deployments; ${unfinished.length} revisions unfinished in the file`,
    );

    const second = await first.restart({ SANDBOX_STAGE_MS: '20' });
    servers.push(second);
    const after = apiClient(second.url, second.apiKey);

    for (const ack of acknowledged) {
      const deployment = await after.get(`/v2/deployments/${ack.id}`);
      expect(deployment.status).toBe(200);
      expect(deployment.body.name).toBe(ack.name);
      const projects = await after.get(`/v1/tracing-projects?name=${ack.name}`);
      expect(projects.body.resources).toEqual([expect.objectContaining({ name: ack.name, deployment_id: ack.id })]);
      for (const revisionId of ack.revisionIds) {
        const revision = await after.get(`/v2/deployments/${ack.id}/revisions/${revisionId}`);
        expect(revision.status).toBe(200);
        expect(revision.body.deployment_id).toBe(ack.id);
      }
    }

    // Every deployment in the file (acknowledged or not) drains: all revisions end; the newest is
    // deployed, live, and is the deployment's latest and active revision.
    const all: Array<{ id: string }> = [];
    for (let offset = 0; ; ) {
      const page = await after.get(`/v2/deployments?limit=100&offset=${offset}`);
      all.push(...page.body.resources);
      if (page.body.resources.length < 100) break;
      offset = page.body.offset;
    }
    expect(all.length).toBeGreaterThanOrEqual(acknowledged.length);
    for (const { id } of all) {
      const revisions = await eventually(async () => {
        const page = await after.get(`/v2/deployments/${id}/revisions?limit=100`);
        return page.body.resources.every((r: { status: string }) => TERMINAL.includes(r.status))
          ? (page.body.resources as Array<{ id: string; status: string }>)
          : undefined;
      }, 20_000);
      const ack = client.acknowledged.get(id);
      if (ack) for (const revisionId of ack.revisionIds) expect(revisions.map((r) => r.id)).toContain(revisionId);
      expect(revisions[0]!.status).toBe('DEPLOYED');
      const deployment = await after.get(`/v2/deployments/${id}`);
      expect(deployment.body).toMatchObject({ status: 'READY', latest_revision_id: revisions[0]!.id, active_revision_id: revisions[0]!.id });
    }
    for (const revisionId of unfinished) {
      const db = new Database(second.databasePath, { readonly: true });
      const row = db.prepare('SELECT status FROM revisions WHERE id = ?').get(revisionId) as { status: string } | undefined;
      db.close();
      expect(TERMINAL).toContain(row?.status);
    }

    await second.kill('SIGTERM');
    expect(integrityCheck(second.databasePath)).toBe('ok');
    expect(unfinishedRevisionIds(second.databasePath)).toEqual([]);
  });
});
