/**
 * `node bench/profile-get-revision.ts [seconds] [post] [--bare]`: profiles the real bundled server
 * under autocannon on GET revision (the Action's hot path), or on POST deployment with `post`, and
 * prints the top functions by self time. `--bare`: then the bare same-SQL server
 * (bench/baselines/http-sqlite.mjs, creates grouped as the server's) on a copy of the server's
 * database, profiled the same way under the same requests, for the side-by-side.
 * The `.cpuprofile` files stay in a temp directory (their paths are printed) for a closer look.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import type { Child } from './lib/processes.ts';
import { API_KEY, startControlPlane } from './lib/settings.ts';
import { startSqliteBaseline } from './lib/sqlite-baseline.ts';

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number };

const seconds = Number(process.argv[2] ?? 8);
const post = process.argv.includes('post');
const withBare = process.argv.includes('--bare');
const profileArgs = (dir: string) => ['--cpu-prof', `--cpu-prof-dir=${dir}`];
const serverDir = mkdtempSync(join(tmpdir(), 'cp-profile-'));
const server = await startControlPlane({ synchronous: 'FULL' }, { nodeArgs: profileArgs(serverDir) });
const api = apiClient(server.url, API_KEY);
const fx = await workspaceFixtures(api);
const paths: string[] = [];
let tenantId = '';
for (let i = 0; i < 20; i += 1) {
  const created = await api.post('/v2/deployments', githubBody(`profile-${i}-${Date.now()}`, fx.integrationId));
  paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
  tenantId = created.body.tenant_id;
}
let n = 0;
const requests: LoadRequest[] = post
  ? [
      {
        method: 'POST' as const,
        path: '/v2/deployments',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: () => JSON.stringify(githubBody(`profile-post-${n++}-${Date.now()}`, fx.integrationId)),
      },
    ]
  : paths.map((path) => ({ method: 'GET' as const, path, headers: { 'x-api-key': API_KEY } }));

/** Loads `child` for `seconds`, stops it (which writes its profile) and prints the profile's top functions. */
async function profile(name: string, child: Child, dir: string): Promise<void> {
  const result = await runLoad(child.url, { connections: 32, seconds, requests });
  console.log(`${name}, ${post ? 'POST deployment' : 'GET revision'}: ${Math.round(result.rps)} req/s under the profiler (${result.failures} failures)`);
  await child.stop();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('no profile written');
  const written = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { nodes: Node[]; samples: number[] };
  const total = written.samples.length;
  const self = new Map<string, number>();
  for (const node of written.nodes) {
    const where = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/server\/dist\//, 'dist/')}:${node.callFrame.lineNumber + 1}`;
    self.set(where, (self.get(where) ?? 0) + (node.hitCount ?? 0));
  }
  console.log(`profile: ${join(dir, file)} (${total} samples)`);
  for (const [where, hits] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${where}`);
}

// The copy is taken before the server's run, so the bare server reads the same rows.
const bareDir = mkdtempSync(join(tmpdir(), 'cp-profile-bare-'));
const bare = withBare
  ? await startSqliteBaseline({
      serverDatabasePath: server.databasePath,
      tenantId,
      synchronous: 'FULL',
      groupCommit: true,
      name: 'bare.db',
      nodeArgs: profileArgs(bareDir),
    })
  : undefined;
await profile('the server', server, serverDir);
if (bare) await profile('the bare server', bare, bareDir);
